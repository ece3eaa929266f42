"""Scoped decisions, served (docs/architecture.md, "Scoped decisions"): a native router applies
what the pipeline decided for a call to later calls in the same scope (the same key, Origin,
chain, method and block class; any address, any call data), each sent to the decision's node
and billed through the one ledger exactly as the pipeline bills; a call outside the scope, or
after an epoch it read moved, goes to the pipeline; a node's failure under a decision is the
pipeline's first attempt, judged there, never billed.

Every story runs on both real executors: the Python executor applies no decision (each call is
the pipeline's), so its calls are billed, failed over and refused exactly as the native
server's, and none is counted as served under a decision.

The router runs in front of a real anvil node, reached through the fault-injecting upstream as
two nodes of two providers (the cheap one first), which counts what each node is asked. A call
the server served under a decision is told apart by `chainrouter_forwards_repeated_total`,
counted as the ledger books it. Which calls the pipeline hands over is told in
test_decisions.py."""

from __future__ import annotations

import concurrent.futures
import secrets
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
from tests.anvil import CHAIN_A, AnvilNodes, node_result, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

HEAD = "eth_blockNumber"
BALANCE = "eth_getBalance"
CALL = "eth_call"
CODE = "eth_getCode"
SERVED = {
    "CHAINROUTER_CACHE_MAX_BYTES": "0",  # nothing kept: every call is a node's
    "CHAINROUTER_COALESCE": "false",
    "CHAINROUTER_HEDGE_MAX": "0",  # the server waits the attempt's time-out, never a hedge delay
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",  # the nodes are asked only what tests ask
    "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',
}
CHEAP = {
    HEAD: Decimal("0.0000001"),
    BALANCE: Decimal("0.0000002"),
    CALL: Decimal("0.0000003"),
    CODE: Decimal("0.0000004"),
    "eth_chainId": Decimal(0),
}
DEAR = Decimal("0.000001")
NANO = Decimal(10**9)


def _address() -> str:
    return "0x" + secrets.token_hex(20)


def balance_of(address: str, block: str = "latest") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": BALANCE, "params": [address, block]}


