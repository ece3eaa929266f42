"""The router dials only what the dial rule allows, checked on the addresses a connection really
uses, whenever one is made (net/outbound.py; docs/security.md): a node's name that resolves to
loopback, a private network or the metadata address gets no call, however it was screened."""

from __future__ import annotations

import ipaddress
import json

import pytest
from aiohttp import web

from chainrouter.net.client_ip import parse_networks
from chainrouter.net.outbound import DialRule
from chainrouter.router.ws.upstream import UpstreamClosedError, open_upstream
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, WorldFactory, provider, rpc, world_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_node_that_resolves_to_loopback_gets_no_call(
    make_world: WorldFactory, upstream: FaultyUpstream, host: str
) -> None:
    url = upstream.url("/ok/rebound").replace("127.0.0.1", host)
    world = await make_world(
        world_config([provider("p", {"eth_blockNumber": "0.000001"}, [(url, CHAIN_A)])]),
        outbound_allow_private=False,
    )
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.status == 424
    assert json.loads(reply.body)["error"]["code"] == -32009
    assert upstream.requests["/ok/rebound"] == 0
    assert await world.runtime.sync.flush()
    assert world.stored_usage_by_scenario() == {"all_failed": (1, 0)}  # not billed


async def test_a_network_the_operator_trusts_is_dialled(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    url = upstream.url("/ok/trusted").replace("127.0.0.1", "localhost")
    world = await make_world(
        world_config([provider("p", {"eth_blockNumber": "0.000001"}, [(url, CHAIN_A)])]),
        outbound_allow_private=False,
        outbound_trusted_networks=["127.0.0.0/8", "::1/128"],
    )
    assert (await world.call(rpc("eth_blockNumber"))).status == 200
    assert upstream.requests["/ok/trusted"] == 1


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("169.254.169.254", "a link-local address"),
        ("10.1.2.3", "a private address"),
        ("::ffff:127.0.0.1", "a loopback address (inside an IPv6 address)"),
        ("fe80::1%eth0", "a link-local address"),
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("not an address", "not an IP address"),
    ],
)
def test_the_rule_refuses_what_is_not_public(address: str, problem: str | None) -> None:
    assert DialRule().problem_of(address) == problem


def test_trusted_networks_and_the_development_switch_lift_it() -> None:
    trusted = DialRule(trusted_networks=parse_networks(["10.20.0.0/16"]))
    assert trusted.problem(ipaddress.ip_address("10.20.1.1")) is None
    assert trusted.problem(ipaddress.ip_address("10.21.1.1")) == "a private address"
    assert DialRule(allow_private=True).problem(ipaddress.ip_address("127.0.0.1")) is None
    assert not DialRule(allow_private=True).checks


async def test_a_websocket_node_that_redirects_its_handshake_gets_no_second_dial() -> None:
    """A WebSocket handshake follows redirects unless told not to; a node screened when it
    answered could later send the router to an address the rule refuses (the metadata address,
    loopback): the redirect is the node's failure, and its target is never dialled."""
    reached: list[str] = []

    async def internal(request: web.Request) -> web.Response:
        reached.append(request.path)
        return web.Response(text="metadata")

    async def node(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{internal_port}/latest/meta-data/")

    runners = []
    ports = []
    for host, handler in (("127.0.0.1", internal), ("127.0.0.2", node)):
        app = web.Application()
        app.router.add_get("/{path:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        runners.append(runner)
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    internal_port, node_port = ports
    rule = DialRule(trusted_networks=parse_networks(["127.0.0.2/32"]))  # a "public" node
    try:
        with pytest.raises(UpstreamClosedError, match="HTTP 307"):
            await open_upstream(
                f"ws://127.0.0.2:{node_port}/ws",
                rule=rule,
                ssl=None,
                connect_timeout_s=5,
                max_message_bytes=1 << 20,
            )
        assert reached == []
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_a_refused_websocket_handshake_says_nothing_of_the_urls_path_or_query() -> None:
    """Its text goes to the log; aiohttp's ended with the URL, where providers put keys."""

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=401)

    app = web.Application()
    app.router.add_get("/{path:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        with pytest.raises(UpstreamClosedError) as caught:
            await open_upstream(
                f"ws://127.0.0.1:{port}/v3/PATHKEY?apikey=QUERYKEY",
                rule=DialRule(allow_private=True),
                ssl=None,
                connect_timeout_s=5,
                max_message_bytes=1 << 20,
            )
    finally:
        await runner.cleanup()
    assert "HTTP 401" in str(caught.value)
    assert "PATHKEY" not in str(caught.value)
    assert "QUERYKEY" not in str(caught.value)
