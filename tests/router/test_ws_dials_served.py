"""Feed dials paced through a served router, on both executors (issue 52, "Churn"): the chain's
one WebSocket node refuses the upgrade; clients subscribing over and over each get -32009 with
the router's bound after it, and the node is dialled on the backoff's schedule, not once per
subscriber. Back up, it is subscribed to again and serves."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


@pytest.fixture(scope="module", params=["python", "native"])
def served(
    request: pytest.FixtureRequest,
    node: AnvilNodes,
    upstream_server: FaultyUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, str]]:
    """The router, and the relay path of its one WebSocket node, refusing until a test lets
    it up."""
    tmp = tmp_path_factory.mktemp("ws-dials")
    database_url = f"sqlite:///{tmp / 'ws.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    http = node.urls["ws"]
    path = f"/ws-relay/{http.rsplit(':', 1)[1]}/dials-{request.param}"
    upstream_server.down.add(path)
    priced = provider("p", {"eth_blockNumber": "0.0000001", "eth_chainId": "0"}, [(http, CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"] += [{"method": "newHeads", "node_target_type": "ws", "cost": "0.000001"}]
    plan["ws_nodes"] = [{"url": upstream_server.ws_url(path), "chain_id": CHAIN_A}]
    key = api_key("main")
    apply_config(engine, validate_document(world_config([priced], [key])))
    engine.dispose()
    settings = {
        "CHAINROUTER_WS_FEED_DIAL_INTERVAL_S": "0.1",
        "CHAINROUTER_WS_FEED_DIAL_BACKOFF_MAX_S": "0.8",
        "CHAINROUTER_WS_SUBSCRIBE_WAIT_S": "0.3",
        "CHAINROUTER_WS_FEED_GRACE_S": "0",
        # Its checks dial the node too, on their own interval: once, at the start, here.
        "CHAINROUTER_WS_HEALTH_CHECK_INTERVAL_S": "3600",
    }
    router = launch_router(
        Path(tmp), request.param, "127.0.0.1", database_url, key["secret"], key["secret"], settings
    )
    yield router, path
    router.process.terminate()
    router.process.wait(30)
    upstream_server.down.discard(path)


async def _subscribe(url: str) -> dict[str, Any]:
    async with connect(url) as ws:
        call = {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}
        await ws.send(json.dumps(call))
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 10))
        return answer


async def test_subscribers_of_a_refusing_node_get_32009_and_it_is_dialled_on_the_backoff(
    served: tuple[Served, str], upstream_server: FaultyUpstream
) -> None:
    router, path = served
    url = router.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{router.key}"
    await asyncio.sleep(0.5)  # the health check's dial at the start is over
    before = upstream_server.requests[path]
    started = time.monotonic()
    answers = []
    while time.monotonic() - started < 2.4:  # a subscriber after another, each a new feed
        answers.append(await _subscribe(url))
    took = time.monotonic() - started
    assert len(answers) >= 5
    for answer in answers:
        assert answer["error"]["code"] == -32009, answer
        assert answer["error"]["data"] == {"subscribe_wait_s": 0.3}
    dials = upstream_server.requests[path] - before
    # Rests of 0.2, 0.4, 0.8, 0.8 s after each refusal: about 5 dials, one per subscriber
    # (or more: a feed retries within its wait) unpaced.
    assert 2 <= dials <= took / 0.8 + 3, (dials, took, len(answers))
    upstream_server.down.discard(path)
    deadline = time.monotonic() + 5
    answer = await _subscribe(url)
    while "error" in answer and time.monotonic() < deadline:  # until its rest is over
        answer = await _subscribe(url)
    assert str(answer.get("result")).startswith("0x"), answer
