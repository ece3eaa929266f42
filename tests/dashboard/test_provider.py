"""The provider's page in a real browser (issue 55): a provider answers "how are my nodes doing
and what did they earn" from it, and acts: adds nodes (screened as through the API), disables,
enables and deletes them after a confirmation, and prices its methods. Node ids are told by
kind; the plan's standing is explained."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Page, expect

from chainrouter.domain.records import NodeChecksWrite
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.node_checks import write_node_checks
from tests.dashboard.conftest import CHAIN, Stack, screenshot, sign_in, status
from tests.tls_nodes import MINING_CHAIN


def _provider(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.provider_token)
    expect(page.locator("#account")).to_contain_text("management token “ops” (customer role)")
    expect(page.locator("#account")).to_contain_text("Acting for provider")
    page.get_by_role("button", name="Provider").click()
    expect(page.locator("#plans")).to_contain_text("starter")


def _reported(stack: Stack) -> None:
    """Until the router has reported its health checks of both nodes (every 5 s)."""
    for _ in range(150):
        listed = httpx.get(
            f"{stack.api}/provider/nodes", headers={"X-Api-Key": stack.provider_token}, timeout=10
        ).json()
        if all(n["status"]["checked_at"] for n in listed):
            return
        time.sleep(0.1)
    raise AssertionError("the router reported no health of the nodes")


def _checked(stack: Stack) -> None:
    """What routers' flushes add when audits and proofs check the node's answers (the world has
    one provider: its own router finds no referee, and proves nothing)."""
    listed = httpx.get(
        f"{stack.api}/provider/nodes", headers={"X-Api-Key": stack.provider_token}, timeout=10
    ).json()
    [node_id] = [
        n["node"]["id"]
        for n in listed
        if n["kind"] == "http" and n["node"]["chain_id"] == str(CHAIN)
    ]
    engine = create_database_engine(stack.database_url)
    try:
        write_node_checks(
            engine,
            [
                NodeChecksWrite(
                    node_id, audits_passed=12, proofs_checked=3, last_audit_passed_at=1.8e9
                )
            ],
        )
    finally:
        engine.dispose()


def test_a_provider_sees_its_earnings_plans_and_how_each_node_is_doing(
    page: Page, stack: Stack
) -> None:
    _reported(stack)
    _checked(stack)
    _provider(page, stack)
    # Earnings: the history's served calls at the plan's prices, in all and over time.
    earnings = page.locator("#earnings")
    expect(earnings.locator("tr", has_text="starter")).to_contain_text(re.compile(r"[\d,]+ calls"))
    expect(page.locator("#earnings-summary")).to_contain_text("credits")
    expect(page.locator("#earnings-summary")).to_contain_text("Disputed, in all")
    expect(page.locator("#chart-earnings canvas")).to_have_count(1)
    # The standing, explained.
    plans = page.locator("#plans")
    expect(plans).to_contain_text("100,000 requests")
    expect(plans).to_contain_text("Within quota")
    expect(plans).to_contain_text("economy routing sends calls here first")
    # Nodes, told by kind, with what the routers last reported.
    node = page.locator("#nodes tr", has_text=f"Anvil ({CHAIN})")
    expect(node).to_contain_text(re.compile(r"HTTP node \d+"))
    expect(node).to_contain_text("healthy")
    expect(node).to_contain_text("at the chain's head")
    expect(node).to_contain_text(re.compile(r"\d+(\.\d)? ms"))
    # Audits and proofs: every router's counts; no answer of it outvoted nor refuted.
    expect(node).to_contain_text("12 audits passed, none outvoted")
    expect(node).to_contain_text("3 answers proven, none refuted")
    expect(node.locator("td").nth(7)).to_have_text("none")  # no answer of it disputed
    expect(page.locator("#ws-nodes")).to_contain_text("No WebSocket node")
    page.get_by_role("button", name="Method prices of starter").click()
    methods = page.locator("#plan-methods")
    expect(methods).to_contain_text("eth_blockNumber")
    expect(methods.locator("tr", has_text="eth_getBalance")).to_contain_text("0.0000003 credits")
    screenshot(page, "provider")


def test_a_provider_adds_a_node_screened_and_disables_enables_and_deletes_it(
    page: Page, stack: Stack
) -> None:
    _provider(page, stack)
    form = page.locator("#node-form")
    url = form.get_by_label("URL")
    # A node that does not answer fails screening: said at the URL field.
    url.fill("http://127.0.0.1:9/")
    page.get_by_role("button", name="Add HTTP node").click()
    expect(url).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#node-url-error")).to_contain_text("eth_chainId")
    url.fill(stack.anvil.urls["a2"])
    page.get_by_role("button", name="Add HTTP node").click()
    expect(page.locator("#view-provider .status")).to_contain_text("passed screening")
    expect(url).not_to_have_attribute("aria-invalid", "true")
    added = re.search(r"HTTP node (\d+)", status(page))
    assert added is not None
    name = f"HTTP node {added.group(1)}"
    row = page.locator("#nodes tr", has_text=stack.anvil.urls["a2"])
    expect(row).to_contain_text(name)

    page.get_by_role("button", name=f"Disable {name}").click()
    expect(page.get_by_role("dialog")).to_contain_text("It gets no traffic until you enable it")
    page.get_by_role("button", name="Disable node").click()
    expect(row).to_contain_text("disabled by you")
    page.get_by_role("button", name=f"Enable {name}").click()
    expect(row).not_to_contain_text("disabled by you")
    page.get_by_role("button", name=f"Delete {name}").click()
    page.get_by_role("button", name="Cancel").click()
    expect(row).to_have_count(1)  # cancelled: still there
    page.get_by_role("button", name=f"Delete {name}").click()
    page.get_by_role("button", name="Delete node").click()
    expect(page.locator("#view-provider .status")).to_contain_text(f"{name} is deleted")
    expect(row).to_have_count(0)


def test_a_provider_adds_a_websocket_node_and_one_that_fails_is_told_at_its_field(
    page: Page, stack: Stack
) -> None:
    _provider(page, stack)
    form = page.locator("#ws-node-form")
    form.get_by_label("Chain ID").fill(str(MINING_CHAIN))
    url = form.get_by_label("URL")
    url.fill("https://not.a.websocket.example/")  # the browser's check: ws:// or wss:// only
    page.get_by_role("button", name="Add WebSocket node").click()
    expect(url).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#ws-node-url-error")).not_to_be_empty()
    url.fill("wss://127.0.0.1:9/")  # the API's: screening, which nothing answers here
    page.get_by_role("button", name="Add WebSocket node").click()
    expect(page.locator("#ws-node-url-error")).to_contain_text(re.compile(r"\w"))
    expect(url).to_have_attribute("aria-invalid", "true")
    url.fill(stack.mining.wss)
    page.get_by_role("button", name="Add WebSocket node").click()
    expect(page.locator("#view-provider .status")).to_contain_text(
        f"passed screening and serves Anvil Mining ({MINING_CHAIN})"
    )
    row = page.locator("#ws-nodes tr", has_text=stack.mining.wss)
    expect(row).to_contain_text(re.compile(r"WebSocket node \d+"))
    name = re.search(r"WebSocket node \d+", row.inner_text())
    assert name is not None
    page.get_by_role("button", name=f"Disable {name.group(0)}").click()
    page.get_by_role("button", name="Disable node").click()
    expect(row).to_contain_text("disabled by you")
    page.get_by_role("button", name=f"Delete {name.group(0)}").click()
    page.get_by_role("button", name="Delete node").click()
    expect(row).to_have_count(0)
    expect(page.locator("#ws-nodes")).to_contain_text("No WebSocket node")


def test_a_provider_prices_a_method_in_the_page(page: Page, stack: Stack) -> None:
    _provider(page, stack)
    page.get_by_role("button", name="Method prices of starter").click()
    form = page.locator("#price-form")
    form.get_by_label("Method").fill("eth_call")
    form.get_by_label("Cost per call").fill("0.00000015")
    page.get_by_role("button", name="Save price").click()
    expect(page.locator("#plan-methods tr", has_text="eth_call")).to_contain_text(
        "0.00000015 credits"
    )
    form.get_by_label("Method").fill("eth_call")
    form.get_by_label("Cost per call").fill("-1")
    page.get_by_role("button", name="Save price").click()
    expect(form.get_by_label("Cost per call")).to_have_attribute("aria-invalid", "true")
