"""Answers proven before they are served (design notes, "Integrity", Proofs; router/proving.py).

Two providers' nodes relay to one real anvil (the same chain, as two providers' nodes of a
public chain are), one of them altering what it answers where a test says so. The pipeline runs
on the scripted executor, so every call a proof makes is seen; the proofs are real: anvil's
`eth_getProof`, headers and receipts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.requirements import work_of
from chainrouter.domain.verification import Check, VerifyMode
from chainrouter.integrity import PROOFS, ProofKind
from chainrouter.router.contract import FailureKind, Forward
from chainrouter.router.pipeline import Reply
from chainrouter.router.proving import CHECKS
from chainrouter.router.trusted_headers import TrustedHeaders
from chainrouter.testing.scripted import Responder, failing, slow
from tests.anvil import CHAIN_A, DEPLOY_LOGGING, node_result, start_anvil_nodes
from tests.router.scripted_world import CHAIN, ScriptedWorld, rpc, scripted_world

A, B = "http://a.node", "http://b.node"
RECIPIENT = "0x00000000000000000000000000000000000000aa"
JSON = {"content-type": "application/json"}
Lie = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class Chain:
    url: str
    sender: str
    head: int
    transfer: str  # a transfer's hash, mined in block 1
    contract: str  # a contract deployed in block 2


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    nodes = start_anvil_nodes((("proofs", CHAIN_A),))
    anvil = next(nodes)
    url = anvil.urls["proofs"]
    sender = node_result(url, "eth_accounts", [])[0]
    transfer = node_result(
        url, "eth_sendTransaction", [{"from": sender, "to": RECIPIENT, "value": "0x2a"}]
    )
    deployed = node_result(url, "eth_sendTransaction", [{"from": sender, "data": DEPLOY_LOGGING}])
    contract = node_result(url, "eth_getTransactionReceipt", [deployed])["contractAddress"]
    node_result(url, "anvil_mine", ["0x10"])  # blocks 1 and 2 final at a depth of 10
    head = int(node_result(url, "eth_blockNumber", []), 16)
    yield Chain(url, sender, head, transfer, contract)
    nodes.close()


def relaying(url: str, lie: Lie | None = None, methods: tuple[str, ...] = ()) -> Responder:
    """A node that answers what the real node answers, but for `methods`, whose result it
    replaces with `lie(request, result)`."""

    def respond(command: Forward) -> bytes:
        request = orjson.loads(command.body)
        answer = httpx.post(url, content=command.body, headers=JSON, timeout=30).json()
        if lie is not None and request.get("method") in methods and "result" in answer:
            answer["result"] = lie(request, answer["result"])
        return orjson.dumps(answer)

    return respond


def plus_one(request: dict[str, Any], result: Any) -> Any:
    return hex(int(result, 16) + 1)


PRICED = (
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getCode",
    "eth_getStorageAt",
    "eth_getBlockByNumber",
    "eth_getTransactionReceipt",
    "eth_getTransactionByHash",
    "eth_call",
    "eth_getLogs",
)


def world(
    chain: Chain,
    verify: VerifyMode,
    a: Responder | None = None,
    *,
    one_provider: bool = False,
    cache: bool = True,
    decisions: bool = False,
) -> ScriptedWorld:
    """A (cheaper, tried first) and B, both at the real node's head, each its own provider's
    unless `one_provider`."""
    return scripted_world(
        [(A, 100, a or relaying(chain.url)), (B, 200, relaying(chain.url))],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        cache_bytes=1 << 20 if cache else 0,
        finality_depth=10,
        provider_of={B: A} if one_provider else None,
        verify=verify,
        decisions=decisions,
    )


def result(reply: Reply) -> Any:
    assert reply.status == 200, reply.body
    return orjson.loads(reply.body)["result"]


def verified(reply: Reply) -> str | None:
    return dict(reply.headers).get("x-verified")


def cordoned(w: ScriptedWorld) -> list[str]:
    """The nodes cordoned, with why: out of every route at once (router/cordon.py)."""
    assert w.cordons is not None
    return [n.url for n in w.nodes if w.cordons.is_cordoned(n.node_id)]


def checked(w: ScriptedWorld, outcome: str) -> int:
    return sum(n for (_, _, how), n in w.deps.metrics.verified.items() if how == outcome)


def test_a_final_balance_is_proven_marked_verified_and_kept(chain: Chain) -> None:
    w = world(chain, VerifyMode.CACHE)
    call = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    reply = w.call(call)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"
    # The proof: the block's header from the answering node, its hash agreed by the other
    # provider's node, and the account's proof against its stateRoot.
    assert w.urls_called() == [A, A, B, A]
    again = w.call(call)
    assert result(again) == "0x2a"
    assert len(w.urls_called()) == 4  # kept: answered from the cache
    assert checked(w, "proof") == 1


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("eth_getBalance", lambda c: [RECIPIENT, "0x1"]),
        ("eth_getTransactionCount", lambda c: [c.sender, "0x2"]),
        ("eth_getCode", lambda c: [c.contract, "0x2"]),
        ("eth_getStorageAt", lambda c: [c.contract, "0x0", "0x2"]),
    ],
)
def test_a_node_that_alters_a_state_read_is_not_served_and_is_reported(
    chain: Chain, method: str, params: Callable[[Chain], list[Any]]
) -> None:
    def altered(request: dict[str, Any], result: Any) -> Any:
        if method == "eth_getCode":
            return result + "00"
        if method == "eth_getStorageAt":
            return "0x" + "00" * 31 + "01"
        return plus_one(request, result)

    w = world(chain, VerifyMode.CACHE, relaying(chain.url, altered, (method,)))
    truth = node_result(chain.url, method, params(chain))
    reply = w.call(rpc(method, params(chain)))
    assert result(reply) == truth  # the other provider's, proven
    assert verified(reply) == "proof"
    assert cordoned(w) == [A]
    assert checked(w, "false") == 1


def test_with_one_provider_an_answer_is_served_unproven_and_not_kept(chain: Chain) -> None:
    w = world(chain, VerifyMode.CACHE, one_provider=True)
    call = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    reply = w.call(call)
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    forwarded = len(w.urls_called())
    w.call(call)
    assert len(w.urls_called()) > forwarded  # not kept: asked of a node again
    assert checked(w, "unproven") == 2


def test_with_one_provider_a_lie_is_not_served_and_its_node_not_accused(chain: Chain) -> None:
    """No second provider vouches for the header, but a balance its own stateRoot does not hold
    is not served; the other node's answer, which holds, is (unproven). One provider's nodes do
    not vouch against each other: nobody is cordoned."""
    w = world(
        chain,
        VerifyMode.ALWAYS,
        relaying(chain.url, plus_one, ("eth_getBalance",)),
        one_provider=True,
        cache=False,
    )
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert cordoned(w) == []


def test_a_proof_that_fails_for_every_node_alike_accuses_none(chain: Chain) -> None:
    """Both providers answer a block whose hash its fields do not make (a chain whose headers
    are of another kind, or whose transactions the proofs do not know): the proofs do not fit
    this chain; the caller who asked must not be able to cordon its nodes."""

    def other_kind(request: dict[str, Any], block: Any) -> Any:
        return {**block, "extraData": "0x01"}

    both = relaying(chain.url, other_kind, ("eth_getBlockByNumber",))
    w = scripted_world(
        [(A, 100, both), (B, 200, relaying(chain.url, other_kind, ("eth_getBlockByNumber",)))],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        verify=VerifyMode.ALWAYS,
    )
    reply = w.call(rpc("eth_getBlockByNumber", ["0x1", False]))
    assert result(reply)["extraData"] == "0x01"  # served as the nodes give it, unproven
    assert verified(reply) is None
    assert cordoned(w) == []
    assert checked(w, "false") == 0


def test_a_block_by_number_is_proven_by_its_hash_and_a_second_provider(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getBlockByNumber", ["0x1", True]))
    assert result(reply)["number"] == "0x1"
    assert verified(reply) == "proof"

    def forged(request: dict[str, Any], block: Any) -> Any:
        return {**block, "gasUsed": hex(int(block["gasUsed"], 16) + 1)}

    lying = world(chain, VerifyMode.ALWAYS, relaying(chain.url, forged, ("eth_getBlockByNumber",)))
    reply = lying.call(rpc("eth_getBlockByNumber", ["0x1", False], request_id=7))
    assert result(reply) == node_result(chain.url, "eth_getBlockByNumber", ["0x1", False])
    assert cordoned(lying) == [A]
    # B's block is served, but unproven: the only other provider, A, is the one that lied.
    assert verified(reply) is None


def test_a_receipt_is_proven_against_its_blocks_receipts(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getTransactionReceipt", [chain.transfer]))
    assert result(reply)["transactionHash"] == chain.transfer
    assert verified(reply) == "proof"

    def failed(request: dict[str, Any], receipt: Any) -> Any:
        return {**receipt, "status": "0x0"}

    lying = world(
        chain, VerifyMode.ALWAYS, relaying(chain.url, failed, ("eth_getTransactionReceipt",))
    )
    reply = lying.call(rpc("eth_getTransactionReceipt", [chain.transfer]))
    assert result(reply)["status"] == "0x1"
    assert cordoned(lying) == [A]


def test_a_transaction_is_proven_against_its_blocks_transactions(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getTransactionByHash", [chain.transfer]))
    assert result(reply)["hash"] == chain.transfer
    assert verified(reply) == "proof"

    def redirected(request: dict[str, Any], tx: Any) -> Any:
        return {**tx, "to": "0x00000000000000000000000000000000000000bb"}

    lying = world(
        chain, VerifyMode.ALWAYS, relaying(chain.url, redirected, ("eth_getTransactionByHash",))
    )
    reply = lying.call(rpc("eth_getTransactionByHash", [chain.transfer]))
    assert result(reply)["to"] == RECIPIENT
    assert cordoned(lying) == [A]


def test_logs_of_a_short_range_are_proven_complete_by_their_blocks_receipts(chain: Chain) -> None:
    logs = rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x4"}])
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(logs)
    assert [log["blockNumber"] for log in result(reply)] == ["0x2"]  # the deployment's
    assert verified(reply) == "proof"

    def dropped(request: dict[str, Any], found: Any) -> Any:
        return []  # well-formed, and false: block 2's receipts hold a log the filter matches

    lying = world(chain, VerifyMode.ALWAYS, relaying(chain.url, dropped, ("eth_getLogs",)))
    reply = lying.call(logs)
    assert len(result(reply)) == 1
    assert verified(reply) == "proof"
    assert cordoned(lying) == [A]


def test_logs_of_one_block_by_its_hash_are_proven(chain: Chain) -> None:
    block = node_result(chain.url, "eth_getBlockByNumber", ["0x2", False])
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getLogs", [{"blockHash": block["hash"]}]))
    assert len(result(reply)) == 1
    assert verified(reply) == "proof"


def test_a_log_range_wider_than_the_proven_one_is_agreed_when_kept(chain: Chain) -> None:
    w = world(chain, VerifyMode.CACHE)
    reply = w.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x6"}]))
    assert len(result(reply)) == 1
    assert verified(reply) == "agreement"
    assert w.urls_called() == [A, B]


def test_a_kept_answer_the_chain_cannot_prove_is_agreed_by_two_providers(chain: Chain) -> None:
    call = rpc("eth_call", [{"to": chain.contract, "data": "0x"}, "0x2"])
    w = world(chain, VerifyMode.CACHE)
    reply = w.call(call)
    assert verified(reply) == "agreement"
    assert w.urls_called() == [A, B]

    def other(request: dict[str, Any], value: Any) -> Any:
        return "0x01"

    disagreeing = world(chain, VerifyMode.CACHE, relaying(chain.url, other, ("eth_call",)))
    reply = disagreeing.call(call)
    assert verified(reply) is None  # served unproven (audits settle who was right) ...
    disagreeing.call(call)
    assert disagreeing.urls_called() == [A, B, A, B]  # ... and never kept


def test_an_answer_being_proven_is_not_given_up_by_a_hedge_with_no_route_left(
    chain: Chain,
) -> None:
    """A's answer and its proof take 50 ms each; a hedge starts after 70 ms and finds B cooling
    down: the race waits for A's proof, it does not end without an answer."""
    w = scripted_world(
        [(A, 100, slow(0.05, relaying(chain.url))), (B, 200, relaying(chain.url))],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        verify=VerifyMode.ALWAYS,
    )
    for _ in range(20):
        w.deps.health.recent.observe(1, work_of("eth_getBalance"), 0.070)
    w.deps.cooldowns.failed(2)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"


