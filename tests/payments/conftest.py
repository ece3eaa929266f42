"""A shop to buy credits in: a real anvil node of its own chain, a served router (`chainrouter
serve --role rpc`) on a fresh database of either backend, the operator's watcher key, and
customers with deposit addresses derived from the BIP-39 test mnemonic's account key.

The world: chain PAY_CHAIN, provider `nodes` pricing what the watcher reads on the anvil node;
the ERC-20 token TUSD (OpenZeppelin's ERC20, compiled with solc from npm, 6 decimals) deployed
there; customer `operator` with the watcher's key (bypass_credit_check); customers `alice` and
`bob`. Payments: native coin at 2000 credits per coin (minimum 0.001), TUSD at 1 credit per
token, both credited once the chain's finalized block reaches them (anvil: 64 blocks behind).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.domain.deposits import DepositState
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.payments.reader import RouterReader
from chainrouter.payments.watcher import DepositWatcher
from chainrouter.stores.sql import migrate, payments
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import REPO_ROOT, free_port, node_result, start_anvil_nodes
from tests.domain.test_deposit_address import account_xpub
from tests.served import serve, stop, wait_healthy

PAY_CHAIN = 31346
SENDER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"  # anvil's first unlocked account
FINALITY = 64  # anvil's finalized block is 64 behind its head
ETH_RATE = Decimal(2000)
PRICES = {
    "eth_blockNumber": "0.0000001",
    "eth_getBlockByNumber": "0.0000003",
    "eth_getTransactionReceipt": "0.0000003",
    "eth_getLogs": "0.000001",
    "eth_call": "0.0000005",
}
_compiled: dict[str, Any] = {}


def compiled_token() -> dict[str, Any]:
    """OpenZeppelin's ERC20 as the tests' token, compiled once per run with npm's solc."""
    if not _compiled:
        done = subprocess.run(
            ["node", str(Path(__file__).with_name("compile_token.mjs"))],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=REPO_ROOT,
        )
        assert done.returncode == 0, done.stderr
        _compiled.update(json.loads(done.stdout))
    return _compiled


def send(node: str, to: str, wei: int) -> str:
    """A native transfer from anvil's first account, mined at once; its transaction hash."""
    tx: str = node_result(
        node, "eth_sendTransaction", [{"from": SENDER, "to": to, "value": hex(wei)}]
    )
    return tx


def send_token(node: str, token: str, to: str, units: int) -> str:
    data = "0xa9059cbb" + to[2:].lower().rjust(64, "0") + f"{units:064x}"
    tx: str = node_result(
        node, "eth_sendTransaction", [{"from": SENDER, "to": token, "data": data}]
    )
    return tx


def mine(node: str, blocks: int) -> None:
    node_result(node, "anvil_mine", [hex(blocks)])


def deploy_token(node: str) -> str:
    token = compiled_token()
    supply = f"{10**15:064x}"  # a billion tokens of 6 decimals
    tx = node_result(
        node, "eth_sendTransaction", [{"from": SENDER, "data": token["bytecode"] + supply}]
    )
    receipt = node_result(node, "eth_getTransactionReceipt", [tx])
    assert receipt["status"] == "0x1", receipt
    address: str = receipt["contractAddress"]
    return address.lower()


