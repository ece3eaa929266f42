"""A key's own rate limit (docs/router.md, "Rate limits"): at most `rate_limit` calls in any
window of `rate_limit_interval_sec`, every batch item counted; over it HTTP 429, -32031, with
Retry-After, for that key alone, nothing sent and nothing billed; failover spends none of it."""

from __future__ import annotations

import json

import pytest

from chainrouter.router.contract import FailureKind
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import answering, failing
from tests.router.conftest import (
    CHAIN_A,
    World,
    WorldFactory,
    api_key,
    provider,
    rpc,
    world_config,
)
from tests.router.scripted_world import rpc as scripted_rpc
from tests.router.scripted_world import scripted_world

A, B = "http://a.node", "http://b.node"


async def _world(make: WorldFactory, upstream: FaultyUpstream, path: str, **limit: int) -> World:
    return await make(
        world_config(
            [provider("p", {"eth_blockNumber": "0.000001"}, [(upstream.url(path), CHAIN_A)])],
            [api_key("main", **limit), api_key("other")],
        )
    )


@pytest.mark.anyio
async def test_a_key_over_its_limit_gets_429_32031_with_retry_after_and_other_keys_go_on(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    path = "/ok/key-limit"
    world = await _world(make_world, upstream, path, rate_limit=2, rate_limit_interval_sec=60)
    assert [(await world.call(rpc("eth_blockNumber"))).status for _ in range(2)] == [200, 200]
    assert await world.runtime.sync.flush()
    sent, balance = upstream.requests[path], world.stored_balance()
    refused = await world.call(rpc("eth_blockNumber", [], 7))
    assert refused.status == 429
    answer = json.loads(refused.body)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32031
    assert "at most 2 calls per 60 s" in answer["error"]["message"]
    assert 59 <= int(dict(refused.headers)["retry-after"]) <= 66
    assert upstream.requests[path] == sent  # nothing was sent for it
    assert (await world.call(rpc("eth_blockNumber"), key="other")).status == 200
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == balance - 1_000  # only the other key's call


@pytest.mark.anyio
async def test_every_call_of_a_batch_counts_and_a_batch_over_the_limit_is_refused_whole(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    path = "/ok/key-limit-batch"
    world = await _world(make_world, upstream, path, rate_limit=3, rate_limit_interval_sec=60)
    batch = [rpc("eth_blockNumber", [], i) for i in range(2)]
    assert (await world.call(batch)).status == 200
    refused = await world.call(batch)  # 2 + 2 > 3: refused whole, nothing taken
    assert refused.status == 429
    assert [item["error"]["code"] for item in json.loads(refused.body)] == [-32031, -32031]
    assert (await world.call(rpc("eth_blockNumber"))).status == 200  # the third call fits
    too_big = await world.call([rpc("eth_blockNumber", [], i) for i in range(4)])
    assert "this batch alone has 4" in json.loads(too_big.body)[0]["error"]["message"]


def test_a_batch_larger_than_the_limit_is_refused_without_a_retry_after_as_it_never_fits() -> None:
    world = scripted_world([(A, 100, answering("0x1"))], key_rate_limit=3)
    too_big = world.call([scripted_rpc() for _ in range(4)])
    assert too_big.status == 429
    assert "retry-after" not in dict(too_big.headers)
    assert "split it" in json.loads(too_big.body)[0]["error"]["message"]
    fits = world.call([scripted_rpc() for _ in range(3)])
    assert fits.status == 200
    assert "retry-after" in dict(world.call(scripted_rpc()).headers)  # full: it will fit later


@pytest.mark.anyio
async def test_a_key_without_a_limit_of_its_own_is_not_limited(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, "/ok/key-no-limit")
    statuses = {(await world.call(rpc("eth_blockNumber"))).status for _ in range(50)}
    assert statuses == {200}


def test_a_call_that_fails_over_spends_the_keys_budget_once() -> None:
    world = scripted_world(
        [(A, 100, failing(FailureKind.HTTP_STATUS, 502)), (B, 200, answering("0x1"))],
        key_rate_limit=2,
    )
    assert [world.call(scripted_rpc()).status for _ in range(2)] == [200, 200]
    assert world.urls_called().count(B) == 2  # A failed once, then cooled down
    assert world.call(scripted_rpc()).status == 429