def test_a_read_at_latest_is_pinned_to_a_block_its_nodes_have_and_proven(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "latest"]))
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"
    sent = orjson.loads(w.executor.forwarded[0].body)
    assert sent["params"] == [RECIPIENT, hex(chain.head)]  # the lowest head of its nodes

    block = w.call(rpc("eth_getBlockByNumber", ["latest", False]))
    assert result(block)["number"] == hex(chain.head)
    assert verified(block) == "proof"

    lying = world(chain, VerifyMode.ALWAYS, relaying(chain.url, plus_one, ("eth_getBalance",)))
    reply = lying.call(rpc("eth_getBalance", [RECIPIENT]))  # no block named: latest
    assert result(reply) == "0x2a"
    assert cordoned(lying) == [A]


def test_a_read_at_latest_is_not_pinned_below_the_head_its_key_was_told(chain: Chain) -> None:
    w = scripted_world(
        [(A, 100, relaying(chain.url)), (B, 200, relaying(chain.url))],
        methods=PRICED,
        heads={A: chain.head - 1, B: chain.head},  # A within the allowed lag
        finality_depth=10,
        verify=VerifyMode.ALWAYS,
    )
    w.deps.seen_heads.saw(1, CHAIN, chain.head, None)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "latest"]))
    assert result(reply) == "0x2a"
    sent = orjson.loads(w.executor.forwarded[0].body)
    assert w.executor.forwarded[0].url == B  # the node behind what the key was told is passed
    assert sent["params"] == [RECIPIENT, hex(chain.head)]


