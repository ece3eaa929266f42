"""The dashboard as a person uses it: `chainrouter serve` (router and management API) on a SQLite
database with a real anvil node, and Debian's chromium, headless, driven by Playwright.

The world: chain 31337 on the session's anvil node a1, provider `dash` pricing eth_blockNumber
and eth_chainId, customer `Dana` with 5 credits and a management token (no API key: the test
makes one in the page), and customer `Ops` linked to the provider.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import REPO_ROOT, AnvilNodes, free_port
from tests.served import serve, stop, wait_healthy

CHAIN = 31337
SCREENSHOTS = REPO_ROOT / "var" / "screenshots"


@dataclass(frozen=True)
class Stack:
    api: str
    router: str
    customer_token: str
    provider_token: str
    logs: list[Path]


def _world(customer_token: str, provider_token: str, node: str) -> dict[str, object]:
    return {
        "version": 1,
        "chains": [
            {
                "chain_id": CHAIN,
                "name": "Anvil",
                "short_name": "anvil",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": [
            {
                "slug": "dash",
                "name": "Dash Nodes",
                "plans": [
                    {
                        "name": "starter",
                        "quota": 1000,
                        "methods": [
                            {"method": "eth_blockNumber", "cost": "0.0001"},
                            {"method": "eth_chainId", "cost": "0"},
                        ],
                        "nodes": [{"url": node, "chain_id": CHAIN}],
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
            },
            {
                "email": "ops@dash.example",
                "name": "Ops",
                "provider": "dash",
                "management_tokens": [{"label": "ops", "secret": provider_token}],
            },
        ],
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, anvil: AnvilNodes) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("dashboard")
    customer_token = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    provider_token = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    database_url = f"sqlite:///{work / 'dashboard.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    apply_config(
        engine, validate_document(_world(customer_token, provider_token, anvil.urls["a1"]))
    )
    engine.dispose()
    api_port, rpc_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")},
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_API_PORT": str(api_port),
        "CHAINROUTER_RPC_PORT": str(rpc_port),
        "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "1",
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its node is on loopback
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / "journal"),
        "CHAINROUTER_LOG_LEVEL": "info",
        "CHAINROUTER_LOG_FORMAT": "json",
        "CHAINROUTER_REQUEST_LOG_LEVEL": "info",  # a line per request, read by the last test
    }
    logs = [work / "api.log", work / "rpc.log"]
    processes = [serve("api", env, logs[0]), serve("rpc", env, logs[1])]
    try:
        api, router = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{rpc_port}"
        wait_healthy(api, processes[0], logs[0])
        wait_healthy(router, processes[1], logs[1])
        yield Stack(api, router, customer_token, provider_token, logs)
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
    """A page in a fresh browser context: no storage shared with another test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield context.new_page()
    context.close()


@pytest.fixture
def requested(page: Page) -> list[str]:
    """Every URL the page requests from now on."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    return seen


def screenshot(page: Page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
