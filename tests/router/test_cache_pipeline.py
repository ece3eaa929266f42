"""The response cache and coalescing as stages, told as stories of what nodes answer (scripted
executor: no sockets). Against real nodes: test_cache.py; the table itself:
tests/domain/test_cacheable.py."""

from __future__ import annotations

import json
import sys
from typing import Any

from chainrouter.domain.enums import Scenario
from chainrouter.router.contract import FailureKind, Forward
from chainrouter.testing.scripted import answering, failing, raw
from tests.router.scripted_world import CHAIN, ScriptedWorld, rpc, scripted_world

A, B = "http://a.node", "http://b.node"
BLOCK = "eth_getBlockByNumber"
HEAD = 100  # the nodes' head; with a depth of 10, block 90 is final
FINAL, UNFINAL = hex(90), hex(91)
NODE_PRICE, CACHE_PRICE = 1_000, 7


def _world(*responders: Any, coalesce: bool = False, **options: Any) -> ScriptedWorld:
    urls = [A, B][: len(responders)]
    return scripted_world(
        [(url, NODE_PRICE, responder) for url, responder in zip(urls, responders, strict=True)],
        methods=(BLOCK, "eth_blockNumber"),
        heads=dict.fromkeys(urls, HEAD),
        cache_bytes=1 << 20,
        coalesce=coalesce,
        cache_prices={"*": CACHE_PRICE},
        **options,
    )


def _header(reply: Any) -> str | None:
    return dict(reply.headers).get("x-cache")


def test_the_cache_stages_sit_before_routing_and_coalescing_before_the_credit_hold() -> None:
    service = _world(answering("0x1"), coalesce=True).service
    names = [type(stage).__name__ for stage in service.keyed.call_stages]
    assert names.index("FromCache") == names.index("CallNeeds") + 1
    assert names.index("FromCache") < names.index("PlanRoutes")
    assert names[-3:] == ["Coalesce", "CreditHold", "Attempt"]
    assert type(service.keyed.closing_stages[0]).__name__ == "Land"
    assert type(service.public.closing_stages[0]).__name__ == "Land"


def test_a_final_block_is_asked_of_a_node_once_then_answered_from_the_cache() -> None:
    block = {"number": FINAL, "hash": "0x" + "ab" * 32}
    world = _world([answering(block)])  # scripted once: a second forward fails the test
    first = world.call(rpc(BLOCK, [FINAL, False], 1))
    second = world.call(rpc(BLOCK, [FINAL, False], "two"))
    assert (_header(first), _header(second)) == ("MISS", "HIT")
    assert json.loads(second.body) == {"jsonrpc": "2.0", "id": "two", "result": block}
    assert world.urls_called() == [A]
    assert world.metered() == {"first_choice": (1, NODE_PRICE), "cache": (1, CACHE_PRICE)}


def test_the_same_call_spelled_otherwise_is_the_same_entry() -> None:
    world = _world([answering({"number": FINAL})])
    world.call(rpc(BLOCK, ["0x5A", False]))
    assert _header(world.call(rpc(BLOCK, ["0x5a", False], 9))) == "HIT"


def test_an_unfinalized_block_a_tag_or_a_null_is_asked_of_a_node_every_time() -> None:
    for params, result in (
        ([UNFINAL, False], {"number": UNFINAL}),
        (["latest", False], {"number": hex(HEAD)}),
        (["finalized", False], {"number": FINAL}),
        ([FINAL, False], None),  # a node that does not have it (yet)
    ):
        world = _world([answering(result), answering(result)])
        replies = [world.call(rpc(BLOCK, params, n)) for n in (1, 2)]
        assert [_header(reply) for reply in replies] == ["MISS", "MISS"], params
        assert world.urls_called() == [A, A], params


def test_an_error_is_never_kept() -> None:
    world = _world([failing(FailureKind.TRANSPORT), answering({"number": FINAL})])
    refused = world.call(rpc(BLOCK, [FINAL, False]))
    world.clock.now += 60  # the failed node's cooldown passes
    answered = world.call(rpc(BLOCK, [FINAL, False]))
    assert refused.status == 424
    assert answered.status == 200
    assert _header(answered) == "MISS"


def test_a_hit_costs_the_cache_price_and_a_customer_who_cannot_pay_it_is_refused() -> None:
    world = _world([answering({"number": FINAL})], balance_nano=NODE_PRICE + CACHE_PRICE)
    world.call(rpc(BLOCK, [FINAL, False]))
    assert world.call(rpc(BLOCK, [FINAL, False])).status == 200
    refused = world.call(rpc(BLOCK, [FINAL, False]))
    assert refused.status == 402
    assert json.loads(refused.body)["error"]["code"] == -32601
    assert world.balance() == 0


def test_identical_calls_of_a_batch_share_one_attempt_each_under_its_own_id() -> None:
    world = _world([answering("0x64")], coalesce=True)
    reply = world.call([rpc("eth_blockNumber", [], n) for n in (1, 2, 3)])
    answers = json.loads(reply.body)
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert {a["result"] for a in answers} == {"0x64"}
    assert world.urls_called() == [A]
    assert _header(reply) == "PARTIAL"  # the leader reached a node; the others did not
    assert world.metered() == {
        "first_choice": (1, NODE_PRICE),
        Scenario.CACHE.value: (2, 2 * CACHE_PRICE),
    }