def test_a_read_at_another_head_tag_is_not_proven(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "pending"]))
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A]


def test_with_verify_off_nothing_is_asked_beyond_the_call(chain: Chain) -> None:
    w = world(chain, VerifyMode.OFF)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A]


def test_a_key_that_asks_for_verified_answers_gets_proofs_on_a_chain_set_off(
    chain: Chain,
) -> None:
    w = world(chain, VerifyMode.OFF, cache=False)
    call = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    assert verified(w.call(call)) is None
    asking = w.another_key(2, verified=True)
    reply = w.call(call, key=asking)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"


def test_a_proven_call_is_never_handed_over_as_a_decision(chain: Chain) -> None:
    w = world(chain, VerifyMode.ALWAYS, cache=False, decisions=True)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert verified(reply) == "proof"
    assert w.decided(reply) == []
    unproven = w.call(rpc("eth_getBalance", [RECIPIENT, "pending"]))
    assert w.decided(unproven)  # a read it does not prove still is


def test_every_method_the_router_proves_is_one_the_proofs_table_says_is_provable() -> None:
    kinds = {
        Check.STATE: ProofKind.STATE,
        Check.BLOCK: ProofKind.HEADER,
        Check.RECEIPT: ProofKind.RECEIPTS,
        Check.TRANSACTION: ProofKind.TRANSACTIONS,
        Check.LOGS: ProofKind.RECEIPTS,
    }
    assert {method: kinds[check] for method, check in CHECKS.items()} == {
        method: PROOFS[method].kind for method in CHECKS
    }


