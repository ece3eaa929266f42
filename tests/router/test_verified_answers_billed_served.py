"""Verified answers priced as calls, served (docs/integrity.md, "What it costs"): on both
executors, two providers' nodes over one real anvil chain (through the fault-injecting upstream,
which counts what each is asked), the chain's `verify` at `always`, usage and balances in
SQLite. A proven state read costs its customer the call and each call its proof made at the
answering plan's price for that method; storage has them under the scenario `verification`, and
each plan's hourly usage (what its provider earns) has what its node answered. A customer whose
balance holds the call but not its check gets the answer unproven, and ends at zero."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, node_result, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

RECIPIENT = "0x00000000000000000000000000000000000000aa"
BALANCE, HEADER, PROOF = "eth_getBalance", "eth_getBlockByNumber", "eth_getProof"
NANO = Decimal(10**9)
PRICES = {
    "cheap": {
        BALANCE: Decimal("0.0000002"),
        HEADER: Decimal("0.0000001"),
        PROOF: Decimal("0.0000003"),
        "eth_blockNumber": Decimal("0.0000001"),
        "eth_chainId": Decimal(0),
    },
    "dear": {
        BALANCE: Decimal("0.000001"),
        HEADER: Decimal("0.000002"),
        PROOF: Decimal("0.000003"),
        "eth_blockNumber": Decimal("0.000001"),
        "eth_chainId": Decimal(0),
    },
}
SETTINGS = {
    "CHAINROUTER_VERIFY": "always",
    "CHAINROUTER_CACHE_MAX_BYTES": "0",
    "CHAINROUTER_HEDGE_MAX": "0",
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",
    "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',
}


def _nano(price: Decimal) -> int:
    return int(price * NANO)


@pytest.fixture(scope="module")
def chain() -> Iterator[str]:
    """An anvil of its own: a transfer to RECIPIENT in block 1, then a few blocks."""
    nodes = start_anvil_nodes((("billed", CHAIN_A),))
    url = next(nodes).urls["billed"]
    sender = node_result(url, "eth_accounts", [])[0]
    node_result(url, "eth_sendTransaction", [{"from": sender, "to": RECIPIENT, "value": "0x2a"}])
    node_result(url, "anvil_mine", ["0x4"])
    yield url
    nodes.close()


class _Router:
    def __init__(
        self, chain: str, upstream: FaultyUpstream, tmp: Path, executor: str, credits: str
    ) -> None:
        port = chain.rsplit(":", 1)[1]
        self.upstream = upstream
        self.paths = {name: f"/relay/{port}/full/{tmp.name}-{name}" for name in PRICES}
        key = api_key("main")
        self.engine = create_database_engine(f"sqlite:///{tmp / 'billed.db'}")
        migrate.upgrade(self.engine)
        providers = [
            provider(
                name,
                {method: str(price) for method, price in PRICES[name].items()},
                [(upstream.url(path), CHAIN_A)],
            )
            for name, path in self.paths.items()
        ]
        apply_config(
            self.engine, validate_document(world_config(providers, [key], credits=credits))
        )
        secret = key["secret"]
        self.served: Served = launch_router(
            tmp / "router",
            executor,
            "127.0.0.1",
            self.engine.url.render_as_string(),
            secret,
            secret,
            SETTINGS,
        )
        deadline = time.monotonic() + 20
        while self._metric("chainrouter_node_up{") < 2:
            assert time.monotonic() < deadline, "the nodes never came up"
            time.sleep(0.05)

    def _metric(self, prefix: str) -> float:
        text = httpx.get(self.served.base + "/metrics", timeout=30).text
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    def ask(self, method: str, params: list[Any]) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(self.served.url(), json=body, timeout=30)

    def asked(self) -> dict[str, int]:
        return {name: self.upstream.requests[path] for name, path in self.paths.items()}

    def stop(self) -> None:
        """Stop the router: its last flush writes what it metered."""
        if self.served.process.poll() is None:
            self.served.process.terminate()
            self.served.process.wait(30)

    def usage(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Calls and nano-credits in storage by (method, scenario)."""
        usage = t.usage_aggregates
        query = select(
            usage.c.method,
            usage.c.scenario,
            func.sum(usage.c.request_count),
            func.sum(usage.c.credits_nano),
        ).group_by(usage.c.method, usage.c.scenario)
        with self.engine.connect() as connection:
            return {(m, s): (int(n), int(c)) for m, s, n, c in connection.execute(query)}

    def earned(self) -> dict[str, tuple[int, int]]:
        """Each provider's plan's calls and nano-credits in its hourly usage."""
        plans, hours = t.plans, t.plan_hourly_usage
        query = (
            select(plans.c.name, func.sum(hours.c.request_count), func.sum(hours.c.credits_nano))
            .join(plans, plans.c.id == hours.c.plan_id)
            .group_by(plans.c.name)
        )
        with self.engine.connect() as connection:
            return {
                name.removesuffix("-plan"): (int(n), int(c))
                for name, n, c in connection.execute(query)
            }


@pytest.fixture
def router_of(
    chain: str, upstream: FaultyUpstream, tmp_path: Path, on_native: bool
) -> Iterator[Any]:
    made: list[_Router] = []

    def make(credits: str = "10") -> _Router:
        router = _Router(chain, upstream, tmp_path, "native" if on_native else "python", credits)
        made.append(router)
        return router

    yield make
    for router in made:
        router.stop()
        router.engine.dispose()


def test_a_proven_read_bills_its_proofs_calls_and_pays_the_plans_that_answered_them(
    router_of: Any,
) -> None:
    router = router_of()
    before, asked = router.served.balance(), router.asked()
    reply = router.ask(BALANCE, [RECIPIENT, "0x1"])
    assert reply.json()["result"] == "0x2a"
    assert reply.headers["x-verified"] == "proof"
    now = router.asked()
    # The cheap node's answer, its header and its proof; the dear node's header, agreeing.
    assert (now["cheap"] - asked["cheap"], now["dear"] - asked["dear"]) == (3, 1)
    router.stop()
    cheap, dear = PRICES["cheap"], PRICES["dear"]
    assert router.usage() == {
        (BALANCE, "first_choice"): (1, _nano(cheap[BALANCE])),
        (HEADER, "verification"): (2, _nano(cheap[HEADER]) + _nano(dear[HEADER])),
        (PROOF, "verification"): (1, _nano(cheap[PROOF])),
    }
    spent = _nano(cheap[BALANCE] + cheap[HEADER] + dear[HEADER] + cheap[PROOF])
    assert before - router.served.balance() == spent
    assert router.earned() == {
        "cheap": (3, _nano(cheap[BALANCE] + cheap[HEADER] + cheap[PROOF])),
        "dear": (1, _nano(dear[HEADER])),
    }


def test_a_balance_that_holds_the_call_but_not_its_check_gets_the_answer_unproven(
    router_of: Any,
) -> None:
    router = router_of(credits=str(PRICES["cheap"][BALANCE]))
    asked = router.asked()
    reply = router.ask(BALANCE, [RECIPIENT, "0x1"])
    assert reply.json()["result"] == "0x2a"
    assert "x-verified" not in reply.headers
    assert router.asked()["cheap"] - asked["cheap"] == 1  # nothing asked for a proof
    router.stop()
    assert router.usage() == {(BALANCE, "first_choice"): (1, _nano(PRICES["cheap"][BALANCE]))}
    assert router.served.balance() == 0
