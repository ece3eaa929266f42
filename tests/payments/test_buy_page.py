"""The dashboard's Buy credits page as a customer uses it, in headless chromium, with the router,
the API and the deposit watcher served: the deposit address with its QR code per chain and
asset, a deposit pending and then credited, the ledger of purchases, and card checkout sending
the customer to Stripe's page (the stand-in for Stripe's API makes the session)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from chainrouter.domain.enums import Role
from chainrouter.management import admin
from tests.anvil import REPO_ROOT, free_port
from tests.domain.test_deposit_address import wallet_address
from tests.payments.conftest import FINALITY, Shop, mine, send
from tests.payments.stripe_standin import StripeStandIn
from tests.served import serve, wait_healthy

SCREENSHOTS = REPO_ROOT / "var" / "screenshots"
SECRET_KEY = "sk_test_" + "p" * 24


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is missing: scripts/browser.sh installs it (make test)")
    with sync_playwright() as driver:
        # --no-sandbox: CI runs as root, where chromium's sandbox cannot start.
        launched = driver.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_customer_buys_credits_on_chain_and_by_card_from_the_page(
    shop: Shop, browser: Browser
) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with StripeStandIn(SECRET_KEY) as stripe_api:
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        env = shop.env(
            CHAINROUTER_API_PORT=str(port),
            CHAINROUTER_STRIPE_SECRET_KEY=SECRET_KEY,
            CHAINROUTER_STRIPE_WEBHOOK_SECRET="whsec_" + "p" * 32,
            CHAINROUTER_STRIPE_API_BASE=stripe_api.url,
        )
        shop.processes.append(process := serve("api", env, shop.tmp / "api.log"))
        wait_healthy(api, process, shop.tmp / "api.log")
        watcher_env = shop.env(
            CHAINROUTER_DEPOSIT_WATCH_API_KEY=shop.watcher_key,
            CHAINROUTER_DEPOSIT_WATCH_RPC_URL=shop.router,
            CHAINROUTER_DEPOSIT_WATCH_INTERVAL_S="0.1",
        )
        shop.processes.append(serve("watcher", watcher_env, shop.tmp / "watcher.log"))
        alice = shop.customers["alice"]
        token = admin.issue_token(shop.engine, alice, label="web", role=Role.CUSTOMER).secret

        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        page: Page = context.new_page()
        try:
            _buy(page, api, token, shop, wallet_address(alice), stripe_api)
        finally:
            page.screenshot(path=str(SCREENSHOTS / "buy-credits-last.png"), full_page=True)
            context.close()


def _buy(
    page: Page, api: str, token: str, shop: Shop, address: str, stripe_api: StripeStandIn
) -> None:
    page.goto(f"{api}/dashboard")
    page.fill("#signin-token", token)
    page.click("#signin-form button[type=submit]")
    page.click('#nav [data-view="billing"]')
    cards = page.locator("#deposit-options .deposit")
    expect(cards).to_have_count(2)  # ETH and TUSD on the pay chain
    expect(cards.nth(0).locator("h4")).to_contain_text("ETH on Pay chain")
    expect(cards.nth(0).locator("code[data-address]")).to_have_text(address)
    expect(cards.nth(1).locator("h4")).to_contain_text("TUSD")
    for index in range(2):
        qr = cards.nth(index).locator("img")
        expect(qr).to_be_visible()
        assert qr.evaluate("img => img.naturalWidth") > 0  # the SVG decoded
    expect(page.locator("#deposits tbody")).to_contain_text("No deposits yet.")

    time.sleep(0.3)  # the watcher marks where the chain is
    send(shop.node, address, 10**17)  # 0.1 ETH: 200 credits
    deadline = time.monotonic() + 20
    while "pending" not in page.locator("#deposits tbody").inner_text():
        assert time.monotonic() < deadline
        time.sleep(0.2)
        page.click('#nav [data-view="billing"]')
    expect(page.locator("#deposits tbody")).to_contain_text("0.1 ETH")
    mine(shop.node, FINALITY)
    while "credited" not in page.locator("#deposits tbody").inner_text():
        assert time.monotonic() < deadline
        time.sleep(0.2)
        page.click('#nav [data-view="billing"]')
    expect(page.locator("#billing-balance")).to_have_text("200")
    expect(page.locator("#purchases tbody tr").first).to_contain_text("purchase")

    page.screenshot(path=str(SCREENSHOTS / "buy-credits.png"), full_page=True)

    # Card: the page sends the customer to the Checkout page Stripe made.
    def stripe_page(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body="<h1>Stripe Checkout</h1>")

    page.route("https://checkout.stripe.com/**", stripe_page)
    expect(page.locator("#billing-card")).to_be_visible()
    page.fill("#checkout-credits", "30")
    page.click("#checkout-form button[type=submit]")
    page.wait_for_url("https://checkout.stripe.com/**")
    [form] = stripe_api.sessions
    assert form["line_items[0][price_data][unit_amount]"] == "3000"
