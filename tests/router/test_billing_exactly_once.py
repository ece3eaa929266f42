"""Every call a native router serves is billed exactly once, whoever served it: the pipeline, or
the server under a decision (answered from the cache or by the node), whatever happens around
it. A property over generated interleavings of calls (single and batched, distinct and
repeated, final and at the head), the node failing and coming back, configuration reloads and
cache purges: for each interleaving, the balance drops by exactly what usage records, and usage
counts exactly the calls that were answered, once each.

One router serves every example (starting one is the slow part); each example is measured by
what it adds to storage, once the router has flushed it."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from chainrouter.management.admin import purge_chain_cache
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"  # anvil's first account: a balance
PRICES = {"eth_getBalance": Decimal("0.0000002"), "eth_call": Decimal("0.0000003")}
CACHE_PRICE = Decimal("0.00000005")


class _Billing:
    """A native router with one node (through the fault-injecting upstream, so that it can be
    taken down), the response cache on at a price, its usage flushed often."""

    def __init__(self, tmp: Path, node: str, upstream: FaultyUpstream) -> None:
        port = node.rsplit(":", 1)[1]
        self.upstream = upstream
        self.path = f"/relay/{port}/full/{tmp.name}-billing"
        self.key = api_key("main")
        self.engine: Engine = create_database_engine(f"sqlite:///{tmp / 'billing.db'}")
        migrate.upgrade(self.engine)
        self.reloads = 0
        self.apply()
        secret = self.key["secret"]
        self.served: Served = launch_router(
            tmp / "router",
            "native",
            "127.0.0.1",
            self.engine.url.render_as_string(),
            secret,
            secret,
            {
                "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "0.2",
                "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
                "CHAINROUTER_CACHE_PRICES": f'{{"*": "{CACHE_PRICE:f}"}}',
                "CHAINROUTER_COALESCE": "false",
                "CHAINROUTER_HEDGE_MAX": "0",
                "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
                "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",
                "CHAINROUTER_CACHE_FINALITY_DEPTH": "10",
            },
        )

    def apply(self) -> None:
        prices = {method: str(price) for method, price in PRICES.items()}
        nodes = [(self.upstream.url(self.path), CHAIN_A)]
        config = world_config([provider("only", prices, nodes)], [self.key], credits="1000")
        config["customers"][0]["name"] = f"Billing {self.reloads}"  # a new configuration
        apply_config(self.engine, validate_document(config))

    def post(self, body: Any) -> httpx.Response:
        return httpx.post(self.served.url(), json=body, timeout=30)

    def ledger(self) -> tuple[int, int, int]:
        """(balance, calls, nano-credits) in storage, once everything served is flushed."""
        time.sleep(0.3)  # past a flush interval
        deadline = time.monotonic() + 20
        while httpx.get(self.served.base + "/health", timeout=10).json()["unwritten_usage_batches"]:
            assert time.monotonic() < deadline, "usage never reached storage"
            time.sleep(0.1)
        time.sleep(0.3)  # a flush taken as the last calls were metered
        usage = t.usage_aggregates
        with self.engine.connect() as connection:
            calls, credits = connection.execute(
                select(func.sum(usage.c.request_count), func.sum(usage.c.credits_nano)).where(
                    usage.c.scenario.in_(("first_choice", "cache"))
                )
            ).one()
        return self.served.balance(), int(calls or 0), int(credits or 0)


@pytest.fixture(scope="module")
def billing(
    final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path_factory: Any
) -> Iterator[_Billing]:
    router = _Billing(
        tmp_path_factory.mktemp("billing"), final_blocks_node.urls["node"], upstream_server
    )
    yield router
    router.served.process.terminate()
    router.served.process.wait(30)
    router.engine.dispose()


def _call(kind: str, call_id: int) -> dict[str, Any]:
    if kind == "head":  # a balance of an address of its own, at the head: decided, masked
        params: list[Any] = ["0x" + secrets.token_hex(20), "latest"]
        return {"jsonrpc": "2.0", "id": call_id, "method": "eth_getBalance", "params": params}
    if kind == "final":  # a final block: kept, then answered from the cache
        params = [ACCOUNT, "0x5"]
        return {"jsonrpc": "2.0", "id": call_id, "method": "eth_getBalance", "params": params}
    data = "0x" + secrets.token_hex(4)
    call = {"to": ACCOUNT, "data": data}
    return {"jsonrpc": "2.0", "id": call_id, "method": "eth_call", "params": [call, "latest"]}


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("calls"),
            st.lists(st.sampled_from(["head", "final", "call"]), min_size=1, max_size=6),
            st.booleans(),  # as one batch
        ),
        st.tuples(st.sampled_from(["down", "up", "reload", "purge"]), st.just([]), st.just(False)),
    ),
    min_size=3,
    max_size=12,
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=steps)
def test_every_call_answered_is_billed_once_whatever_happens_around_it(
    billing: _Billing, plan: list[tuple[str, list[str], bool]]
) -> None:
    balance, calls, credits = billing.ledger()
    answered = 0
    try:
        for what, kinds, batched in plan:
            if what == "down":
                billing.upstream.down.add(billing.path)
            elif what == "up":
                billing.upstream.down.discard(billing.path)
            elif what == "reload":
                billing.reloads += 1
                billing.apply()
            elif what == "purge":
                purge_chain_cache(billing.engine, CHAIN_A)
            elif batched:
                reply = billing.post([_call(kind, n) for n, kind in enumerate(kinds)])
                items = reply.json() if isinstance(reply.json(), list) else []
                answered += sum("result" in item for item in items)
            else:
                for n, kind in enumerate(kinds):
                    answered += "result" in billing.post(_call(kind, n)).json()
    finally:
        billing.upstream.down.discard(billing.path)
    after_balance, after_calls, after_credits = billing.ledger()
    assert after_calls - calls == answered
    assert balance - after_balance == after_credits - credits
    cheapest = min(CACHE_PRICE, *PRICES.values()) * 10**9
    dearest = max(CACHE_PRICE, *PRICES.values()) * 10**9
    assert answered * cheapest <= after_credits - credits <= answered * dearest
