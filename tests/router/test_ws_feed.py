"""A chain feed against a real node (router/ws/feed.py): anvil's newHeads followed in order, the
logs of each new block read once and given to the subscribers whose filter matches, a reorg
(`anvil_reorg`) walked back with the orphaned logs sent again `removed: true` before the new
heads; a node that cannot be reached is passed over for the next, and one that dies mid-stream
leaves no gap and no repeat."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from chainrouter.domain.ws_routes import WsRoute
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.feed import ChainFeed
from chainrouter.router.ws.protocol import LogFilter, SubscriptionKind
from chainrouter.router.ws.upstream import UpstreamSocket, open_upstream
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import (
    CHAIN_A,
    DEPLOY_LOGGING,
    LOG_TOPIC,
    AnvilNodes,
    free_port,
    node_result,
    start_anvil_nodes,
)

pytestmark = pytest.mark.anyio


@dataclass(eq=False)
class Queue:
    got: list[dict[str, Any]] = field(default_factory=list)

    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        self.got.append(json.loads(message)["params"]["result"])
        return True

    def too_slow(self) -> None:
        raise AssertionError("never full")


@pytest.fixture
def node() -> Iterator[AnvilNodes]:
    """A node of its own: these tests mine and reorg it."""
    yield from start_anvil_nodes((("w", CHAIN_A),))


async def _connect(url: str) -> UpstreamSocket:
    return await open_upstream(
        url, rule=None, ssl=None, connect_timeout_s=5, max_message_bytes=1 << 20
    )


@pytest.fixture
async def feed(node: AnvilNodes) -> AsyncIterator[ChainFeed]:
    url = node.urls["w"].replace("http://", "ws://")
    unreachable = f"ws://127.0.0.1:{free_port()}"
    routes = [
        WsRoute(1, 1, CHAIN_A, unreachable, {"newHeads": 1}),  # cheapest, but down
        WsRoute(2, 1, CHAIN_A, url, {"newHeads": 2}),
    ]
    made = ChainFeed(CHAIN_A, lambda: routes, _connect)
    task = asyncio.create_task(made.run())
    for _ in range(100):
        if made.chain.tip is not None or (made.route is not None and made.route.node_id == 2):
            break
        await asyncio.sleep(0.05)
    yield made
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _until(condition: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not in time")


async def test_heads_in_order_logs_of_each_block_and_a_reorg_sent_back_removed(
    feed: ChainFeed, node: AnvilNodes
) -> None:
    url = node.urls["w"]
    heads, logs, other = Queue(), Queue(), Queue()
    feed.fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, heads))
    feed.fanout.add(Subscription("0x2", SubscriptionKind.LOGS, logs, LogFilter()))
    nobody = LogFilter(frozenset({"0x" + "00" * 20}))
    feed.fanout.add(Subscription("0x3", SubscriptionKind.LOGS, other, nobody))
    await asyncio.sleep(0.3)  # subscribed upstream (the unreachable node passed over)
    assert feed.route is not None
    assert feed.route.node_id == 2
    node_result(url, "anvil_mine", ["0x2"])
    account = node_result(url, "eth_accounts", [])[0]
    node_result(url, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
    await _until(lambda: len(logs.got) == 1)
    numbers = [int(h["number"], 16) for h in heads.got]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # in order, no gap
    assert numbers[-1] == 3
    [emitted] = logs.got
    assert emitted["topics"] == [LOG_TOPIC]
    assert emitted["removed"] is False
    assert other.got == []
    orphan = heads.got[-1]["hash"]
    node_result(url, "anvil_reorg", [2, []])  # blocks 2 and 3 replaced, the deployment with them
    await _until(lambda: len(logs.got) == 2)
    assert logs.got[1] == {**emitted, "removed": True}
    await _until(lambda: int(heads.got[-1]["number"], 16) == 3 and heads.got[-1]["hash"] != orphan)
    assert [int(h["number"], 16) for h in heads.got[-2:]] == [2, 3]  # the new branch, in order


async def test_a_kind_the_followed_nodes_plan_does_not_price_costs_the_next_routes_price(
    node: AnvilNodes,
) -> None:
    url = node.urls["w"].replace("http://", "ws://")
    heads_only = WsRoute(1, 1, CHAIN_A, url, {"newHeads": 1})
    both = WsRoute(2, 2, CHAIN_A, f"ws://127.0.0.1:{free_port()}", {"newHeads": 2, "logs": 5})
    feed = ChainFeed(CHAIN_A, lambda: [heads_only, both], _connect)
    task = asyncio.create_task(feed.run())
    try:
        await _until(lambda: feed.route == heads_only)
        assert feed.prices == {"newHeads": 1, "logs": 5}  # never free
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_surprise_from_a_node_moves_the_feed_on_without_ending_it(node: AnvilNodes) -> None:
    class Surprising:
        closed = asyncio.Event()

        async def subscribe(self, params: list[Any], timeout_s: float) -> asyncio.Queue[bytes]:
            raise RuntimeError("not an error the feed expects")

        async def close(self) -> None:
            pass

    async def connect(url: str) -> UpstreamSocket:
        if url == "ws://surprising":
            return cast(UpstreamSocket, Surprising())
        return await _connect(url)

    routes = [
        WsRoute(1, 1, CHAIN_A, "ws://surprising", {"newHeads": 1}),
        WsRoute(2, 1, CHAIN_A, node.urls["w"].replace("http://", "ws://"), {"newHeads": 2}),
    ]
    feed = ChainFeed(CHAIN_A, lambda: routes, connect)
    task = asyncio.create_task(feed.run())
    try:
        await _until(lambda: feed.route is not None and feed.route.node_id == 2)
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_node_that_refuses_the_upgrade_is_passed_over(
    node: AnvilNodes, upstream: FaultyUpstream
) -> None:
    port = node.urls["w"].rsplit(":", 1)[1]
    refusing = f"/ws-relay/{port}/refusing"
    upstream.down.add(refusing)  # answers the upgrade 503
    routes = [
        WsRoute(1, 1, CHAIN_A, upstream.ws_url(refusing), {"newHeads": 1}),
        WsRoute(2, 1, CHAIN_A, node.urls["w"].replace("http://", "ws://"), {"newHeads": 2}),
    ]
    feed = ChainFeed(CHAIN_A, lambda: routes, _connect)
    task = asyncio.create_task(feed.run())
    try:
        await _until(lambda: feed.route is not None and feed.route.node_id == 2)
        assert not task.done()  # the refusal did not end the feed
    finally:
        upstream.down.discard(refusing)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_node_dying_mid_stream_leaves_no_gap_and_no_repeat(
    node: AnvilNodes, upstream: FaultyUpstream
) -> None:
    """Two WebSocket nodes of one chain (relays to one anvil). The first is cut while blocks
    are mined; the feed moves to the second, which is ahead by then: the heads missed in
    between are read from it by number, and every head reaches the subscriber once, in order."""
    url = node.urls["w"]
    port = url.rsplit(":", 1)[1]
    first, second = f"/ws-relay/{port}/first", f"/ws-relay/{port}/second"
    routes = [
        WsRoute(1, 1, CHAIN_A, upstream.ws_url(first), {"newHeads": 1}),
        WsRoute(2, 1, CHAIN_A, upstream.ws_url(second), {"newHeads": 2}),
    ]
    feed = ChainFeed(CHAIN_A, lambda: routes, _connect)
    heads = Queue()
    feed.fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, heads))
    task = asyncio.create_task(feed.run())
    try:
        await _until(lambda: feed.route is not None and feed.route.node_id == 1)
        await asyncio.sleep(0.3)  # subscribed
        node_result(url, "anvil_mine", ["0x3"])
        await _until(lambda: len(heads.got) == 3)
        upstream.cut(first)
        node_result(url, "anvil_mine", ["0x4"])  # mined while no node is followed
        await _until(lambda: feed.route is not None and feed.route.node_id == 2)
        await asyncio.sleep(0.3)
        node_result(
            url, "anvil_mine", ["0x2"]
        )  # the second node's first header is 9: 4 to 8 missed
        await _until(lambda: len(heads.got) >= 9)
        numbers = [int(h["number"], 16) for h in heads.got]
        assert numbers == list(range(1, 10))
        hashes = [h["hash"] for h in heads.got]
        assert hashes == [
            node_result(url, "eth_getBlockByNumber", [hex(n), False])["hash"] for n in numbers
        ]
    finally:
        upstream.down.discard(first)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_pending_transactions_are_subscribed_to_once_someone_wants_them(
    feed: ChainFeed, node: AnvilNodes
) -> None:
    url = node.urls["w"]
    pending = Queue()
    feed.fanout.add(Subscription("0x9", SubscriptionKind.NEW_PENDING_TRANSACTIONS, pending))
    feed.wake()
    await asyncio.sleep(0.5)  # the feed subscribes upstream
    account = node_result(url, "eth_accounts", [])[0]
    sent = node_result(
        url, "eth_sendTransaction", [{"from": account, "to": account, "value": "0x1"}]
    )
    await _until(lambda: pending.got == [sent])
