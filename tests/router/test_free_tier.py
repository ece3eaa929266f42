"""The public free tier `/rpc/evm/{chainId}`: no key, not billed, limited per client IP (-32029)
and in total (-32030), both HTTP 429 with a message that points to signing up."""

from __future__ import annotations

import ipaddress
import json

import pytest

from chainrouter.net.client_ip import client_address, client_block, peer_ip
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import answering
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, rpc, world_config
from tests.router.scripted_world import rpc as scripted_rpc
from tests.router.scripted_world import scripted_world

pytestmark = pytest.mark.anyio


async def _world(make: WorldFactory, upstream: FaultyUpstream, **settings: object) -> World:
    return await make(
        world_config(
            [provider("p", {"eth_blockNumber": "0.000001"}, [(upstream.url("/ok/free"), CHAIN_A)])]
        ),
        **settings,
    )


async def test_anyone_can_call_without_a_key_and_nobody_is_billed(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream)
    balance = world.stored_balance()
    reply = await world.public(rpc("eth_blockNumber", [], 4))
    assert reply.status == 200
    assert json.loads(reply.body)["id"] == 4
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == balance


async def test_one_ip_over_its_limit_gets_32029_and_others_go_on(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(
        make_world, upstream, free_tier_ip_requests=3, signup_url="https://example.com/signup"
    )
    statuses = [
        (await world.public(rpc("eth_blockNumber"), ip="203.0.113.1")).status for _ in range(3)
    ]
    assert statuses == [200, 200, 200]
    refused = await world.public(rpc("eth_blockNumber"), ip="203.0.113.1")
    assert refused.status == 429
    error = json.loads(refused.body)["error"]
    assert error["code"] == -32029
    assert "sign up" in error["message"]
    assert "https://example.com/signup" in error["message"]
    assert (await world.public(rpc("eth_blockNumber"), ip="203.0.113.2")).status == 200


async def test_a_refusal_says_when_to_retry(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    """3 calls per 60 s, taken at once: nothing frees up until their time slot (6 s wide) has
    left the window, 60 to 66 s later, for one call as for a batch of two."""
    world = await _world(make_world, upstream, free_tier_ip_requests=3)
    for _ in range(3):
        await world.public(rpc("eth_blockNumber"), ip="203.0.113.9")
    one = await world.public(rpc("eth_blockNumber"), ip="203.0.113.9")
    two = await world.public(
        [rpc("eth_blockNumber", [], 1), rpc("eth_chainId", [], 2)], ip="203.0.113.9"
    )
    assert one.status == two.status == 429
    assert 60 <= int(dict(one.headers)["retry-after"]) <= 66
    assert dict(two.headers)["retry-after"] == dict(one.headers)["retry-after"]


async def test_every_call_of_a_batch_counts(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, free_tier_ip_requests=3)
    batch = [rpc("eth_blockNumber", [], i) for i in range(4)]
    reply = await world.public(batch, ip="203.0.113.9")
    assert reply.status == 429
    answers = json.loads(reply.body)  # refused whole, each item under its own id
    assert [(item["id"], item["error"]["code"]) for item in answers] == [
        (i, -32029) for i in range(4)
    ]


async def test_the_global_capacity_gives_32030(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, free_tier_capacity_per_s=2)
    ips = [f"198.51.100.{n}" for n in range(3)]
    replies = [await world.public(rpc("eth_blockNumber"), ip=ip) for ip in ips]
    assert [r.status for r in replies] == [200, 200, 429]
    error = json.loads(replies[2].body)["error"]
    assert error["code"] == -32030
    assert "sign up" in error["message"]


async def test_a_disabled_free_tier_says_so(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream, free_tier_enabled=False)
    reply = await world.public(rpc("eth_blockNumber"))
    assert reply.status == 503
    assert json.loads(reply.body)["error"]["code"] == -32030


async def test_the_free_tier_validates_like_the_keyed_route(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _world(make_world, upstream)
    assert (await world.public(b"{")).status == 400
    assert (await world.public(rpc("eth_blockNumber"), chain=5)).status == 422
    assert (await world.public(rpc("eth_nope"))).status == 422


TRUSTED = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")]


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("203.0.113.5", None, "203.0.113.5"),
        ("203.0.113.5", "1.2.3.4", "203.0.113.5"),  # not a trusted proxy: the header is ignored
        ("10.0.0.2", "1.2.3.4", "1.2.3.4"),
        ("10.0.0.2", "6.6.6.6, 1.2.3.4", "1.2.3.4"),  # the left entry is the client's own claim
        ("10.0.0.2", "1.2.3.4, 10.0.0.9", "1.2.3.4"),  # a chain of trusted proxies
        ("10.0.0.2", "garbage", "10.0.0.2"),
        ("10.0.0.2", "", "10.0.0.2"),
        ("::1", "2001:db8::7", "2001:db8::7"),
    ],
)
def test_the_client_ip_comes_from_the_socket_unless_a_trusted_proxy_forwarded_it(
    peer: str, forwarded: str | None, client: str
) -> None:
    assert client_address(peer, forwarded, TRUSTED) == client


@pytest.mark.parametrize(
    ("scope_client", "ip"),
    [("127.0.0.1:5000", "127.0.0.1"), ("[::1]:5000", "::1"), ("::1", "::1")],
)
def test_the_peer_address_is_read_from_the_server_scope(scope_client: str, ip: str) -> None:
    assert peer_ip(scope_client) == ip


def test_an_ipv6_64_is_one_client_for_the_per_ip_limit() -> None:
    """One host or site usually has a whole /64: taking a new address for each call, it would
    otherwise have the tier's total capacity to itself. 100 calls per minute per client here."""
    world = scripted_world([("http://n.node", 0, answering("0x10"))])
    statuses = [world.public(scripted_rpc(), ip=f"2001:db8:1:2::{i:x}").status for i in range(150)]
    assert statuses.count(200) == 100
    assert world.public(scripted_rpc(), ip="2001:db8:1:3::1").status == 200  # another /64
    assert world.public(scripted_rpc(), ip="198.51.100.7").status == 200


@pytest.mark.parametrize(
    ("ip", "block"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::1", "2001:db8:1:2::/64"),
    ],
)
def test_the_per_ip_limit_counts_ipv4_addresses_and_ipv6_64s(ip: str, block: str) -> None:
    assert client_block(ip) == block
