"""Keys, nodes and prices are served from memory and follow storage within one sync interval:
a revoked key stops working, a disabled node stops getting traffic, a new price is billed."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from chainrouter.domain.enums import LedgerEntryKind, NodeStatus
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import record_credit_change
from chainrouter.stores.sql.schema import utcnow
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, rpc, world_config

pytestmark = pytest.mark.anyio


async def _world(make: WorldFactory, upstream: FaultyUpstream, tag: str) -> World:
    return await make(
        world_config(
            [
                provider(
                    "one",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url(f"/ok/{tag}-1"), CHAIN_A)],
                ),
                provider(
                    "two",
                    {"eth_blockNumber": "0.000002"},
                    [(upstream.url(f"/ok/{tag}-2"), CHAIN_A)],
                ),
            ]
        ),
        sync_interval_s=0.05,
    )


async def test_nothing_is_reloaded_while_the_configuration_version_stands_still(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world_on_each_backend, upstream, "still")
    snapshot = world.service.snapshot
    assert not await world.runtime.sync.refresh()
    assert world.service.snapshot is snapshot


async def test_a_revoked_key_stops_working_at_the_next_sync(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world_on_each_backend, upstream, "revoke")
    assert (await world.call(rpc("eth_blockNumber"))).status == 200
    with world.engine.begin() as connection:
        connection.execute(update(t.api_keys).values(active=False))
        bump_config_version(connection)
    assert await world.runtime.sync.refresh()
    assert (await world.call(rpc("eth_blockNumber"))).status == 401


async def test_the_background_sync_picks_changes_up_by_itself(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, "background")
    await world.runtime.start_background(world.executor, health_checks=False)
    with world.engine.begin() as connection:
        connection.execute(update(t.api_keys).values(active=False))
        bump_config_version(connection)
    changed_at = time.monotonic()
    while (await world.call(rpc("eth_blockNumber"))).status != 401:
        assert time.monotonic() - changed_at < 5, "the revocation never reached the router"
        await asyncio.sleep(0.02)


async def test_a_disabled_node_gets_no_traffic_and_a_new_price_is_billed(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world_on_each_backend, upstream, "disable")
    with world.engine.begin() as connection:
        connection.execute(
            update(t.nodes)
            .where(t.nodes.c.url.endswith("/ok/disable-1"))
            .values(status=NodeStatus.DISABLED_BY_PROVIDER.value)
        )
        connection.execute(update(t.plan_methods).values(cost_nano=t.plan_methods.c.cost_nano * 3))
        bump_config_version(connection)
    await world.runtime.sync.refresh()
    before_1, before_2 = upstream.requests["/ok/disable-1"], upstream.requests["/ok/disable-2"]
    balance = world.stored_balance()
    for _ in range(3):
        assert (await world.call(rpc("eth_blockNumber"))).status == 200
    assert upstream.requests["/ok/disable-1"] == before_1
    assert upstream.requests["/ok/disable-2"] == before_2 + 3
    assert await world.runtime.sync.flush()
    assert balance - world.stored_balance() == 3 * 6_000


async def test_a_credit_grant_reaches_the_credit_check(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [
                provider(
                    "p", {"eth_blockNumber": "0.000001"}, [(upstream.url("/ok/grant"), CHAIN_A)]
                )
            ],
            credits=None,
        )
    )
    assert (await world.call(rpc("eth_blockNumber"))).status == 402
    with world.engine.begin() as connection:
        record_credit_change(
            connection, customer_id=world.customer_id, kind=LedgerEntryKind.GRANT, amount_nano=5_000
        )
        bump_config_version(connection)
    await world.runtime.sync.refresh()
    assert (await world.call(rpc("eth_blockNumber"))).status == 200


async def test_a_price_set_with_notice_is_loaded_when_it_comes_due_with_nothing_else_changed(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, "notice")

    def prices() -> list[int]:
        routes = world.service.snapshot.routes
        return sorted(p.cost_nano for p in routes.prices.values() if p.method == "eth_blockNumber")

    assert prices() == [1_000, 2_000]
    due = utcnow() + timedelta(seconds=0.5)
    with world.engine.begin() as connection:
        connection.execute(
            update(t.plan_methods)
            .where(t.plan_methods.c.cost_nano == 1_000)
            .values(next_cost_nano=3_000, next_cost_from=due)
        )
        bump_config_version(connection)
    assert await world.runtime.sync.refresh()
    assert prices() == [1_000, 2_000]  # not yet
    assert world.service.snapshot.next_price_at == due
    assert not await world.runtime.sync.refresh()  # nothing changed, nothing due
    await asyncio.sleep(max((due - utcnow()).total_seconds(), 0) + 0.05)
    assert await world.runtime.sync.refresh()  # the version still, but a price came due
    assert prices() == [2_000, 3_000]
    assert world.service.snapshot.next_price_at is None
