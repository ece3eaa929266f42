"""The dashboard in a real browser (issue 33): a customer signs in with a management token,
creates an API key, makes RPC calls with it, sees them in the usage charts, revokes the key and
the router refuses it; management tokens are made and revoked there; a provider sees its plans
and nodes. Screenshots of the main pages go to var/screenshots/."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import CHAIN, Stack, screenshot

CALLS = 4


def _sign_in(page: Page, stack: Stack, token: str) -> None:
    page.goto(f"{stack.api}/dashboard")
    # By keyboard: the field has a label, Enter submits.
    field = page.get_by_label("Management token", exact=True)
    field.fill(token)
    field.press("Enter")
    expect(page.locator("#status")).to_contain_text("Signed in as")


def _rpc(stack: Stack, key: str, method: str = "eth_blockNumber") -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": []}
    return httpx.post(f"{stack.router}/rpc/{CHAIN}/{key}", json=body, timeout=10)


def test_a_customer_makes_a_key_uses_it_sees_the_calls_and_revokes_it(
    page: Page, stack: Stack, requested: list[str]
) -> None:
    _sign_in(page, stack, stack.customer_token)
    expect(page.locator("#account")).to_contain_text("5 credits")
    expect(page.locator("#chains")).to_contain_text(f"{stack.router}/rpc/{CHAIN}/YOUR_KEY")
    screenshot(page, "overview")

    page.get_by_role("button", name="API keys").click()
    form = page.locator("#key-form")
    form.get_by_label("Name").fill("browser app")
    form.get_by_label("Allowed domains").fill("*")
    form.get_by_label("Routing strategy").select_option("performance")
    page.get_by_role("button", name="Create key").click()
    secret_box = page.locator("#new-secret-value")
    expect(secret_box).to_contain_text("crk_")
    key = secret_box.inner_text().strip()
    expect(page.locator("#keys")).to_contain_text("browser app")
    expect(page.locator("#keys")).to_contain_text(key[-4:])
    screenshot(page, "api-keys")
    page.get_by_role("button", name="I have copied it").click()
    expect(page.locator("#new-secret")).to_be_hidden()
    assert key not in page.content()  # shown once, then gone from the page

    for _ in range(60):  # a new key reaches the router at its next poll (about a second)
        if _rpc(stack, key).status_code == 200:
            break
        time.sleep(0.1)
    answers = [_rpc(stack, key) for _ in range(CALLS)]
    assert [a.status_code for a in answers] == [200] * CALLS

    page.get_by_role("button", name="Usage").click()
    page.get_by_label("Period").select_option("1")
    calls = page.locator("#usage-summary dd").nth(1)  # Spent, Calls, Balance
    for _ in range(50):  # usage is flushed every second here
        page.get_by_role("button", name="Show").click()
        page.wait_for_timeout(200)
        if calls.inner_text() == str(CALLS + 1):  # the first call that answered counts too
            break
    expect(calls).to_have_text(str(CALLS + 1))
    assert page.locator("#chart-calls svg rect").count() >= 1
    expect(page.locator("#by-method")).to_contain_text("eth_blockNumber")
    expect(page.locator("#by-key")).to_contain_text("browser app")
    expect(page.locator("#by-chain")).to_contain_text(f"chain {CHAIN}")
    expect(page.locator("#by-scenario")).to_contain_text("first_choice")
    screenshot(page, "usage")

    page.get_by_role("button", name="API keys").click()
    page.get_by_role("button", name="Revoke key browser app").click()
    expect(page.locator("#keys")).to_contain_text("revoked")
    for _ in range(60):
        refused = _rpc(stack, key)
        if refused.status_code == 401:
            break
        time.sleep(0.1)
    assert refused.status_code == 401
    assert refused.headers["x-batch-id"]

    # Nothing the page loaded came from anywhere but the API's own origin.
    assert {f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in requested} == {stack.api}


def test_management_tokens_are_made_shown_once_and_revoked_in_the_page(
    page: Page, stack: Stack, requested: list[str]
) -> None:
    _sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="Management tokens").click()
    page.locator("#token-form").get_by_label("Label").fill("deploy script")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-secret-value")).to_contain_text("crm_")
    token = page.locator("#new-secret-value").inner_text().strip()
    expect(page.locator("#tokens")).to_contain_text("deploy script")
    screenshot(page, "tokens")
    works = httpx.get(f"{stack.api}/account", headers={"X-Api-Key": token}, timeout=10)
    assert works.status_code == 200
    page.get_by_role("button", name="Revoke token deploy script").click()
    expect(page.locator("#status")).to_contain_text("is revoked")
    gone = httpx.get(f"{stack.api}/account", headers={"X-Api-Key": token}, timeout=10)
    assert gone.status_code == 401
    # The token never appears in a URL the page requested.
    assert not any(token in url for url in requested)


def test_a_provider_sees_its_plans_prices_and_nodes(page: Page, stack: Stack) -> None:
    _sign_in(page, stack, stack.provider_token)
    page.get_by_role("button", name="Provider").click()
    expect(page.locator("#plans")).to_contain_text("starter")
    expect(page.locator("#plans")).to_contain_text("within_quota")
    page.get_by_role("button", name="Method prices of starter").click()
    expect(page.locator("#plan-methods")).to_contain_text("eth_blockNumber")
    expect(page.locator("#plan-methods")).to_contain_text("0.0001")
    expect(page.locator("#nodes")).to_contain_text("HTTP")
    expect(page.locator("#nodes")).to_contain_text(str(CHAIN))
    screenshot(page, "provider")


def test_a_customer_without_a_provider_sees_no_provider_section(page: Page, stack: Stack) -> None:
    _sign_in(page, stack, stack.customer_token)
    expect(page.get_by_role("button", name="Provider")).to_be_hidden()


def test_a_wrong_token_is_refused_and_nothing_is_kept(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.api}/dashboard")
    page.get_by_label("Management token", exact=True).fill("crm_" + "0" * 40)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#status")).to_contain_text("invalid or revoked management token")
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.locator("#nav")).to_be_hidden()


def test_every_field_has_a_label_and_signing_out_forgets_the_token(
    page: Page, stack: Stack
) -> None:
    _sign_in(page, stack, stack.customer_token)
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
              .filter((field) => field.labels.length === 0).map((field) => field.id)"""
    )
    assert unlabelled == []
    assert json.dumps(page.evaluate("Object.keys(sessionStorage)")) == '["chainrouter.token"]'
    page.get_by_role("button", name="Sign out").click()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.locator("#view-signin")).to_be_visible()


def test_the_logs_of_the_run_are_json_lines_with_a_line_per_request_and_no_secret(
    stack: Stack,
) -> None:
    """Runs after the others in this module: what they did is in the logs, nothing they sent
    that is secret is (tokens, keys: in headers, bodies and the router's paths)."""
    text = "".join(log.read_text() for log in stack.logs)
    assert stack.customer_token not in text
    assert stack.provider_token not in text
    assert "crk_" not in text
    assert "crm_" not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    requests = [line for line in lines if line["logger"] == "chainrouter.requests"]
    served = [line for line in requests if line["status"] == 200 and line["route"] == "keyed"]
    assert served
    first = served[0]
    assert first["methods"] == ["eth_blockNumber"]
    assert first["chain"] == CHAIN
    assert isinstance(first["key_id"], int)
    assert first["attempts"] >= 1
    assert first["batch_id"]
    assert first["duration_ms"] > 0
    assert any(line["status"] == 401 for line in requests)  # the revoked key's refusals