def test_a_failure_reaches_every_call_that_joined_and_is_billed_to_none() -> None:
    world = _world([failing(FailureKind.TRANSPORT)], coalesce=True)
    answers = json.loads(world.call([rpc("eth_blockNumber", [], n) for n in (1, 2)]).body)
    assert [a["id"] for a in answers] == [1, 2]
    assert answers[0]["error"] == answers[1]["error"]
    assert answers[0]["error"]["code"] == -32009
    assert world.urls_called() == [A]
    assert world.metered() == {"all_failed": (2, 0)}


def test_a_flight_ends_with_its_call_and_a_later_identical_call_is_asked_again() -> None:
    """What a flight shared is nobody's once it has landed: a failure is not served again,
    and no flight is left behind (the map of calls in flight would grow with every key)."""
    world = _world([failing(FailureKind.TRANSPORT), answering("0x65")], coalesce=True)
    failed = json.loads(world.call([rpc("eth_blockNumber", [], n) for n in (1, 2)]).body)
    assert [a["error"]["code"] for a in failed] == [-32009, -32009]
    world.clock.now += 60  # past the node's cooldown
    later = world.call(rpc("eth_blockNumber", [], 3))
    assert json.loads(later.body)["result"] == "0x65"
    assert world.urls_called() == [A, A]
    assert len(world.executor.flights) == 0


def test_different_calls_of_a_batch_are_not_coalesced() -> None:
    world = _world(answering("0x1"), coalesce=True)
    world.call([rpc(BLOCK, [hex(n), False], n) for n in (95, 96)])
    assert world.urls_called() == [A, A]


def test_without_the_cache_no_header_is_sent() -> None:
    world = scripted_world([(A, NODE_PRICE, answering("0x1"))])
    assert _header(world.call(rpc())) is None


def _deep(levels: int) -> object:
    value: object = "0x1"
    for _ in range(levels):
        value = [value]
    return value


def test_an_answer_is_kept_exactly_whatever_its_spacing_numbers_or_depth() -> None:
    """Spaced JSON, an integer beyond 64 bits (which orjson would read as a float), nesting
    deeper than orjson writes: the answer from the cache is the node's value exactly, compact."""
    for result in ({"number": "0x5a"}, {"gas": 18446744073709551617}, _deep(300)):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()  # spaced
        world = _world([raw(body)])
        first = world.call(rpc(BLOCK, [FINAL, False], 1))
        again = world.call(rpc(BLOCK, [FINAL, False], 1))
        assert first.body == body
        assert _header(again) == "HIT"
        assert json.loads(again.body) == json.loads(body)  # the standard library: exact ints
        assert again.body == json.dumps(json.loads(body), separators=(",", ":")).encode()


def test_calls_that_joined_an_answer_that_cannot_be_shared_are_attempted_on_their_own() -> None:
    """Nested deeper than the standard library reads at its default recursion limit (orjson reads
    it): neither kept nor shared, and the calls that joined go to the node themselves. (A package
    may raise the limit for the whole process, as py_ecc does on import: set here.)"""
    nested = b"[" * 1010 + b'"0x1"' + b"]" * 1010
    deep = b'{"jsonrpc":"2.0","id":1,"result":' + nested + b"}"
    world = _world([raw(deep), raw(deep)], coalesce=True)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        answers = world.call([rpc("eth_blockNumber", [], 1)] * 2)
    finally:
        sys.setrecursionlimit(limit)
    assert answers.body == b"[" + deep + b"," + deep + b"]"
    assert world.urls_called() == [A, A]


def test_a_joined_call_holds_nothing_for_a_route_and_pays_only_the_cache_price() -> None:
    """A customer who can pay one route and the cache price gets both identical calls
    answered: the one that joins never needed the route's price."""
    world = _world([answering("0x64")], coalesce=True, balance_nano=NODE_PRICE + CACHE_PRICE)
    answers = json.loads(world.call([rpc("eth_blockNumber", [], n) for n in (1, 2)]).body)
    assert [a.get("result") for a in answers] == ["0x64", "0x64"]
    assert world.balance() == 0
    assert world.metered() == {"first_choice": (1, NODE_PRICE), "cache": (1, CACHE_PRICE)}


def test_a_joined_call_that_cannot_pay_the_cache_price_is_refused_alone() -> None:
    world = _world([answering("0x64")], coalesce=True, balance_nano=NODE_PRICE + CACHE_PRICE - 1)
    answers = json.loads(world.call([rpc("eth_blockNumber", [], n) for n in (1, 2)]).body)
    assert answers[0]["result"] == "0x64"
    assert answers[1]["error"]["code"] == -32601
    assert world.balance() == CACHE_PRICE - 1