def call_of(data: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": CALL, "params": [{"to": _address(), "data": data}]}


class _Router:
    def __init__(
        self,
        tmp: Path,
        node: str,
        upstream: FaultyUpstream,
        credits: str,
        executor: str,
        settings: dict[str, str] | None = None,
    ) -> None:
        port = node.rsplit(":", 1)[1]
        self.tmp, self.node, self.upstream, self.credits = tmp, node, upstream, credits
        self.executor = executor
        self.settings = {**SERVED, **(settings or {})}
        self.paths = {name: f"/relay/{port}/full/{tmp.name}-{name}" for name in ("cheap", "dear")}
        self.keys = [api_key("main"), api_key("other")]
        self.engine = create_database_engine(f"sqlite:///{tmp / 'decisions.db'}")
        migrate.upgrade(self.engine)

    @property
    def key(self) -> dict[str, Any]:
        return self.keys[0]

    def apply(self) -> None:
        cheap = {method: str(price) for method, price in CHEAP.items()}
        nodes = {name: [(self.upstream.url(path), CHAIN_A)] for name, path in self.paths.items()}
        providers = [
            provider("cheap", cheap, nodes["cheap"]),
            provider("dear", dict.fromkeys(CHEAP, str(DEAR)), nodes["dear"]),
        ]
        config = world_config(providers, self.keys, credits=self.credits)
        apply_config(self.engine, validate_document(config))

    def start(self) -> None:
        self.apply()
        secret, url = self.key["secret"], self.engine.url.render_as_string()
        self.served: Served = launch_router(
            self.tmp / "router", self.executor, "127.0.0.1", url, secret, secret, self.settings
        )
        deadline = time.monotonic() + 20
        while self._metric("chainrouter_node_up{") < 2:  # both have answered their checks
            assert time.monotonic() < deadline, "the nodes never came up"
            time.sleep(0.05)

    def _metric(self, prefix: str) -> float:
        text = httpx.get(self.served.base + "/metrics", timeout=30).text
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    def version(self) -> int:
        return int(self._metric("chainrouter_configuration_version "))

    def decided(self, method: str | None = None) -> int:
        """Calls (of `method`) the server has served under decisions so far."""
        labels = "{" if method is None else f'{{chain="{CHAIN_A}",method="{method}"}}'
        return int(self._metric("chainrouter_forwards_repeated_total" + labels))

    def decided_between(self, low: int, high: int, method: str | None = None) -> bool:
        """Whether the server has served between `low` and `high` calls (of `method`) under
        decisions: none at all on the Python executor, which applies none."""
        served = self.decided(method)
        return low <= served <= high if self.executor == "native" else served == 0

    def post(self, payload: Any, call_id: Any = 1, key: int = 0, **headers: str) -> httpx.Response:
        body = {**payload, "id": call_id} if isinstance(payload, dict) else payload
        url = f"{self.served.base}/rpc/{CHAIN_A}/{self.keys[key]['secret']}"
        return httpx.post(url, json=body, headers=headers, timeout=30)

    def asked(self) -> tuple[int, int]:
        """Requests each node has received so far: (cheap, dear)."""
        requests = self.upstream.requests
        return requests[self.paths["cheap"]], requests[self.paths["dear"]]

    def node_answer(self, payload: Any, call_id: Any) -> bytes:
        return httpx.post(self.node, json={**payload, "id": call_id}, timeout=30).content

    def stop(self) -> None:
        self.served.process.terminate()
        self.served.process.wait(30)

    def usage(self) -> dict[str, tuple[int, int]]:
        """Calls and nano-credits in storage by scenario (after `stop`: its flush wrote them)."""
        usage = t.usage_aggregates
        query = select(
            usage.c.scenario, func.sum(usage.c.request_count), func.sum(usage.c.credits_nano)
        ).group_by(usage.c.scenario)
        with self.engine.connect() as connection:
            return {s: (int(n), int(c)) for s, n, c in connection.execute(query)}


@pytest.fixture(params=["native", "python"])
def executor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def router_of(
    final_blocks_node: AnvilNodes, upstream: FaultyUpstream, tmp_path: Path, executor: str
) -> Iterator[Any]:
    """Starts a `_Router` whose customer has `credits`, with `settings` beside SERVED, its main
    key with these fields."""
    made: list[_Router] = []

    def make(credits: str = "10", settings: dict[str, str] | None = None, **key: Any) -> _Router:
        node = final_blocks_node.urls["node"]
        router = _Router(tmp_path, node, upstream, credits, executor, settings)
        router.key.update(key)
        made.append(router)
        router.start()
        return router

    yield make
    for router in made:
        served = getattr(router, "served", None)  # none if it never started
        if served is not None and served.process.poll() is None:
            router.stop()
        router.engine.dispose()


@pytest.fixture
def rewinding_router(
    upstream: FaultyUpstream, tmp_path: Path, executor: str
) -> Iterator[tuple[Any, str]]:
    """A `_Router` in front of an anvil node of its own, which the test may rewind; and that
    node's URL."""
    started = start_anvil_nodes((("node", CHAIN_A),))
    nodes = next(started)
    node = nodes.urls["node"]
    router = _Router(tmp_path, node, upstream, "10", executor)
    router.start()
    yield router, node
    router.stop()
    router.engine.dispose()
    started.close()


def _nano(price: Decimal) -> int:
    return int(price * NANO)


def test_distinct_calls_in_one_scope_are_served_under_one_decision_each_billed_once(
    router_of: Any,
) -> None:
    """Balances of any address and calls with any data, at `latest`, share the decision the
    pipeline made for the first: each is the node's own answer under its caller's id."""
    router = router_of()
    balance = router.served.balance()
    calls = [balance_of(_address()) for _ in range(6)]
    calls += [call_of("0x" + secrets.token_hex(4)) for _ in range(6)]
    ids: list[Any] = [1, "two", None, -3, 123456789012345678, "six"] * 2
    asked = router.asked()
    replies = [router.post(call, call_id) for call, call_id in zip(calls, ids, strict=True)]
    for call, call_id, reply in zip(calls, ids, replies, strict=True):
        assert reply.status_code == 200
        assert reply.content == router.node_answer(call, call_id)
    assert len({reply.headers["x-batch-id"] for reply in replies}) == len(calls)
    # All but the first of each, less any the pipeline decided again past a decision's 1 s.
    assert router.decided_between(3, 5, BALANCE)
    assert router.decided_between(3, 5, CALL)
    assert router.asked() == (asked[0] + len(calls), asked[1])  # each once, at the cheap node
    router.stop()
    price = 6 * _nano(CHEAP[BALANCE]) + 6 * _nano(CHEAP[CALL])
    assert router.usage() == {"first_choice": (len(calls), price)}
    assert balance - router.served.balance() == price


def test_a_decision_is_applied_to_no_call_outside_its_scope(router_of: Any) -> None:
    """Another key, another Origin, another method or another block: the pipeline decides."""
    router = router_of()
    page = {"Origin": "https://app.example.com"}
    for _ in range(3):
        assert router.post(balance_of(_address()), **page).status_code == 200
    assert router.decided_between(1, 2)
    decided = router.decided()
    for payload, key, headers in [
        (balance_of(_address()), 1, page),  # another key
        (balance_of(_address()), 0, {"Origin": "https://other.example.com"}),
        (balance_of(_address()), 0, {}),  # no Origin at all
        ({**balance_of(_address()), "method": CODE}, 0, page),  # another method
        (balance_of(_address(), "0x1"), 0, page),  # a block number, not the head
        (balance_of(_address(), "earliest"), 0, page),
    ]:
        reply = router.post(payload, key=key, **headers)
        assert reply.status_code == 200, reply.text
        assert router.decided() == decided, (payload, key, headers)


def test_a_batch_of_distinct_calls_is_served_by_the_server_in_order_under_each_callers_id(
    router_of: Any,
) -> None:
    """Sent to the node as one upstream batch (at most CHAINROUTER_UPSTREAM_BATCH_MAX calls),
    each call taking the answer under its own id."""
    router = router_of()

    def batch(size: int) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        for n in range(size):
            call = balance_of(_address()) if n % 2 else call_of("0x" + secrets.token_hex(2))
            calls.append({**call, "id": f"c{n}"})
        return calls

    first = batch(6)
    assert router.post(first).status_code == 200  # the pipeline decides each kind
    later = batch(6)
    asked = router.asked()
    reply = router.post(later)
    assert reply.status_code == 200
    assert [item["id"] for item in reply.json()] == [call["id"] for call in later]
    expected = [router.node_answer(call, call["id"]) for call in later]
    assert reply.content == b"[" + b",".join(expected) + b"]"
    if router.executor == "native":
        assert router.decided() == 6
        assert router.asked() == (asked[0] + 1, asked[1])  # one upstream batch, cheap node
    else:
        assert router.decided() == 0
        assert router.asked() == (asked[0] + 6, asked[1])  # each call on its own


def test_a_node_that_fails_a_call_under_a_decision_is_failed_over_at_once_and_never_billed(
    router_of: Any, upstream: FaultyUpstream
) -> None:
    router = router_of()
    balance = router.served.balance()
    call = balance_of(_address())
    assert [router.post(call, n).status_code for n in range(2)] == [200, 200]
    assert router.decided_between(1, 1)
    upstream.down.add(router.paths["cheap"])  # 503 from now on
    asked = router.asked()
    reply = router.post(call, "after")
    assert (reply.status_code, reply.content) == (200, router.node_answer(call, "after"))
    # The server's attempt was the pipeline's first: the cheap node was not asked the call
    # twice, and the pipeline judged its 503 as its own, cooling the node down.
    assert router.asked() == (asked[0] + 1, asked[1] + 1)
    assert router.decided_between(1, 1)
    assert router.post(call, "next").status_code == 200
    assert router.asked() == (asked[0] + 1, asked[1] + 2)
    router.stop()
    cheap, dear = _nano(CHEAP[BALANCE]), _nano(DEAR)
    assert router.usage() == {"first_choice": (2, 2 * cheap), "failover": (2, 2 * dear)}
    assert balance - router.served.balance() == 2 * cheap + 2 * dear


def test_credits_running_out_send_the_key_to_the_pipeline_which_refuses_402(
    router_of: Any,
) -> None:
    """The server spends from the customer's grant, which holds what the balance allows."""
    router = router_of(credits=str(5 * CHEAP[BALANCE]))
    asked = router.asked()[0]
    replies = [router.post(balance_of(_address()), n) for n in range(6)]
    assert [reply.status_code for reply in replies] == [200] * 5 + [402]
    assert replies[5].json()["error"]["code"] == -32601
    assert router.decided_between(2, 4)  # all but the first, less any decided again past 1 s
    assert router.asked()[0] == asked + 5  # the sixth was never sent: nothing left to spend
    router.stop()
    assert router.usage() == {
        "first_choice": (5, 5 * _nano(CHEAP[BALANCE])),
        "insufficient_credits": (1, 0),
    }
    assert router.served.balance() == 0


def test_changing_the_keys_allowed_domains_ends_its_decisions(router_of: Any) -> None:
    router = router_of(allowed_domains=["app.example.com"])
    page = {"Origin": "https://app.example.com"}
    assert [router.post(balance_of(_address()), n, **page).status_code for n in range(3)] == [
        200
    ] * 3
    assert router.decided_between(2, 2)
    version = router.version()
    router.key["allowed_domains"] = ["other.example.com"]
    router.apply()
    deadline = time.monotonic() + 10
    while router.version() == version:  # meanwhile a decision of this page always stands
        assert time.monotonic() < deadline, "the new domains were never applied"
        router.post(balance_of(_address()), "meanwhile", **page)
    assert router.post(balance_of(_address()), "after", **page).status_code == 403
    assert router.post(balance_of(_address()), "still", **page).status_code == 403


def test_the_time_the_server_waited_on_its_node_counts_against_the_calls_deadline(
    router_of: Any, upstream: FaultyUpstream
) -> None:
    # An attempt may take 0.6 s, a call 1 s. The server waits its 0.6 s on the cheap node, which
    # has turned slow; its time-out is the pipeline's first attempt, and the pipeline has 0.4 s
    # left for the dear node, which answers in 0.5 s. Were the deadline to start again at the
    # handover, the dear node would have 0.6 s, and answer.
    deadlines = {
        "CHAINROUTER_UPSTREAM_TIMEOUT_S": "0.6",
        "CHAINROUTER_ADAPTIVE_TIMEOUT_FLOOR_S": "0.6",
        "CHAINROUTER_REQUEST_DEADLINE_S": "1.0",
    }
    router = router_of(settings=deadlines)
    call = balance_of(_address())
    assert [router.post(call, n).status_code for n in range(2)] == [200, 200]
    assert router.decided_between(1, 1)
    upstream.held[router.paths["cheap"]] = 3.0
    upstream.held[router.paths["dear"]] = 0.5
    asked = router.asked()
    reply = router.post(call, "late")
    assert reply.status_code == 504, reply.text
    assert reply.json()["error"]["code"] == -32009  # every node failed: timed out
    assert router.asked() == (asked[0] + 1, asked[1] + 1)  # the server's, then the dear node
    router.stop()
    assert router.usage()["all_failed"] == (1, 0)


def test_identical_calls_at_once_under_a_decision_share_one_attempt_at_the_cache_price(
    router_of: Any, upstream: FaultyUpstream
) -> None:
    router = router_of(settings={"CHAINROUTER_COALESCE": "true"})
    balance = router.served.balance()
    call = call_of("0x12345678")
    assert router.post(call, 0).status_code == 200  # the pipeline decides
    upstream.held[router.paths["cheap"]] = 0.4  # the rest arrive while the first is asked
    asked = router.asked()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda n: router.post(call, n), range(1, 9)))
    assert [reply.status_code for reply in replies] == [200] * 8
    for n, reply in enumerate(replies, start=1):
        assert reply.content == router.node_answer(call, n)
    assert router.asked()[0] == asked[0] + 1
    router.stop()
    usage = router.usage()
    assert usage == {"first_choice": (2, 2 * _nano(CHEAP[CALL])), "cache": (7, 0)}
    assert balance - router.served.balance() == 2 * _nano(CHEAP[CALL])


