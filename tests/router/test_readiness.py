"""`GET /health` tells a load balancer the truth: 200 while the router can serve, 503 when its
storage has been silent too long or no chain has a node that answers, in sync and available."""

from __future__ import annotations

import json
import time

import pytest

from chainrouter.router.contract import HttpRequest
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, CHAIN_B, World, WorldFactory, provider, world_config

pytestmark = pytest.mark.anyio


async def _world(
    make_world: WorldFactory, upstream: FaultyUpstream, *, checked: bool = True
) -> World:
    """A router with a node on each of two chains; `checked`: each has passed a health check."""
    nodes = [
        (upstream.url("/ok/ready-a"), CHAIN_A),
        (upstream.url(f"/chain/{CHAIN_B}/ready-b"), CHAIN_B),  # answers chain B's ID
    ]
    world = await make_world(
        world_config([provider("p", {"eth_blockNumber": "0.001"}, nodes)]),
        health_storage_stale_s=30,
    )
    if checked:
        for node in world.runtime.current_nodes():
            await world.check_health(node)
    return world


async def _health(world: World) -> tuple[int, dict[str, object]]:
    face = world.runtime.face([], world.executor)
    answer = await world.executor.run(
        face.respond(HttpRequest("GET", "/health", None, None, None, None, "127.0.0.1", b""))
    )
    return answer.status, json.loads(answer.body)


async def test_a_router_that_can_serve_is_ready(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream)
    status, body = await _health(world)
    assert status == 200
    assert body["status"] == "ok"
    assert body["storage"] == "ok"
    assert (body["chains"], body["chains_without_healthy_node"]) == (2, 0)
    assert "reasons" not in body


async def test_chains_without_a_healthy_node_are_counted_and_none_at_all_is_503(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream)
    nodes = {node.chain_id: node for node in world.runtime.current_nodes()}
    world.runtime.cooldowns.failed(nodes[CHAIN_A].node_id)
    status, body = await _health(world)
    assert (status, body["chains_without_healthy_node"]) == (200, 1)
    world.runtime.cooldowns.failed(nodes[CHAIN_B].node_id)
    status, body = await _health(world)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["reasons"] == ["no chain has a node that answers, in sync and available"]


async def test_a_router_that_has_seen_no_node_answer_yet_is_not_ready_until_one_does(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, checked=False)
    status, body = await _health(world)
    assert (status, body["chains_without_healthy_node"]) == (503, 2)
    assert body["reasons"] == ["no chain has a node that answers, in sync and available"]
    nodes = {node.chain_id: node for node in world.runtime.current_nodes()}
    await world.check_health(nodes[CHAIN_B])
    status, body = await _health(world)
    assert (status, body["chains_without_healthy_node"]) == (200, 1)


async def test_storage_silent_too_long_is_503(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream)
    world.runtime.sync.last_contact = time.monotonic() - 31
    status, body = await _health(world)
    assert status == 503
    assert body["storage"] == "unreachable"
    assert body["reasons"] == ["storage has not answered recently"]
    await world.runtime.sync.refresh()  # storage answers again
    status, _ = await _health(world)
    assert status == 200


async def test_a_router_with_no_chain_configured_yet_is_ready(make_world: WorldFactory) -> None:
    world = await make_world(world_config([]))
    status, body = await _health(world)
    assert (status, body["chains"]) == (200, 0)
