"""The dashboard as a person uses it: `chainrouter serve` (router and management API) on a SQLite
database with real anvil nodes, and Debian's chromium, headless, driven by Playwright.

The world: chains 31337 (anvil a1) and 31338 (anvil b1), served by provider `dash` (plan
`starter`, with a quota) pricing eth_blockNumber and eth_chainId; customer `Dana` with 5 credits,
a management token and a key `backend` with 30 days of usage history (written to storage as a
router's flush writes it, so the charts have days to show); customer `Ops` linked to the
provider, whose plan earned from that history. Anvil a2 is left for the provider to add in the
page, and so is the mining anvil of chain 31339 behind wss:// (a WebSocket node must deliver a
head). Each test module gets its own world and servers.

Screenshots are test artefacts: `var/screenshots/` (the main pages' pictures in docs/ were taken
from there).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright
from sqlalchemy import Engine, select

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.usage import write_usage
from tests.anvil import REPO_ROOT, AnvilNodes, free_port
from tests.served import serve, stop, wait_healthy
from tests.tls_nodes import MINING_CHAIN, MiningNode, Tls

CHAIN = 31337
CHAIN_B = 31338
SCREENSHOTS = REPO_ROOT / "var" / "screenshots"
HISTORY_DAYS = 30


@dataclass(frozen=True)
class Stack:
    api: str
    router: str
    customer_token: str
    provider_token: str
    backend_key: str  # Dana's key with history
    logs: list[Path]
    anvil: AnvilNodes
    mining: MiningNode  # a node that mines every second, behind wss:// (WebSocket nodes)
    database_url: str

    def rpc(self, key: str, method: str = "eth_blockNumber", chain: int = CHAIN) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": []}
        return httpx.post(f"{self.router}/rpc/{chain}/{key}", json=body, timeout=10)


def _chain(chain_id: int, name: str) -> dict[str, object]:
    return {
        "chain_id": chain_id,
        "name": name,
        "short_name": name.lower().replace(" ", "-"),
        "native_currency": {"name": "Ether", "symbol": "ETH"},
    }


def _world(
    customer_token: str, provider_token: str, key: str, anvil: AnvilNodes
) -> dict[str, object]:
    return {
        "version": 1,
        "chains": [
            _chain(CHAIN, "Anvil"),
            _chain(CHAIN_B, "Anvil B"),
            _chain(MINING_CHAIN, "Anvil Mining"),
        ],
        "providers": [
            {
                "slug": "dash",
                "name": "Dash Nodes",
                "plans": [
                    {
                        "name": "starter",
                        "quota": 100000,
                        "methods": [
                            {"method": "eth_blockNumber", "cost": "0.0001"},
                            {"method": "eth_chainId", "cost": "0"},
                            {"method": "eth_getBalance", "cost": "0.0000003"},
                        ],
                        "nodes": [
                            {"url": anvil.urls["a1"], "chain_id": CHAIN},
                            {"url": anvil.urls["b1"], "chain_id": CHAIN_B},
                        ],
                    }
                ],
            }
        ],
        "customers": [
            {
                "email": "dana@example.com",
                "name": "Dana",
                "credits": [{"reference": "welcome", "amount": "5"}],
                "management_tokens": [{"label": "laptop", "secret": customer_token}],
                "api_keys": [
                    {
                        "name": "backend",
                        "secret": key,
                        "allowed_domains": ["*"],
                        "routing_strategy": "economy",
                    }
                ],
            },
            {
                "email": "ops@dash.example",
                "name": "Ops",
                "provider": "dash",
                "management_tokens": [{"label": "ops", "secret": provider_token}],
            },
        ],
    }


def _history(engine: Engine) -> None:
    """30 days of Dana's `backend` key on both chains, as routers flush usage: served calls on
    the provider's plan (so it earned them), and some that failed or were limited."""
    with engine.connect() as connection:
        customer = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == "dana@example.com")
        ).scalar_one()
        key = connection.execute(select(t.api_keys.c.id)).scalar_one()
        plan = connection.execute(select(t.plans.c.id)).scalar_one()
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows: dict[tuple[int, int, int, str, str, int, int], list[int]] = {}
    prices = {"eth_blockNumber": 100_000, "eth_getBalance": 300, "eth_chainId": 0}
    for day in range(HISTORY_DAYS, 0, -1):
        if day % 9 == 4:
            continue  # a quiet day: the charts show it as zero, not as a gap
        hour = int((now - timedelta(days=day, hours=day % 5)).timestamp())
        for chain, method, served in [
            (CHAIN, "eth_blockNumber", 20 + 3 * (day % 7)),
            (CHAIN, "eth_getBalance", 40 + 11 * (day % 4)),
            (CHAIN_B, "eth_blockNumber", 5 + day % 6),
            (CHAIN_B, "eth_chainId", 12),
        ]:
            rows[(customer, key, chain, method, "first_choice", hour, plan)] = [
                served,
                served * prices[method],
            ]
        if day % 3 == 0:
            rows[(customer, key, CHAIN, "eth_getBalance", "all_failed", hour, 0)] = [2 + day % 4, 0]
        if day % 5 == 0:
            rows[(customer, key, CHAIN_B, "eth_call", "unsupported_method", hour, 0)] = [3, 0]
        if day % 7 == 1:
            rows[(customer, key, CHAIN, "eth_blockNumber", "rate_limited", hour, 0)] = [4, 0]
    spend = {customer: sum(nano for (*_, plan_id), (_, nano) in rows.items() if plan_id)}
    write_usage(engine, rows, spend, reference="dashboard-history")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, anvil: AnvilNodes, mining_anvil: MiningNode, tls: Tls
) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("dashboard")
    customer_token = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    provider_token = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    key = generate_secret(SecretKind.API_KEY)
    database_url = f"sqlite:///{work / 'dashboard.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    apply_config(engine, validate_document(_world(customer_token, provider_token, key, anvil)))
    _history(engine)
    engine.dispose()
    api_port, rpc_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")},
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_API_PORT": str(api_port),
        "CHAINROUTER_RPC_PORT": str(rpc_port),
        "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "1",
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its nodes are on loopback
        "CHAINROUTER_OUTBOUND_CA_FILE": str(tls.ca_file),  # the wss:// front's test CA
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / "journal"),
        "CHAINROUTER_SIGNUP_ENABLED": "true",
        "CHAINROUTER_SIGNUP_FREE_CREDITS": "1",
        "CHAINROUTER_LOG_LEVEL": "info",
        "CHAINROUTER_LOG_FORMAT": "json",
        "CHAINROUTER_REQUEST_LOG_LEVEL": "info",  # a line per request, read by a test
    }
    logs = [work / "api.log", work / "rpc.log"]
    processes = [serve("api", env, logs[0]), serve("rpc", env, logs[1])]
    try:
        api, router = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{rpc_port}"
        wait_healthy(api, processes[0], logs[0])
        wait_healthy(router, processes[1], logs[1])
        yield Stack(
            api,
            router,
            customer_token,
            provider_token,
            key,
            logs,
            anvil,
            mining_anvil,
            database_url,
        )
    finally:
        stop(processes)


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("Debian's chromium is missing: scripts/browser.sh installs it (make test)")
    return found


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # --no-sandbox: CI runs as root, where chromium's sandbox cannot start.
    launched = playwright.chromium.launch(
        executable_path=_chromium(), headless=True, args=["--no-sandbox"]
    )
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Browser, stack: Stack) -> Iterator[Page]:
    """A page in a fresh browser context (no storage shared with another test), in a fixed time
    zone so that the pictures and the labels they show do not depend on the machine."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        timezone_id="Europe/Berlin",
        locale="en-GB",
        permissions=["clipboard-read", "clipboard-write"],
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    opened = context.new_page()
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield opened
    context.close()
    # Only the refusals a test provokes may be in the console: no script error.
    assert [e for e in errors if "Failed to load resource" not in e] == []


@pytest.fixture
def requested(page: Page) -> list[str]:
    """Every URL the page requests from now on."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    return seen


def screenshot(page: Page, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def sign_in(page: Page, stack: Stack, token: str) -> None:
    page.goto(f"{stack.api}/dashboard")
    # By keyboard: the field has a label, Enter submits.
    field = page.get_by_label("Management token", exact=True)
    field.fill(token)
    field.press("Enter")
    expect(page.locator("#view-overview .status")).to_contain_text("Signed in as")


def status(page: Page) -> str:
    """The message line of the section shown."""
    return page.locator("main > section:not([hidden]) .status").inner_text()
