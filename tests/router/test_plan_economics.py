"""Plan economics on the request path (design notes, "Plans: quota, overage and the billing
cycle"): what a plan's nodes answer is counted in its billing cycle; economy routing takes the
route that costs the operator nothing more (within a quota, or a flat plan) before one in
overage, cheapest overage first; a plan at its overage limit routes nothing until its cycle
ends. Standings follow the flushed usage of every router, re-read at each flush."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chainrouter.domain.plan_cycle import Standing
from chainrouter.stores.sql import schema as t
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, rpc, world_config

pytestmark = pytest.mark.anyio


async def _served_by(world: World, upstream: FaultyUpstream, paths: list[str]) -> str | None:
    before = {p: upstream.requests[p] for p in paths}
    reply = await world.call(rpc("eth_blockNumber"))
    if reply.status != 200:
        return None
    return next(p for p in paths if upstream.requests[p] > before[p])


async def _flush(world: World) -> None:
    """What a router does every few seconds: write usage, then re-read plan standings."""
    assert await world.runtime.sync.flush()


async def test_a_cheap_plan_past_its_quota_yields_to_a_dearer_one_that_costs_nothing_more(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    cheap, flat = "/ok/econ-quota-cheap", "/ok/econ-quota-flat"
    world = await make_world_on_each_backend(
        world_config(
            [
                provider(
                    "cheap",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url(cheap), CHAIN_A)],
                    quota=2,
                    quota_unit="requests",
                    overage_price="0.00001",
                ),
                provider("flat", {"eth_blockNumber": "0.000003"}, [(upstream.url(flat), CHAIN_A)]),
            ]
        )
    )
    assert [await _served_by(world, upstream, [cheap, flat]) for _ in range(2)] == [cheap, cheap]
    await _flush(world)  # the cheap plan has used its quota: each call now costs overage
    assert await _served_by(world, upstream, [cheap, flat]) == flat
    assert world.runtime.service.snapshot.routes.standings == {
        _plan_id(world, "cheap"): Standing.OVERAGE
    }


async def test_between_plans_in_overage_the_cheapest_overage_goes_first(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    a, b = "/ok/overage-a", "/ok/overage-b"
    terms = {"quota": 0, "quota_unit": "credits"}
    world = await make_world(
        world_config(
            [
                provider(
                    "a",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url(a), CHAIN_A)],
                    overage_price="0.5",
                    **terms,
                ),
                provider(
                    "b",
                    {"eth_blockNumber": "0.000002"},
                    [(upstream.url(b), CHAIN_A)],
                    overage_price="0.1",
                    **terms,
                ),
            ]
        )
    )
    # A quota of 0: both plans are in overage from the start. A call's overage on a costs 0.5
    # per credit of 0.000001, on b 0.1 per credit of 0.000002: b is cheaper to the operator.
    assert await _served_by(world, upstream, [a, b]) == b


async def test_a_plan_at_its_overage_limit_routes_nothing_until_its_cycle_ends(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    path = "/ok/econ-hard-quota"
    world = await make_world_on_each_backend(
        world_config(
            [
                provider(
                    "hard",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url(path), CHAIN_A)],
                    quota=1,
                    overage_limit=0,
                    billing_fixed_day=1,
                )
            ]
        )
    )
    assert await _served_by(world, upstream, [path]) == path
    await _flush(world)
    refused = await world.call(rpc("eth_blockNumber"))
    assert refused.status == 424
    assert json.loads(refused.body)["error"]["code"] == -32008
    # The use was counted in this hour, in the cycle that began on the 1st; a new cycle starts
    # from nothing, here by moving the counted hour into the month before.
    plan_id = _plan_id(world, "hard")
    hourly = t.plan_hourly_usage
    with world.engine.begin() as connection:
        [hour] = connection.execute(
            hourly.select().with_only_columns(hourly.c.hour).where(hourly.c.plan_id == plan_id)
        ).scalars()
        connection.execute(
            hourly.update()
            .where(hourly.c.plan_id == plan_id)
            .values(hour=hour - timedelta(days=40))
        )
    await _flush(world)
    assert await _served_by(world, upstream, [path]) == path


async def test_a_plan_without_a_quota_is_never_held_back_by_its_use(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    path = "/ok/econ-flat-only"
    world = await make_world(
        world_config(
            [provider("flat", {"eth_blockNumber": "0.000001"}, [(upstream.url(path), CHAIN_A)])]
        )
    )
    for _ in range(3):
        assert await _served_by(world, upstream, [path]) == path
        await _flush(world)
    assert world.runtime.service.snapshot.routes.standings == {}
    with world.engine.connect() as connection:
        [row] = connection.execute(t.plan_hourly_usage.select()).all()
    assert (row.request_count, row.credits_nano) == (3, 3_000)
    assert row.hour == datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _plan_id(world: World, slug: str) -> int:
    with world.engine.connect() as connection:
        return int(
            connection.execute(
                t.plans.select()
                .with_only_columns(t.plans.c.id)
                .where(t.plans.c.name == f"{slug}-plan")
            ).scalar_one()
        )
