"""Spec section 7 on the keyed route: each failure the router can produce comes with its HTTP
status and JSON-RPC code, in single requests and in batches, and ids are echoed exactly."""

from __future__ import annotations

import json

import orjson
import pytest

from chainrouter.router.service import RpcService
from chainrouter.router.stages import memo
from chainrouter.router.stages.domain import AllowedDomain
from chainrouter.router.stages.key import ApiKey
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import (
    CHAIN_A,
    CHAIN_B,
    World,
    WorldFactory,
    api_key,
    provider,
    rpc,
    world_config,
)

pytestmark = pytest.mark.anyio
PRICES = {"eth_blockNumber": "0.000001", "eth_chainId": "0"}


def _error(body: bytes) -> tuple[object, int, str]:
    answer = json.loads(body)
    return answer["id"], answer["error"]["code"], answer["error"]["message"]


@pytest.fixture
async def world(make_world: WorldFactory, upstream: FaultyUpstream) -> World:
    config = world_config(
        [provider("p", PRICES, [(upstream.url("/ok/statuses"), CHAIN_A)])],
        [
            api_key("main"),
            api_key("off", active=False),
            api_key("site", allowed_domains=["app.example.com", "*.example.org"]),
        ],
    )
    return await make_world(config)


async def test_a_served_call_is_200_with_the_upstream_answer(world: World) -> None:
    reply = await world.call(rpc("eth_blockNumber", [], 5))
    assert reply.status == 200
    assert json.loads(reply.body) == {"jsonrpc": "2.0", "id": 5, "result": "0x10d4f"}
    assert reply.batch_id


@pytest.mark.parametrize(
    "body",
    [b"{", b"", b"not json", b'{"jsonrpc":"2.0","id":1,"method":"x"', b"\xff\xfe"],
)
async def test_a_body_that_is_not_json_is_400_parse_error(world: World, body: bytes) -> None:
    reply = await world.call(body)
    assert reply.status == 400
    assert _error(reply.body)[:2] == (None, -32700)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "eth_chainId"}, "jsonrpc"),
        ({"id": 1, "method": "eth_chainId"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": "x"}, "params"),
        ({"jsonrpc": "2.0", "method": "eth_chainId"}, "id"),
        ({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "extra": 1}, "extra"),
        ([], "empty batch"),
        (5, "object"),
    ],
)
async def test_an_invalid_request_is_400_invalid_request(
    world: World, payload: object, why: str
) -> None:
    reply = await world.call(payload)
    assert reply.status == 400
    _, code, message = _error(reply.body)
    assert code == -32600
    assert why in message


async def test_an_invalid_request_with_an_id_gets_its_id_back(world: World) -> None:
    reply = await world.call({"jsonrpc": "1.0", "id": "mine", "method": "eth_chainId"})
    assert reply.status == 400
    assert _error(reply.body)[:2] == ("mine", -32600)


async def test_a_batch_over_the_limit_is_refused_whole(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config([provider("p", PRICES, [(upstream.url("/ok/batch-limit"), CHAIN_A)])]),
        max_batch_size=3,
    )
    reply = await world.call([rpc("eth_chainId", [], i) for i in range(4)])
    assert reply.status == 400
    assert "maximum of 3" in _error(reply.body)[2]
    assert upstream.requests["/ok/batch-limit"] == 0


async def test_a_body_over_the_limit_is_413(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config([provider("p", PRICES, [(upstream.url("/ok/body-limit"), CHAIN_A)])]),
        max_body_bytes=1024,
    )
    reply = await world.call(rpc("eth_chainId", ["x" * 2000]))
    assert reply.status == 413
    assert _error(reply.body)[1] == -32600


@pytest.mark.parametrize("key", ["crk_unknownunknownunknownunknownunknown", "nonsense", "", "off"])
async def test_an_unknown_malformed_or_inactive_key_is_401(world: World, key: str) -> None:
    reply = await world.call(rpc("eth_chainId"), key=key)
    assert reply.status == 401
    assert _error(reply.body)[2] == "invalid API key"