@dataclass
class Shop:
    engine: Engine
    database_url: str
    node: str
    router: str
    token: str
    watcher_key: str
    xpub: str
    customers: dict[str, int]
    tmp: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def address(self, customer: str) -> str:
        """The customer's deposit address, as the API shows it (and records it, once)."""
        with self.engine.begin() as connection:
            return payments.deposit_address(connection, self.xpub, self.customers[customer])

    def watcher(self, client: httpx.AsyncClient) -> DepositWatcher:
        reader = RouterReader(self.router, self.watcher_key, client)
        return DepositWatcher(self.engine, reader, finality_depth=lambda _chain: FINALITY)

    def balance(self, customer: str) -> int:
        with self.engine.connect() as connection:
            balance: int = connection.execute(
                select(t.customers.c.balance_nano).where(
                    t.customers.c.id == self.customers[customer]
                )
            ).scalar_one()
            return balance

    def deposits(self, customer: str | None = None) -> list[payments.Deposit]:
        with self.engine.connect() as connection:
            return payments.list_deposits(
                connection,
                customer_id=None if customer is None else self.customers[customer],
                limit=1000,
            )

    def states(self, customer: str) -> list[DepositState]:
        return [d.state for d in self.deposits(customer)]

    def purchases(self, customer: str) -> list[tuple[str, int]]:
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(t.credit_ledger.c.reference, t.credit_ledger.c.amount_nano)
                .where(
                    t.credit_ledger.c.customer_id == self.customers[customer],
                    t.credit_ledger.c.kind == "purchase",
                )
                .order_by(t.credit_ledger.c.id)
            ).all()
        return [(reference, amount) for reference, amount in rows]

    def env(self, **settings: str) -> dict[str, str]:
        return {
            **os.environ,
            "CHAINROUTER_DATABASE_URL": self.database_url,
            "CHAINROUTER_LOG_LEVEL": "info",
            "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",
            "CHAINROUTER_USAGE_JOURNAL_DIR": str(self.tmp / "journal"),
            "CHAINROUTER_METRICS_DIR": str(self.tmp / "metrics"),
            **settings,
        }


def shop_config(node: str, token: str, secrets: dict[str, str], xpub: str) -> dict[str, Any]:
    def customer(name: str, **extra: Any) -> dict[str, Any]:
        return {"email": f"{name}@shop.test", "name": name.title(), **extra}

    return {
        "version": 1,
        "chains": [
            {
                "chain_id": PAY_CHAIN,
                "name": "Pay chain",
                "short_name": "pay",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": [
            {
                "slug": "nodes",
                "name": "Nodes",
                "plans": [
                    {
                        "name": "all",
                        "methods": [{"method": m, "cost": Decimal(c)} for m, c in PRICES.items()],
                        "nodes": [{"url": node, "chain_id": PAY_CHAIN}],
                    }
                ],
            }
        ],
        "customers": [
            customer(
                "operator",
                api_keys=[
                    {
                        "name": "deposit watcher",
                        "secret": secrets["watcher"],
                        "allowed_domains": ["*"],
                        "bypass_credit_check": True,
                    }
                ],
            ),
            customer("alice"),
            customer("bob"),
        ],
        "payments": {
            "deposit_xpub": xpub,
            "deposits": [
                {
                    "chain_id": PAY_CHAIN,
                    "asset": "native",
                    "credits_per_unit": ETH_RATE,
                    "minimum": Decimal("0.001"),
                },
                {"chain_id": PAY_CHAIN, "asset": token, "credits_per_unit": 1, "symbol": "TUSD"},
            ],
        },
    }


def start_router(shop: Shop) -> str:
    port = free_port()
    log = shop.tmp / f"router-{port}.log"
    process = serve(
        "rpc",
        shop.env(
            CHAINROUTER_RPC_PORT=str(port),
            CHAINROUTER_RPC_SERVER="python",
            CHAINROUTER_HEALTH_CHECK_INTERVAL_S="0.5",
            CHAINROUTER_USAGE_FLUSH_INTERVAL_S="0.5",
            CHAINROUTER_LOG_LEVEL="warning",
        ),
        log,
    )
    shop.processes.append(process)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process, log)
    return url


@pytest.fixture
def pay_node() -> Iterator[str]:
    """An anvil node of PAY_CHAIN of the test's own: tests mine and reorganise it."""
    nodes = start_anvil_nodes((("pay", PAY_CHAIN),))
    found = next(nodes)
    yield found.urls["pay"]
    nodes.close()


@pytest.fixture
def shop(database_url: str, pay_node: str, tmp_path: Path) -> Iterator[Shop]:
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    token = deploy_token(pay_node)
    secrets = {"watcher": generate_secret(SecretKind.API_KEY)}
    xpub = account_xpub()
    apply_config(engine, validate_document(shop_config(pay_node, token, secrets, xpub)))
    with engine.connect() as connection:
        customers = {
            email.split("@")[0]: customer_id
            for customer_id, email in connection.execute(
                select(t.customers.c.id, t.customers.c.email)
            )
        }
    made = Shop(
        engine, database_url, pay_node, "", token, secrets["watcher"], xpub, customers, tmp_path
    )
    try:
        made.router = start_router(made)
        yield made
    finally:
        stop(made.processes)
        engine.dispose()
