"""API keys and management tokens in a real browser: a customer makes a key with its settings,
uses it, changes them, revokes it after a confirmation and the router refuses it; the chains'
HTTP and WebSocket addresses and a `cast` line are copied from the page; tokens are made and
revoked, the one in use too; a bad value is told at its field; messages stay on their page."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import CHAIN, Stack, screenshot, sign_in, status

CALLS = 4


def test_a_customer_makes_a_key_uses_it_changes_it_and_revokes_it_after_confirming(
    page: Page, stack: Stack, requested: list[str]
) -> None:
    sign_in(page, stack, stack.customer_token)
    # 5 credits less the history's spend: rounded for people, exact on hover.
    expect(page.locator("#account")).to_contain_text("≈4.9 credits")
    exact = page.locator("#account dd span[title]")
    expect(exact).to_have_attribute("title", re.compile(r"^4\.9\d{4,} credits$"))
    expect(page.locator("#account")).to_contain_text("management token “laptop” (customer role)")
    page.get_by_role("button", name="API keys").click()
    form = page.locator("#key-form")
    form.get_by_label("Name").fill("browser app")
    form.get_by_label("Allowed domains").fill("*")
    form.get_by_label("Routing strategy").select_option("performance")
    form.get_by_label("Calls").fill("50")
    form.get_by_label("per seconds").fill("10")
    form.get_by_label("Spend alert").fill("0.25")
    form.get_by_label("Maximum price per call").fill("0.5")
    form.get_by_label("Verified answers").check()
    page.get_by_role("button", name="Create key").click()
    secret_box = page.locator("#new-secret-value")
    expect(secret_box).to_contain_text("crk_")
    key = secret_box.inner_text().strip()
    # The new key's addresses, ready to paste, in the secret's box.
    expect(page.locator("#new-secret-urls")).to_contain_text(f"{stack.router}/rpc/{CHAIN}/{key}")
    expect(page.locator("#new-secret-urls")).to_contain_text("ws://127.0.0.1:")
    table = page.locator("#keys")
    expect(table).to_contain_text("browser app")
    expect(table).to_contain_text(key[-4:])
    expect(table).to_contain_text("50 calls per 10 seconds")
    expect(table).to_contain_text("alert above 0.25 credits")
    expect(table).to_contain_text("at most 0.5 credits a call")
    expect(table).to_contain_text("verified answers")
    screenshot(page, "api-keys")
    page.get_by_role("button", name="I have copied it").click()
    expect(page.locator("#new-secret")).to_be_hidden()
    assert key not in page.content()  # shown once, then gone from the page
    screenshot(page, "api-keys-list")

    for _ in range(60):  # a new key reaches the router at its next poll (about a second)
        if stack.rpc(key).status_code == 200:
            break
        time.sleep(0.1)
    assert [stack.rpc(key).status_code for _ in range(CALLS)] == [200] * CALLS

    page.get_by_role("button", name="Edit key browser app").click()
    expect(form.get_by_label("Calls")).to_have_value("50")
    expect(form.get_by_label("Maximum price per call")).to_have_value("0.5")
    expect(form.get_by_label("Verified answers")).to_be_checked()
    form.get_by_label("Calls").fill("2")
    page.get_by_role("button", name="Save changes").click()
    expect(table).to_contain_text("2 calls per 10 seconds")
    for _ in range(60):  # the router applies the new limit at its next poll
        if stack.rpc(key).status_code == 429:
            break
        time.sleep(0.2)
    assert stack.rpc(key).status_code == 429

    # Revoking asks first; "Cancel" changes nothing.
    page.get_by_role("button", name="Revoke key browser app").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Revoke key browser app?")
    expect(page.get_by_role("button", name="Cancel")).to_be_focused()
    screenshot(page, "confirm-revoke", full_page=False)
    page.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(table.locator("tr", has_text="browser app")).to_contain_text("active")
    assert status(page) == "Nothing was revoked."
    page.get_by_role("button", name="Revoke key browser app").click()
    page.get_by_role("button", name="Revoke key", exact=True).click()
    expect(table.locator("tr", has_text="browser app")).to_contain_text("revoked")
    for _ in range(60):
        refused = stack.rpc(key)
        if refused.status_code == 401:
            break
        time.sleep(0.1)
    assert refused.status_code == 401
    assert refused.headers["x-batch-id"]

    # A message belongs to its page: another section starts without it.
    page.get_by_role("button", name="Overview").click()
    assert status(page) == ""
    # Nothing the page loaded came from anywhere but the API's own origin.
    assert {f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in requested} == {stack.api}


def test_each_chain_shows_its_http_and_websocket_addresses_and_a_cast_line_to_copy(
    page: Page, stack: Stack
) -> None:
    sign_in(page, stack, stack.customer_token)
    row = page.locator("#chains tr", has_text=f"chain ID {CHAIN}")
    http = f"{stack.router}/rpc/{CHAIN}/YOUR_KEY"
    ws = http.replace("http://", "ws://")
    expect(row).to_contain_text(http)
    expect(row).to_contain_text(ws)
    expect(row).to_contain_text(f"cast block-number --rpc-url {http}")
    screenshot(page, "overview")
    for name, text in [
        ("Copy the HTTP URL of Anvil", http),
        ("Copy the WebSocket URL of Anvil", ws),
        ("Copy the cast command for Anvil", f"cast block-number --rpc-url {http}"),
    ]:
        page.get_by_role("button", name=name, exact=True).click()
        expect(page.locator("#view-overview .status")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == text


def test_a_bad_value_is_told_at_its_field(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="API keys").click()
    form = page.locator("#key-form")
    domains = form.get_by_label("Allowed domains")
    # The browser's own check first: a required field left empty.
    page.get_by_role("button", name="Create key").click()
    expect(domains).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#key-domains-error")).not_to_be_empty()
    expect(domains).to_be_focused()
    # Then the API's: a domain it refuses is named at the field, not only at the top.
    domains.fill("app.example.com\nbad_domain!")
    alert = form.get_by_label("Spend alert")
    alert.fill("0.5")
    page.get_by_role("button", name="Create key").click()
    expect(domains).to_have_attribute("aria-invalid", "true")
    error = page.locator("#key-domains-error")
    expect(error).to_contain_text("'bad_domain!' is not a valid host name")
    assert domains.get_attribute("aria-describedby") == "key-domains-error"
    expect(alert).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#view-keys .status")).to_have_text(
        "Please correct the fields marked below."
    )
    screenshot(page, "field-error")
    # Fixed, the error goes.
    domains.fill("app.example.com")
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#new-secret-value")).to_contain_text("crk_")
    expect(domains).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#key-domains-error")).to_have_count(0)


def test_management_tokens_are_made_shown_once_and_revoked_after_confirming(
    page: Page, stack: Stack, requested: list[str]
) -> None:
    sign_in(page, stack, stack.customer_token)
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
    expect(page.get_by_role("dialog")).to_contain_text("Programs using it are refused at once")
    page.get_by_role("button", name="Revoke token", exact=True).click()
    expect(page.locator("#view-tokens .status")).to_contain_text("is revoked")
    gone = httpx.get(f"{stack.api}/account", headers={"X-Api-Key": token}, timeout=10)
    assert gone.status_code == 401
    # The token never appears in a URL the page requested.
    assert not any(token in url for url in requested)


def test_revoking_the_token_in_use_asks_first_then_signs_out(page: Page, stack: Stack) -> None:
    made = httpx.post(
        f"{stack.api}/tokens",
        json={"label": "short-lived"},
        headers={"X-Api-Key": stack.customer_token},
        timeout=10,
    ).json()
    sign_in(page, stack, made["token"])
    page.get_by_role("button", name="Management tokens").click()
    page.get_by_role("button", name="Revoke token short-lived").click()
    expect(page.get_by_role("dialog")).to_contain_text("This is the token you signed in with")
    page.get_by_role("button", name="Revoke token", exact=True).click()
    expect(page.locator("#view-signin")).to_be_visible()
    expect(page.locator("#view-signin .status")).to_contain_text("you are signed out")
    assert page.evaluate("sessionStorage.length") == 0


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
