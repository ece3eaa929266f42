"""The router's line per request (issue 33, item 4): its batch id, key id (never the key),
chain, methods, nodes, attempts, status and duration, at the level the operator sets; nothing
kept or written when that level is off."""

from __future__ import annotations

import json
import logging

import pytest

from chainrouter.logs import FIELDS, JsonLines
from chainrouter.router.contract import HttpRequest
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, WorldFactory, provider, rpc, world_config


@pytest.mark.anyio
async def test_the_router_writes_one_line_per_request_at_the_level_set(
    make_world: WorldFactory, upstream: FaultyUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chainrouter.requests")
    world = await make_world(
        world_config(
            [
                provider(
                    "a", {"eth_blockNumber": "0.000001"}, [(upstream.url("/status/500/l"), CHAIN_A)]
                ),
                provider("b", {"eth_blockNumber": "0.000002"}, [(upstream.url("/ok/l"), CHAIN_A)]),
            ]
        ),
        request_log_level="info",
    )
    face = world.runtime.face([], world.executor)
    key = world.secrets["main"]
    batch = json.dumps([rpc("eth_blockNumber", [], 1), rpc("eth_chainId", [], 2)]).encode()
    request = HttpRequest(
        "POST", f"/rpc/{CHAIN_A}/{key}", None, None, None, "application/json", "127.0.0.1", batch
    )
    answer = await world.executor.run(face.respond(request))
    assert answer.status == 200
    [record] = [r for r in caplog.records if r.name == "chainrouter.requests"]
    fields = getattr(record, FIELDS)
    assert fields["route"] == "keyed"
    assert fields["status"] == 200
    assert fields["chain"] == CHAIN_A
    assert fields["calls"] == 2
    assert fields["methods"] == ["eth_blockNumber", "eth_chainId"]
    assert fields["attempts"] == 2  # the failing node, then the answering one
    assert len(fields["nodes"]) == 1
    assert sorted(fields["scenarios"]) == ["failover", "unsupported_method"]
    assert fields["key_id"] > 0
    assert fields["duration_ms"] > 0
    assert dict(answer.headers)["x-batch-id"] == fields["batch_id"]
    assert key not in JsonLines().format(record)


@pytest.mark.anyio
async def test_no_line_and_nothing_kept_when_the_level_is_off(
    make_world: WorldFactory, upstream: FaultyUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chainrouter.requests")
    world = await make_world(
        world_config([provider("a", {"eth_blockNumber": "0"}, [(upstream.url("/ok/n"), CHAIN_A)])])
    )  # request lines at debug, the default
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.request is None  # the pipeline kept nothing for a log
    assert not [r for r in caplog.records if r.name == "chainrouter.requests"]