def test_an_older_head_than_the_key_had_seen_is_never_served_under_a_decision(
    rewinding_router: tuple[Any, str],
) -> None:
    """The node's `eth_blockNumber` goes back (a reorg, another backend behind one address):
    the server does not serve it under the decision made when the key had seen the newer
    block; the request goes to the pipeline with the node's answer as its first attempt, which
    does not believe it either (router/belief.py) and asks the other node; both went back, and
    the highest they tell is served."""
    router, node = rewinding_router
    call = {"jsonrpc": "2.0", "method": HEAD, "params": []}
    node_result(node, "anvil_mine", ["0xa"])
    rewind_to = node_result(node, "evm_snapshot", [])
    node_result(node, "anvil_mine", ["0x5"])
    heads = [router.post(call, n).json()["result"] for n in range(4)]
    assert heads == ["0xf"] * 4
    assert router.decided_between(1, 3, HEAD)  # the key's seen head reached, then the server's
    decided = router.decided(HEAD)
    node_result(node, "evm_revert", [rewind_to])
    asked = router.asked()
    reply = router.post(call, "after")
    assert (reply.status_code, reply.json()["result"]) == (200, "0xa")
    assert router.decided(HEAD) == decided  # not the server's to serve
    assert router.asked() == (asked[0] + 1, asked[1] + 1)  # each node once
