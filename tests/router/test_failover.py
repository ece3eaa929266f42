"""Failover (design notes, "Routing and billing"): routes are tried in order, a failing node is
skipped for the next route, cooled down with backoff, and the client is told what failed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from chainrouter.domain.routing import MethodPrice, NodeInfo, PlanLimits, Route
from chainrouter.jsonrpc.errors import RpcCode
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.forward import (
    Forwarder,
    Served,
    Unserved,
    Verdict,
    answers_call,
    judge_answer,
)
from chainrouter.router.http1 import Http1Upstream
from chainrouter.testing.faulty_upstream import FaultyUpstream

pytestmark = pytest.mark.anyio
BODY = b'{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":7}'
_next_node = iter(range(1, 10**6))


def _routes(upstream: FaultyUpstream, *paths: str) -> list[Route]:
    plan = PlanLimits(1, 1)
    routes = []
    for path in paths:
        node_id = next(_next_node)
        node = NodeInfo(node_id, 1, 1, upstream.url(path))
        routes.append(Route(node, plan, MethodPrice(1, "eth_blockNumber", 100)))
    return routes


@pytest.fixture
async def client() -> AsyncIterator[Http1Upstream]:
    upstream_client = Http1Upstream(max_response_bytes=1 << 20)
    yield upstream_client
    await upstream_client.close()


async def _forward(
    client: Http1Upstream, routes: list[Route], cooldowns: MemoryCooldowns | None = None
) -> Served | Unserved:
    forwarder = Forwarder(
        client, attempt_timeout_s=0.5, deadline_s=5, cooldowns=cooldowns or MemoryCooldowns()
    )
    return await forwarder.forward(routes, BODY, 7)


async def test_the_first_choice_answers_when_it_can(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    routes = _routes(upstream, "/ok", "/ok")
    outcome = await _forward(client, routes)
    assert isinstance(outcome, Served)
    assert (outcome.route, outcome.attempts) == (routes[0], 1)


@pytest.mark.parametrize(
    "failing",
    ["/status/500", "/status/503", "/status/429", "/sleep/2000", "/drip/300", "/garbage",
     "/wrong-id", "/reset"],
)  # fmt: skip
async def test_every_kind_of_failure_fails_over_to_the_next_route(
    client: Http1Upstream, upstream: FaultyUpstream, failing: str
) -> None:
    routes = _routes(upstream, failing, "/ok")
    outcome = await _forward(client, routes)
    assert isinstance(outcome, Served)
    assert (outcome.route, outcome.attempts) == (routes[1], 2)
    assert b'"id": 7' in outcome.body


async def test_a_json_rpc_error_is_an_answer_not_a_failure(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    routes = _routes(upstream, "/rpc-error", "/ok")
    outcome = await _forward(client, routes)
    assert isinstance(outcome, Served)
    assert outcome.route == routes[0]
    assert b"execution reverted" in outcome.body


@pytest.mark.parametrize(
    ("paths", "status", "code"),
    [
        (("/status/502", "/garbage"), 424, RpcCode.ALL_NODES_FAILED),
        (("/status/429", "/status/429"), 429, RpcCode.ALL_NODES_ON_COOLDOWN),
        (("/sleep/2000", "/sleep/2000"), 504, RpcCode.ALL_NODES_FAILED),
        ((), 424, RpcCode.NO_PROVIDERS_AVAILABLE),
    ],
)
async def test_when_no_route_answers_the_client_is_told_why(
    client: Http1Upstream,
    upstream: FaultyUpstream,
    paths: tuple[str, ...],
    status: int,
    code: RpcCode,
) -> None:
    outcome = await _forward(client, _routes(upstream, *paths))
    assert isinstance(outcome, Unserved)
    assert (outcome.error.http_status, outcome.error.code) == (status, code)


async def test_a_failed_node_is_skipped_while_it_cools_down_then_tried_again(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    now = [1000.0]
    cooldowns = MemoryCooldowns(clock=lambda: now[0])
    failing, healthy = _routes(upstream, "/status/503", "/ok")
    first = await _forward(client, [failing, healthy], cooldowns)
    assert isinstance(first, Served)
    assert first.attempts == 2
    hits = upstream.requests["/status/503"]
    second = await _forward(client, [failing, healthy], cooldowns)
    assert isinstance(second, Served)
    assert second.attempts == 1  # the cooling node was not tried at all
    assert upstream.requests["/status/503"] == hits
    now[0] += 1.01
    await _forward(client, [failing, healthy], cooldowns)
    assert upstream.requests["/status/503"] == hits + 1


async def test_when_every_node_is_cooling_the_answer_is_429(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    cooldowns = MemoryCooldowns(clock=lambda: 5.0)
    routes = _routes(upstream, "/status/500")
    await _forward(client, routes, cooldowns)
    outcome = await _forward(client, routes, cooldowns)
    assert isinstance(outcome, Unserved)
    assert (outcome.error.http_status, outcome.error.code) == (429, RpcCode.ALL_NODES_ON_COOLDOWN)


def test_cooldown_backs_off_exponentially_up_to_the_cap_and_success_clears_it() -> None:
    cooldowns = MemoryCooldowns(base_s=1, max_s=10, clock=lambda: 0.0)
    assert [cooldowns.failed(1) for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    assert not cooldowns.available(1)
    cooldowns.succeeded(1)
    assert cooldowns.available(1)
    for _ in range(5000):
        cooldowns.failed(2)  # no overflow however long a node keeps failing
    assert cooldowns.failed(2) == 10


@pytest.mark.parametrize(
    ("body", "ok"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":"0x1"}', True),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"reverted"}}', True),
        (b'{"jsonrpc":"2.0","id":8,"result":"0x1"}', False),
        (b'{"jsonrpc":"2.0","id":7}', False),
        (b'{"jsonrpc":"2.0","id":7,"error":"text"}', False),
        (b'{"id":7,"result":1}', False),
        (b"[1]", False),
        (b"not json", False),
    ],
)
def test_only_a_json_rpc_answer_with_the_requests_id_counts(body: bytes, ok: bool) -> None:
    assert answers_call(body, 7) is ok


@pytest.mark.parametrize(
    ("request_id", "answer_id", "ok"),
    [
        (2**63 - 1, b"9223372036854775807", True),
        (2**63 - 1, b"9223372036854775806", False),
        (-(2**63), b"-9223372036854775808", True),
        (-(2**63), b"-9223372036854775809", False),  # one past the 64-bit edge
        (7, b"1e300", False),
        (7, b"7.0", False),
    ],
)
def test_ids_at_the_64_bit_edges_are_compared_exactly(
    request_id: int, answer_id: bytes, ok: bool
) -> None:
    body = b'{"jsonrpc":"2.0","id":' + answer_id + b',"result":"0x1"}'
    assert answers_call(body, request_id) is ok


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":null}', Verdict.ANSWER),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"reverted"}}', Verdict.ANSWER),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"x"}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"x"}}', Verdict.REJECTED),
        (b'{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"x"}}', Verdict.NOT_AN_ANSWER),
        (b'{"jsonrpc":"2.0","id":null,"result":"0x1"}', Verdict.NOT_AN_ANSWER),
    ],
)  # fmt: skip
def test_a_nodes_answer_is_judged_by_its_id_and_error_code(body: bytes, verdict: Verdict) -> None:
    assert judge_answer(body, 7)[0] is verdict