def test_a_joined_head_read_never_gets_an_older_head_than_its_own_key_saw() -> None:
    """The leader's key saw a block no node has reached, so its call goes to the first node as
    routed (125), whose head is older than the key saw and is not believed (router/belief.py):
    the leader gets the highest any node tells (130). The follower's key saw 128: the leader's
    first answer would be older than that, and the follower asks on its own, of the node past
    128."""
    world = scripted_world(
        [(A, NODE_PRICE, answering("0x7d")), (B, 2 * NODE_PRICE, answering("0x82"))],
        methods=("eth_blockNumber",),
        heads={A: 125, B: 130},
        coalesce=True,
    )
    follower_key = world.another_key(2)
    world.deps.seen_heads.saw(1, CHAIN, 140, None)
    world.deps.seen_heads.saw(2, CHAIN, 128, None)
    body = json.dumps(rpc("eth_blockNumber", [], 1)).encode()
    leader, follower = world.together((world.key, body), (follower_key, body))
    assert json.loads(leader.body)["result"] == "0x82"
    assert json.loads(follower.body)["result"] == "0x82"
    assert world.urls_called() == [A, B, B]


def _refuses_a_member_twice(command: Forward) -> bytes:
    """A node that reads JSON strictly, as anvil and reth do: a member twice is an invalid
    request."""

    def strict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({name for name, _ in pairs}) != len(pairs):
            raise ValueError("a member twice")
        return dict(pairs)

    try:
        request = json.loads(command.body, object_pairs_hook=strict)
    except ValueError:
        refusal = {"code": -32600, "message": "Invalid request"}
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": refusal}).encode()
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "0x64"}).encode()


def test_a_call_that_is_kept_or_shared_goes_to_the_node_as_it_was_keyed() -> None:
    """A member twice is read here with the last one: sent as written, a strict node would
    refuse it and every identical call that joined would get that refusal; a lenient node
    reading the first one would have its answer kept for the other call."""
    world = _world(_refuses_a_member_twice, coalesce=True)
    other = world.another_key(2, customer_id=2)
    crafted = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":{},"params":[]}'
    honest = json.dumps(rpc("eth_blockNumber", [], 7)).encode()
    replies = world.together((other, crafted), (world.key, honest))
    assert [json.loads(reply.body).get("result") for reply in replies] == ["0x64", "0x64"]
    assert world.urls_called() == [A]


def test_a_leaders_refusal_for_credits_is_its_own_and_the_calls_that_joined_are_attempted() -> None:
    """The leader's customer cannot cover the dearer node the call fails over to: that 402 is
    theirs. The call that joined, of a customer with credits, is attempted on its own."""
    world = scripted_world(
        [(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 300, answering("0x64"))],
        methods=("eth_blockNumber",),
        balance_nano=200,
        coalesce=True,
    )
    rich = world.another_key(2, customer_id=2)
    body = json.dumps(rpc("eth_blockNumber", [], 1)).encode()
    poor, joined = world.together((world.key, body), (rich, body))
    assert (poor.status, json.loads(poor.body)["error"]["code"]) == (402, -32601)
    assert (joined.status, json.loads(joined.body)["result"]) == (200, "0x64")
    assert world.urls_called() == [A, B]  # A, cooling down after the leader's try, is skipped
    assert world.balance() == 200


def test_the_free_tier_reads_the_cache_but_never_writes_it() -> None:
    block = {"number": FINAL, "hash": "0x" + "cd" * 32}
    world = _world([answering(block)] * 3)
    call = rpc(BLOCK, [FINAL, False], 1)
    for _ in range(2):  # anonymous calls keep nothing: each is a node's
        assert json.loads(world.public(call).body)["result"] == block
    assert world.urls_called() == [A, A]
    assert _header(world.call(call)) == "MISS"  # a key's answer is kept ...
    assert json.loads(world.public(call).body)["result"] == block  # ... and read by anyone
    assert world.urls_called() == [A, A, A]


def test_the_free_tier_is_never_told_whether_an_answer_came_from_the_cache() -> None:
    world = _world([answering({"number": FINAL})])
    call = rpc(BLOCK, [FINAL, False], 1)
    assert _header(world.call(call)) == "MISS"
    public = world.public(call)
    assert json.loads(public.body)["result"] == {"number": FINAL}
    assert _header(public) is None
    assert _header(world.call(call)) == "HIT"


def test_a_customer_with_nothing_left_gets_no_answer_from_the_cache_even_a_free_one() -> None:
    block = {"number": FINAL}
    world = scripted_world(
        [(A, NODE_PRICE, [answering(block)])],
        methods=(BLOCK,),
        heads={A: HEAD},
        cache_bytes=1 << 20,
        balance_nano=0,
    )
    other = world.another_key(2, customer_id=2)  # a customer with credits fills the cache
    call = rpc(BLOCK, [FINAL, False], 1)
    assert json.loads(world.call(call, key=other).body)["result"] == block
    assert json.loads(world.call(call, key=other).body)["result"] == block  # a free hit
    refused = world.call(call)
    assert refused.status == 402
    assert json.loads(refused.body)["error"]["code"] == -32601
    assert world.urls_called() == [A]