def test_a_storage_read_that_names_no_block_is_not_taken_for_one_pinned_to_a_hash(
    chain: Chain,
) -> None:
    """eth_getStorageAt(address, slot) reads the head: a 32-byte slot is no block hash, and the
    call is pinned to the head's number after it, not in its place."""
    w = world(chain, VerifyMode.ALWAYS, cache=False)
    slot = "0x" + "00" * 32
    reply = w.call(rpc("eth_getStorageAt", [chain.contract, slot]))
    assert reply.status == 200
    assert verified(reply) == "proof"
    sent = orjson.loads(w.executor.forwarded[0].body)
    assert sent["params"] == [chain.contract, slot, hex(chain.head)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3)), max_size=60),
    st.integers(1, 8),
)
def test_trusted_headers_stay_within_their_bound_and_find_what_they_hold(
    trusted: list[tuple[int, int]], bound: int
) -> None:
    headers = TrustedHeaders(bound)

    def header(number: int, fork: int) -> dict[str, str]:  # forks that part at every block
        return {
            "hash": f"0x{number:04x}{fork:060x}",
            "number": hex(number),
            "parentHash": f"0x{(number - 1) % 0x10000:04x}{fork:060x}",
        }

    for number, fork in trusted:
        headers.trust(1, header(number, fork))
    assert len(headers) <= bound
    for number, _ in trusted:
        found = headers.by_number(1, number)
        if found is not None:  # what the index names is held, and is of that number
            assert int(str(found["number"]), 16) == number
    if trusted:  # the last one trusted is always found
        number, fork = trusted[-1]
        assert headers.by_number(1, number) == header(number, fork)


def test_a_free_tier_read_the_cache_will_not_keep_asks_for_no_proof(chain: Chain) -> None:
    """The free tier never writes the cache (docs/cache.md): under `cache` its final reads are
    answers like any other, and an anonymous caller cannot make the router ask nodes more."""
    w = world(chain, VerifyMode.CACHE)
    reply = w.public(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A]


def test_a_refuted_answer_is_never_served_while_another_provider_could_answer(
    chain: Chain,
) -> None:
    """A lies, B (another provider) fails: the call fails rather than serve A's refuted word;
    and A is not accused, nothing having held the proof A failed."""
    w = scripted_world(
        [
            (A, 100, relaying(chain.url, plus_one, ("eth_getBalance",))),
            (B, 200, failing(FailureKind.TRANSPORT)),
        ],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        verify=VerifyMode.ALWAYS,
    )
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert reply.status != 200 or "result" not in orjson.loads(reply.body)
    assert cordoned(w) == []