@pytest.mark.parametrize(
    ("origin", "referer", "allowed"),
    [
        ("https://app.example.com", None, True),
        ("https://APP.example.com:8443", None, True),
        ("https://deep.sub.example.org", None, True),
        ("https://example.org", None, False),  # a wildcard means subdomains only
        ("https://evil.com", None, False),
        ("https://app.example.com.evil.com", None, False),
        (None, "https://app.example.com/page?x=1", True),
        (None, "https://evil.com/app.example.com", False),
        ("https://evil.com", "https://app.example.com/", False),  # Origin wins over Referer
        ("null", None, False),
        (None, None, False),  # neither header: only "*" lets it through
    ],
)
async def test_allowed_domains_decide_on_origin_else_referer(
    world: World, origin: str | None, referer: str | None, allowed: bool
) -> None:
    reply = await world.call(rpc("eth_chainId"), key="site", origin=origin, referer=referer)
    assert reply.status == (200 if allowed else 403)
    if not allowed:
        assert "not allowed from this domain" in _error(reply.body)[2]


async def test_a_key_allowing_any_origin_needs_no_header(world: World) -> None:
    assert (await world.call(rpc("eth_chainId"))).status == 200


async def test_a_key_admitted_from_one_origin_is_still_refused_from_another(world: World) -> None:
    allowed, other = "https://app.example.com", "https://evil.com"
    statuses = [
        (await world.call(rpc("eth_chainId"), key="site", origin=origin)).status
        for origin in (allowed, other, allowed, other)
    ]
    assert statuses == [200, 403, 200, 403]
    on_other_chain = await world.call(rpc("eth_chainId"), key="site", origin=allowed, chain=CHAIN_B)
    assert on_other_chain.status == 422


async def test_admissions_are_remembered_within_bounds(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memo, "MEMO_SIZE", 8)
    service = RpcService(world.service.snapshot, world.service.deps)  # stages with the new bound
    world.runtime.service = service
    [keys] = [s for s in service.keyed.request_stages if isinstance(s, ApiKey)]
    [domains] = [s for s in service.keyed.request_stages if isinstance(s, AllowedDomain)]
    for n in range(20):
        reply = await world.call(rpc("eth_chainId"), origin=f"https://site{n}.example")
        assert reply.status == 200
        assert len(domains.remembered) <= 8
    assert len(keys.remembered) == 1
    remembered = len(domains.remembered)
    long_origin = "https://" + "a" * 600 + ".example"
    assert (await world.call(rpc("eth_chainId"), origin=long_origin)).status == 200
    assert len(domains.remembered) == remembered  # checked, not remembered
    refused = await world.call(rpc("eth_chainId"), key="site", origin="https://evil.com")
    assert refused.status == 403
    assert len(domains.remembered) == remembered  # refusals are never remembered
    assert (await world.call(rpc("eth_chainId"), key="crk_" + "x" * 43)).status == 401
    assert len(keys.remembered) == 2  # the "site" key, found; never the unknown one


@pytest.mark.parametrize("chain", ["1", "abc", "0x7a69", "-5", "0", "99999999999999999999999"])
async def test_a_chain_without_service_is_422_chain_not_supported(world: World, chain: str) -> None:
    reply = await world.call(rpc("eth_chainId"), chain=chain)
    assert reply.status == 422
    assert _error(reply.body)[1] == -32001


async def test_a_chain_in_the_catalog_without_nodes_is_not_supported(world: World) -> None:
    reply = await world.call(rpc("eth_chainId"), chain=CHAIN_B)
    assert reply.status == 422
    assert _error(reply.body)[1] == -32001


