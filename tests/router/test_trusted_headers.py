"""Trusted headers (design notes, "Integrity": a header is trusted when two providers agree on
its hash at its number, or when a trusted header's `parentHash` chain reaches it;
router/proving.py, `TrustedHeaders` and `Prover._agreed`).

The headers are real: one anvil chain made once, then reorganised (`anvil_reorg`) so that its
last blocks exist on two forks, each header hashing to its own hash. The store is held to its
rules over any interleaving of agreements and unvouched headers from both forks (hypothesis);
the prover's use of the chain is counted in the calls it makes, on the scripted executor."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.verification import VerifyMode
from chainrouter.integrity import verify_header
from chainrouter.router.contract import Forward
from chainrouter.router.proving import PARENT_WALK
from chainrouter.router.trusted_headers import TrustedHeaders
from chainrouter.testing.scripted import Responder
from tests.anvil import CHAIN_A, node_result, start_anvil_nodes
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

A, B = "http://a.node", "http://b.node"
RECIPIENT = "0x00000000000000000000000000000000000000aa"
JSON = {"content-type": "application/json"}
FORKED_AT = 12  # blocks above it differ between the two forks
HEAD = 16
CHAIN = 1  # the scripted world's chain


@dataclass(frozen=True)
class Forks:
    """Headers by number of the chain as first mined (`old`) and as reorganised (`new`);
    `url`: the node, on the new fork."""

    url: str
    old: dict[int, dict[str, Any]]
    new: dict[int, dict[str, Any]]


def _headers(url: str) -> dict[int, dict[str, Any]]:
    headers = {}
    for number in range(1, HEAD + 1):
        block = node_result(url, "eth_getBlockByNumber", [hex(number), False])
        verify_header(block)
        headers[number] = block
    return headers


@pytest.fixture(scope="module")
def forks() -> Iterator[Forks]:
    nodes = start_anvil_nodes((("forks", CHAIN_A),))
    url = next(nodes).urls["forks"]
    sender = node_result(url, "eth_accounts", [])[0]
    node_result(url, "eth_sendTransaction", [{"from": sender, "to": RECIPIENT, "value": "0x2a"}])
    node_result(url, "anvil_mine", [hex(HEAD - 1)])
    old = _headers(url)
    # The last blocks again, another transfer in the first: every hash above FORKED_AT changes.
    moved = {"from": sender, "to": RECIPIENT, "value": "0x7"}
    node_result(url, "anvil_reorg", [HEAD - FORKED_AT, [[moved, 0]]])
    new = _headers(url)
    assert old[FORKED_AT] == new[FORKED_AT]
    assert old[FORKED_AT + 1]["hash"] != new[FORKED_AT + 1]["hash"]
    yield Forks(url, old, new)
    nodes.close()


def _fork(forks: Forks, name: str) -> dict[int, dict[str, Any]]:
    return forks.old if name == "old" else forks.new


def _hash(header: Any) -> str:
    return str(header["hash"]).lower()


# --- the store --------------------------------------------------------------------------------


def test_a_header_whose_child_is_trusted_is_trusted_by_the_chain(forks: Forks) -> None:
    headers = TrustedHeaders()
    headers.trust(CHAIN, forks.new[10])
    assert headers.trust_ancestor(CHAIN, forks.new[10], forks.new[9])
    assert headers.by_number(CHAIN, 9) == forks.new[9]
    # Not the parent: neither another fork's header of that number, nor a header of another.
    headers.trust(CHAIN, forks.new[15])
    assert not headers.trust_ancestor(CHAIN, forks.new[15], forks.old[14])
    assert not headers.trust_ancestor(CHAIN, forks.new[15], forks.new[13])
    assert headers.by_number(CHAIN, 14) is None
    # Nor is a child that is not trusted any ground.
    assert not headers.trust_ancestor(CHAIN, forks.new[6], forks.new[5])


def test_held_ancestors_are_trusted_once_a_trusted_header_reaches_them(forks: Forks) -> None:
    headers = TrustedHeaders()
    for number in (3, 4, 5, 7):
        headers.hold(CHAIN, forks.new[number])
    assert len(headers) == 0
    headers.trust(CHAIN, forks.new[6])
    # 5, 4 and 3 by their chain; 7 is above, which no chain from 6 reaches.
    assert [headers.by_number(CHAIN, n) for n in (3, 4, 5, 6)] == [
        forks.new[n] for n in (3, 4, 5, 6)
    ]
    assert headers.by_number(CHAIN, 7) is None
    assert [_hash(h) for h in headers.unvouched(CHAIN)] == [_hash(forks.new[7])]
    # A header held when the trusted one above already names it is trusted at once.
    headers.hold(CHAIN, forks.new[2])
    assert headers.by_number(CHAIN, 2) == forks.new[2]


def test_a_header_held_against_the_trusted_one_at_its_number_is_never_trusted_by_chain(
    forks: Forks,
) -> None:
    headers = TrustedHeaders()
    headers.trust(CHAIN, forks.old[FORKED_AT + 1])
    headers.hold(CHAIN, forks.new[FORKED_AT + 1])
    # Its child on its own fork arrives by a path that does not replace the trusted one: the
    # store refuses to let a chain settle what only an agreement may.
    headers.trust(CHAIN, forks.new[FORKED_AT + 3])
    assert not headers.trust_ancestor(CHAIN, forks.new[FORKED_AT + 2], forks.new[FORKED_AT + 1])
    assert headers.by_number(CHAIN, FORKED_AT + 1) == forks.old[FORKED_AT + 1]


def test_an_agreement_on_another_hash_drops_the_old_header_and_what_no_longer_reaches_it(
    forks: Forks,
) -> None:
    headers = TrustedHeaders()
    for number in range(FORKED_AT - 2, HEAD + 1):
        headers.trust(CHAIN, forks.old[number])
    assert headers.reorgs == 0
    headers.trust(CHAIN, forks.new[FORKED_AT + 2])
    assert headers.reorgs == 1
    held = {n: headers.by_number(CHAIN, n) for n in range(FORKED_AT - 2, HEAD + 1)}
    # Below the fork the chain is one; the old fork's block under the new header is not its
    # parent, and everything above it descends from the old one.
    assert held == {
        **{n: forks.old[n] for n in range(FORKED_AT - 2, FORKED_AT + 1)},
        FORKED_AT + 1: None,
        FORKED_AT + 2: forks.new[FORKED_AT + 2],
        **dict.fromkeys(range(FORKED_AT + 3, HEAD + 1)),
    }
    for gone in range(FORKED_AT + 1, HEAD + 1):
        assert headers.by_hash(CHAIN, _hash(forks.old[gone])) is None


def test_headers_above_an_agreed_reorg_that_reach_it_stay(forks: Forks) -> None:
    headers = TrustedHeaders()
    headers.trust(CHAIN, forks.old[FORKED_AT + 1])
    headers.trust(CHAIN, forks.new[FORKED_AT + 3])
    headers.trust(CHAIN, forks.new[FORKED_AT + 2])  # contradicts old 13 below it: a reorg
    assert headers.by_number(CHAIN, FORKED_AT + 1) is None
    assert headers.by_number(CHAIN, FORKED_AT + 3) == forks.new[FORKED_AT + 3]


OP = st.tuples(
    st.sampled_from(["trust", "hold"]),
    st.sampled_from(["old", "new"]),
    st.integers(FORKED_AT - 3, HEAD),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(OP, max_size=40), bound=st.integers(3, 40))
def test_trusted_headers_never_contradict_each_other_nor_trust_without_a_reason(
    forks: Forks, ops: list[tuple[str, str, int]], bound: int
) -> None:
    """Over any interleaving of agreements and unvouched headers of two forks: the last agreed
    header is held, nothing held contradicts it, two held headers of consecutive numbers are
    parent and child, and a header trusted that no agreement named was reached by the chain of
    one that did, on its own fork."""
    headers = TrustedHeaders(bound, max_unvouched=bound)
    agreed: set[str] = set()
    reached_by: dict[str, set[str]] = {}  # hash -> the agreed hashes above it on its fork
    for kind, fork_name, number in ops:
        fork = _fork(forks, fork_name)
        header = fork[number]
        if kind == "hold":
            headers.hold(CHAIN, header)
            continue
        headers.trust(CHAIN, header)
        agreed.add(_hash(header))
        for below in range(1, number):
            reached_by.setdefault(_hash(fork[below]), set()).add(_hash(header))
        assert headers.by_number(CHAIN, number) == header
        _consistent(headers, agreed, reached_by)
    _consistent(headers, agreed, reached_by)
    assert len(headers) <= bound


def _consistent(headers: TrustedHeaders, agreed: set[str], reached_by: dict[str, set[str]]) -> None:
    held = {n: headers.by_number(CHAIN, n) for n in range(1, HEAD + 2)}
    for n, h in held.items():
        if h is None:
            continue
        child = held.get(n + 1)
        if child is not None:
            assert str(child["parentHash"]).lower() == _hash(h), n
        assert _hash(h) in agreed or reached_by.get(_hash(h)), n


# --- the prover -------------------------------------------------------------------------------


def relaying(url: str, missing: frozenset[str] = frozenset()) -> Responder:
    """A node relaying to the real one, but without the blocks whose numbers `missing` names
    (`null` for them by number: a node that has not got, or has pruned, them)."""

    def respond(command: Forward) -> bytes:
        request = orjson.loads(command.body)
        if request.get("method") == "eth_getBlockByNumber" and request["params"][0] in missing:
            return orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": None})
        return httpx.post(url, content=command.body, headers=JSON, timeout=30).content

    return respond


def world(forks: Forks, b_missing: frozenset[str] = frozenset()) -> ScriptedWorld:
    return scripted_world(
        [(A, 100, relaying(forks.url)), (B, 200, relaying(forks.url, b_missing))],
        methods=("eth_getBalance", "eth_getBlockByNumber"),
        heads={A: HEAD, B: HEAD},
        verify=VerifyMode.ALWAYS,
    )


def balance(w: ScriptedWorld, number: int) -> tuple[str, str | None]:
    reply = w.call(rpc("eth_getBalance", [RECIPIENT, hex(number)]))
    assert reply.status == 200, reply.body
    return orjson.loads(reply.body)["result"], dict(reply.headers).get("x-verified")


def test_the_parent_of_a_trusted_header_is_trusted_without_asking_another_provider(
    forks: Forks,
) -> None:
    w = world(forks)
    assert balance(w, 8) == (node_result(forks.url, "eth_getBalance", [RECIPIENT, "0x8"]), "proof")
    assert w.urls_called() == [A, A, B, A]  # the answer, the header, B agrees, the proof
    assert balance(w, 7)[1] == "proof"
    assert w.urls_called()[4:] == [A, A, A]  # the answer, the header (8 names it), the proof


def test_a_header_no_other_provider_has_is_reached_from_a_trusted_one_within_the_walk(
    forks: Forks,
) -> None:
    w = world(forks, b_missing=frozenset({hex(3)}))
    assert balance(w, 3 + PARENT_WALK)[1] == "proof"
    called = len(w.urls_called())
    # B has not block 3: the header of 3+PARENT_WALK reaches it through the blocks between,
    # each fetched by hash from A and checked against its child's parentHash.
    assert balance(w, 3)[1] == "proof"
    walked = w.urls_called()[called:]
    assert walked == [A, A, B, *[A] * (PARENT_WALK - 1), A]
    # Those between are trusted now: a balance at one of them asks nobody for its header.
    called = len(w.urls_called())
    assert balance(w, 5)[1] == "proof"
    assert w.urls_called()[called:] == [A, A]
    # One block further than the walk reaches is left unproven (served, not marked).
    w2 = world(forks, b_missing=frozenset({hex(2)}))
    assert balance(w2, 3 + PARENT_WALK)[1] == "proof"
    called = len(w2.urls_called())
    assert balance(w2, 2)[1] is None
    assert w2.urls_called()[called:] == [A, A, B, A]  # no walk: nothing trusted in reach


def test_after_a_reorg_two_providers_agreeing_on_the_new_header_replace_the_old_fork(
    forks: Forks,
) -> None:
    """The router trusted the old fork's headers before the chain reorganised (the fixture's
    anvil is on the new fork now): a read at a reorganised block is proven against the new
    header once B agrees on it, and the old fork's headers from there up are dropped."""
    w = world(forks)
    prover = w.deps.prover
    assert prover is not None
    for number in range(FORKED_AT, HEAD + 1):
        prover.headers.trust(CHAIN, forks.old[number])
    number = FORKED_AT + 2
    truth = node_result(forks.url, "eth_getBalance", [RECIPIENT, hex(number)])
    assert balance(w, number) == (truth, "proof")
    # The answer; the proof at the old header's hash, which A no longer has; A's header at
    # that number, which B agrees on; the proof again.
    assert w.urls_called() == [A, A, A, B, A]
    assert prover.headers.by_number(CHAIN, number) is not None
    assert _hash(prover.headers.by_number(CHAIN, number)) == _hash(forks.new[number])
    assert prover.headers.by_number(CHAIN, FORKED_AT) is not None  # below the fork: one chain
    for gone in (FORKED_AT + 1, *range(number + 1, HEAD + 1)):
        assert prover.headers.by_number(CHAIN, gone) is None