def test_an_answer_from_the_cache_says_how_it_was_verified_before_it_was_kept(
    chain: Chain,
) -> None:
    """A hit says `X-Verified` by the rule a fresh answer does (docs/cache.md): `proof` when
    every call was proven, `agreement` when each was proven or agreed; and the native server,
    handed a hit as a decision, says the same."""
    w = world(chain, VerifyMode.CACHE, decisions=True)
    balance = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    call = rpc("eth_call", [{"to": chain.contract, "data": "0x"}, "0x2"], request_id=2)
    assert verified(w.call(balance)) == "proof"
    assert verified(w.call(call)) == "agreement"
    forwarded = len(w.urls_called())
    hit = w.call(balance)
    assert (verified(hit), dict(hit.headers).get("x-cache")) == ("proof", "HIT")
    assert ("x-verified", "proof") in w.decided(hit)[0].headers
    hit = w.call(call)
    assert (verified(hit), dict(hit.headers).get("x-cache")) == ("agreement", "HIT")
    assert ("x-verified", "agreement") in w.decided(hit)[0].headers
    both = w.call([balance, call])
    assert (verified(both), dict(both.headers).get("x-cache")) == ("agreement", "HIT")
    # Each alone would say otherwise: the batch's header is no decision for either call.
    assert w.decided(both) == []
    proven = w.call([balance, {**balance, "id": 3}])
    assert verified(proven) == "proof"
    assert [("x-verified", "proof") in d.headers for d in w.decided(proven)] == [True, True]
    assert len(w.urls_called()) == forwarded  # every one of them from the cache
    assert checked(w, "proof") == 1  # a hit is no check made again


def test_an_answer_kept_unverified_says_nothing_from_the_cache(chain: Chain) -> None:
    """Under `verify = off` the cache keeps what a node said: a hit carries no `X-Verified`."""
    w = world(chain, VerifyMode.OFF, decisions=True)
    balance = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    w.call(balance)
    hit = w.call(balance)
    assert (verified(hit), dict(hit.headers).get("x-cache")) == (None, "HIT")
    assert all(name != "x-verified" for name, _ in w.decided(hit)[0].headers)


def test_a_call_that_joined_a_checked_call_in_flight_says_how_it_was_checked(
    chain: Chain,
) -> None:
    """Two identical calls in one batch: the second joins the first's flight (docs/cache.md,
    coalescing) and gets its answer, checked before it was served: the batch is `proof`."""
    w = scripted_world(
        [(A, 100, relaying(chain.url)), (B, 200, relaying(chain.url))],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        cache_bytes=1 << 20,
        coalesce=True,
        verify=VerifyMode.CACHE,
    )
    balance = rpc("eth_getBalance", [RECIPIENT, "0x1"])
    reply = w.call([balance, {**balance, "id": 2}])
    assert [item["result"] for item in orjson.loads(reply.body)] == ["0x2a", "0x2a"]
    assert (verified(reply), dict(reply.headers).get("x-cache")) == ("proof", "PARTIAL")
    assert w.urls_called() == [A, A, B, A]  # one answer and its proof for both


def test_a_key_that_asks_for_verified_answers_takes_no_answer_kept_unchecked(
    chain: Chain,
) -> None:
    w = world(chain, VerifyMode.OFF)  # the chain's answers kept as the nodes gave them
    plain = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]))
    assert verified(plain) is None
    assert w.urls_called() == [A]
    verified_key = w.another_key(2, verified=True)
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]), key=verified_key)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"  # asked and proven, not the unchecked entry
    again = w.call(rpc("eth_getBalance", [RECIPIENT, "0x1"]), key=verified_key)
    assert verified(again) == "proof"
    assert dict(again.headers).get("x-cache") == "HIT"  # kept proven this time


def test_a_key_that_asks_for_verified_answers_joins_no_unchecked_call_in_flight(
    chain: Chain,
) -> None:
    w = scripted_world(
        [(A, 100, slow(0.1, relaying(chain.url))), (B, 200, relaying(chain.url))],
        methods=PRICED,
        heads={A: chain.head, B: chain.head},
        finality_depth=10,
        verify=VerifyMode.OFF,
        coalesce=True,
    )
    verified_key = w.another_key(2, verified=True)
    body = orjson.dumps(rpc("eth_getBalance", [RECIPIENT, "0x3"]))
    plain, checked = w.together((w.key, body), (verified_key, body))
    assert verified(plain) is None
    assert verified(checked) == "proof"