async def test_an_unpriced_method_is_422_method_not_supported(world: World) -> None:
    reply = await world.call(rpc("eth_sendRawTransaction", ["0x00"], "tx"))
    assert reply.status == 422
    assert _error(reply.body)[:2] == ("tx", -32002)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/status/500", 424, -32009),
        ("/status/503", 424, -32009),
        ("/status/404", 424, -32009),
        ("/garbage", 424, -32009),
        ("/wrong-id", 424, -32009),
        ("/reset", 424, -32009),
        ("/status/429", 429, -32003),
        ("/sleep/3000", 504, -32009),
        ("/drip/400", 504, -32009),
    ],
)
async def test_when_every_upstream_fails_the_status_says_how(
    make_world: WorldFactory, upstream: FaultyUpstream, path: str, status: int, code: int
) -> None:
    nodes = [(upstream.url(f"{path}/{name}"), CHAIN_A) for name in ("x", "y")]
    world = await make_world(world_config([provider("p", PRICES, nodes)]), upstream_timeout_s=0.3)
    reply = await world.call(rpc("eth_blockNumber", [], 9))
    assert reply.status == status
    assert _error(reply.body)[:2] == (9, code)


async def test_when_every_node_is_cooling_down_it_is_429(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config([provider("p", PRICES, [(upstream.url("/status/502/cool"), CHAIN_A)])])
    )
    assert (await world.call(rpc("eth_blockNumber"))).status == 424
    before = upstream.requests["/status/502/cool"]
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.status == 429
    assert _error(reply.body)[1] == -32003
    assert upstream.requests["/status/502/cool"] == before  # not hammered while cooling


async def test_insufficient_credits_is_402_and_reaches_no_node(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config([provider("p", PRICES, [(upstream.url("/ok/broke"), CHAIN_A)])], credits=None)
    )
    reply = await world.call(rpc("eth_blockNumber", [], "b"))
    assert reply.status == 402
    assert _error(reply.body)[:2] == ("b", -32601)
    assert upstream.requests["/ok/broke"] == 0
    # A free method still costs nothing, so an empty balance covers it.
    assert (await world.call(rpc("eth_chainId"))).status == 200


async def test_a_key_that_bypasses_the_credit_check_is_served_without_credits(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [provider("p", PRICES, [(upstream.url("/ok/bypass"), CHAIN_A)])],
            [api_key("main", bypass_credit_check=True)],
            credits=None,
        )
    )
    assert (await world.call(rpc("eth_blockNumber"))).status == 200


@pytest.mark.parametrize(
    "request_id",
    [0, -1, 2**63 - 1, -(2**63), "0x1", "", "ü", None],
)
async def test_ids_are_echoed_exactly(world: World, request_id: object) -> None:
    body = b'{"jsonrpc":"2.0","method":"eth_chainId","id":' + json.dumps(request_id).encode() + b"}"
    reply = await world.call(body)
    assert reply.status == 200
    assert json.loads(reply.body)["id"] == request_id
    single_error = await world.call(
        b'{"jsonrpc":"2.0","method":"nope","id":' + json.dumps(request_id).encode() + b"}"
    )
    assert json.loads(single_error.body)["id"] == request_id


async def test_a_batch_answers_each_item_in_order_and_a_bad_item_sinks_nothing(
    world: World,
) -> None:
    batch = [
        rpc("eth_blockNumber", [], "first"),
        {"jsonrpc": "2.0", "id": "bad", "method": 1},
        17,
        rpc("eth_unknown", [], 2**62),
        rpc("eth_chainId", None, None),
    ]
    reply = await world.call(batch)
    assert reply.status == 200
    answers = json.loads(reply.body)
    assert [a["id"] for a in answers] == ["first", "bad", None, 2**62, None]
    assert answers[0]["result"] == "0x10d4f"
    assert answers[1]["error"]["code"] == -32600
    assert answers[2]["error"]["code"] == -32600
    assert answers[3]["error"]["code"] == -32002
    assert "result" in answers[4]


async def test_a_batch_whose_items_all_fail_alike_takes_their_status(world: World) -> None:
    reply = await world.call([rpc("eth_nope", [], 1), rpc("eth_nope", [], 2)])
    assert reply.status == 422
    assert [a["error"]["code"] for a in orjson.loads(reply.body)] == [-32002, -32002]


async def test_batch_ids_differ_for_every_reply(world: World) -> None:
    replies = [await world.call(rpc("eth_chainId")) for _ in range(3)]
    replies.append(await world.call(b"{"))
    replies.append(await world.call(rpc("eth_chainId"), key="nope"))
    assert len({r.batch_id for r in replies}) == 5
