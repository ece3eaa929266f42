"""The property of issue 51 (docs/integrity.md): whatever nodes lag, lie or fail, and however
the chain reorganises above its finalized block, as long as one honest node serves the chain, no
answer a client gets contradicts the chain.

Three providers' nodes relay to one real anvil through the fault-injecting upstream, each one
honest, lagging (N blocks behind), lying (the named methods' answers altered) or failing, in any
price order; the chain's `verify` is `always`. Every call is checked against what the real node
itself answers: the calls the chain lets the router prove, a block's logs (which the head rules
judge), and the head. With reorgs (`anvil_reorg`: the chain's last blocks mined again, another
transfer in the first), the router keeps a response cache and its trusted headers across the
reorg: whatever it answered, proved or kept before, every answer after it is the chain's as it
is now, and the cache answers only calls pinned to final blocks (docs/cache.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from chainrouter.domain.verification import VerifyMode
from chainrouter.router.contract import Failure, FailureKind, Forward
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import Responder, Script
from tests.anvil import CHAIN_A, DEPLOY_LOGGING, node_result, start_anvil_nodes
from tests.router.scripted_world import rpc, scripted_world

URLS = ("http://a.node", "http://b.node", "http://c.node")
JSON = {"content-type": "application/json"}
LIED = (
    "eth_getBalance,eth_getTransactionCount,eth_getCode,eth_getStorageAt,"
    "eth_getTransactionReceipt,eth_getBlockReceipts,eth_getBlockByNumber,eth_getBlockByHash"
)
PRICED = (
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getCode",
    "eth_getTransactionReceipt",
    "eth_getBlockByNumber",
    "eth_getLogs",
    "eth_blockNumber",
)


@dataclass(frozen=True)
class Chain:
    url: str
    port: int
    head: int
    sender: str
    contract: str
    txs: tuple[str, ...]


def _made(name: str) -> Iterator[Chain]:
    """An anvil of its own: three transfers and a logging deployment, then blocks over them."""
    nodes = start_anvil_nodes(((name, CHAIN_A),))
    url = next(nodes).urls[name]
    sender = node_result(url, "eth_accounts", [])[0]
    txs = [
        node_result(url, "eth_sendTransaction", [{"from": sender, "to": f"0x{n + 1:040x}"}])
        for n in range(3)
    ]
    deployed = node_result(url, "eth_sendTransaction", [{"from": sender, "data": DEPLOY_LOGGING}])
    contract = node_result(url, "eth_getTransactionReceipt", [deployed])["contractAddress"]
    node_result(url, "anvil_mine", ["0xc"])
    head = int(node_result(url, "eth_blockNumber", []), 16)
    yield Chain(url, int(url.rsplit(":", 1)[1]), head, sender, contract, (*txs, deployed))
    nodes.close()


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    yield from _made("property")


@pytest.fixture(scope="module")
def relays() -> Iterator[FaultyUpstream]:
    with FaultyUpstream() as server:
        yield server


def relaying(url: str) -> Responder:
    def respond(command: Forward) -> bytes:
        return httpx.post(url, content=command.body, headers=JSON, timeout=30).content

    return respond


def failing(command: Forward) -> Failure:
    return Failure(FailureKind.TRANSPORT, "refused", None)


NODE = st.one_of(
    st.just(("honest", 0)),
    st.tuples(st.just("lagging"), st.integers(1, 8)),
    st.just(("lying", 0)),
    st.just(("failing", 0)),
)


def calls(chain: Chain) -> st.SearchStrategy[dict[str, Any]]:
    block = st.integers(1, chain.head - 1).map(hex)
    address = st.sampled_from([chain.sender, chain.contract, f"0x{1:040x}"])
    return st.one_of(
        st.tuples(address, block).map(lambda p: rpc("eth_getBalance", list(p))),
        st.tuples(address, block).map(lambda p: rpc("eth_getTransactionCount", list(p))),
        st.tuples(address, block).map(lambda p: rpc("eth_getCode", list(p))),
        st.sampled_from(chain.txs).map(lambda h: rpc("eth_getTransactionReceipt", [h])),
        block.map(lambda b: rpc("eth_getBlockByNumber", [b, False])),
        block.map(lambda b: rpc("eth_getLogs", [{"fromBlock": b, "toBlock": b}])),
        st.just(rpc("eth_blockNumber", [])),
    )


@pytest.fixture
def truth(chain: Chain) -> Any:
    def answer(call: dict[str, Any]) -> Any:
        return node_result(chain.url, call["method"], call["params"])

    return answer


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_answer_a_client_gets_contradicts_the_chain(
    chain: Chain, relays: FaultyUpstream, truth: Any, data: st.DataObject
) -> None:
    kinds = data.draw(st.lists(NODE, min_size=3, max_size=3).filter(lambda k: ("honest", 0) in k))
    nodes: list[tuple[str, int, Script]] = []
    heads: dict[str, int] = {}
    for url, (kind, lag) in zip(URLS, kinds, strict=True):
        port = chain.port
        script: Responder
        if kind == "honest":
            script = relaying(relays.url(f"/relay/{port}/full/p"))
        elif kind == "lagging":
            script = relaying(relays.url(f"/relay/{port}/lag/{lag}/p"))
        elif kind == "lying":
            script = relaying(relays.url(f"/relay/{port}/lie/{LIED}/p"))
        else:
            script = failing
        price = data.draw(st.integers(1, 1000))
        nodes.append((url, price, script))
        heads[url] = chain.head - lag
    world = scripted_world(nodes, methods=PRICED, heads=heads, verify=VerifyMode.ALWAYS)
    for call in data.draw(st.lists(calls(chain), min_size=1, max_size=4)):
        reply = world.call(call)
        assert reply.status == 200, (kinds, call, reply.body)
        got = orjson.loads(reply.body)["result"]
        if call["method"] == "eth_blockNumber":
            # The chain's head is what nodes of two providers reached (each node here is its
            # own provider's): the second highest; a head within the allowed lag of it stands.
            floor = sorted(heads.values(), reverse=True)[1] - 2
            assert int(got, 16) >= floor, (kinds, call, got)
        else:
            assert got == truth(call), (kinds, call)


MOVED_TO = "0x" + "22" * 20  # what the reorgs transfer to (not a precompile: anvil drops those)
FINALITY_DEPTH = 6  # the world's: blocks this far behind the head are final
MAX_REORG = 5  # never past finality, which is what finality promises


@pytest.fixture(scope="module")
def reorging() -> Iterator[Chain]:
    """An anvil of its own, reorganised by the test (the other test's chain stays as made)."""
    yield from _made("reorging")


def reorg(chain: Chain, depth: int, value: int) -> str:
    """Mine the chain's last `depth` blocks again, a transfer of `value` wei to `MOVED_TO` in
    the first of them; the transfer's hash."""
    transfer = {"from": chain.sender, "to": MOVED_TO, "value": hex(value)}
    node_result(chain.url, "anvil_reorg", [depth, [[transfer, 0]]])
    assert int(node_result(chain.url, "eth_blockNumber", []), 16) == chain.head
    block = node_result(chain.url, "eth_getBlockByNumber", [hex(chain.head - depth + 1), False])
    moved: str = block["transactions"][0]
    return moved


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    # Each example reorganises the chain for good (anvil cannot revert past a reorg): a failing
    # example replayed meets another chain, so neither shrinking nor replaying examples saved
    # by an earlier run would show the same thing; the first failure is reported as it is.
    phases=[Phase.explicit, Phase.generate],
)
@given(data=st.data())
def test_after_a_reorg_no_answer_contradicts_the_chain_as_it_is_now(
    reorging: Chain, relays: FaultyUpstream, data: st.DataObject
) -> None:
    chain = reorging
    kinds = data.draw(st.lists(NODE, min_size=3, max_size=3).filter(lambda k: ("honest", 0) in k))
    nodes: list[tuple[str, int, Script]] = []
    heads: dict[str, int] = {}
    for url, (kind, lag) in zip(URLS, kinds, strict=True):
        script: Responder
        if kind == "honest":
            script = relaying(relays.url(f"/relay/{chain.port}/full/r"))
        elif kind == "lagging":
            script = relaying(relays.url(f"/relay/{chain.port}/lag/{lag}/r"))
        elif kind == "lying":
            script = relaying(relays.url(f"/relay/{chain.port}/lie/{LIED}/r"))
        else:
            script = failing
        nodes.append((url, data.draw(st.integers(1, 1000)), script))
        heads[url] = chain.head - lag
    world = scripted_world(
        nodes,
        methods=PRICED,
        heads=heads,
        verify=VerifyMode.ALWAYS,
        cache_bytes=1 << 20,
        finality_depth=FINALITY_DEPTH,
    )
    # The newest block the cache may take as final: no node's head is past the chain's.
    final = chain.head - FINALITY_DEPTH
    reorged = calls(chain)
    near = st.integers(final + 1, chain.head - 1).map(hex)  # blocks a reorg may change
    at_reorg = st.one_of(
        reorged,
        near.map(lambda b: rpc("eth_getBalance", [MOVED_TO, b])),
        near.map(lambda b: rpc("eth_getTransactionCount", [chain.sender, b])),
        near.map(lambda b: rpc("eth_getBlockByNumber", [b, False])),
        # The transfers earlier reorgs mined, some in blocks since reorganised away (drawn by
        # index: what the list holds is the chain's doing, not the draw's).
        st.integers(0, 1000).map(moved_receipt),
    )
    before = data.draw(st.lists(at_reorg, min_size=1, max_size=4))
    for call in before:
        ask(world, chain, call, kinds, heads, final)
    MOVED.append(
        reorg(chain, data.draw(st.integers(1, MAX_REORG)), data.draw(st.integers(1, 10**6)))
    )
    # The same calls again, whatever the router answered, proved or kept of them before; and more.
    for call in [*before, *data.draw(st.lists(at_reorg, max_size=3))]:
        ask(world, chain, call, kinds, heads, final)


MOVED: list[str] = []  # the transfers each reorg mined, by their hashes


def moved_receipt(index: int) -> dict[str, Any]:
    if not MOVED:
        return rpc("eth_blockNumber", [])
    return rpc("eth_getTransactionReceipt", [MOVED[index % len(MOVED)]])


def ask(
    world: Any,
    chain: Chain,
    call: dict[str, Any],
    kinds: list[tuple[str, int]],
    heads: dict[str, int],
    final: int,
) -> None:
    """Ask `call` twice (the second may be answered from the cache): each answer the chain's as
    it is now, and one from the cache only for a call pinned to a final block."""
    for _ in range(2):
        reply = world.call(call)
        assert reply.status == 200, (kinds, call, reply.body)
        got = orjson.loads(reply.body)["result"]
        if call["method"] == "eth_blockNumber":
            floor = sorted(heads.values(), reverse=True)[1] - 2
            assert int(got, 16) >= floor, (kinds, call, got)
            continue
        assert got == node_result(chain.url, call["method"], call["params"]), (kinds, call)
        if dict(reply.headers).get("x-cache") == "HIT":
            assert _pinned_to(call, got) <= final, (kinds, call)


def _pinned_to(call: dict[str, Any], got: Any) -> int:
    """The block number a drawn call names; a receipt's, its block's (the cache keeps no
    absence)."""
    params = call["params"]
    if call["method"] == "eth_getTransactionReceipt":
        return int(got["blockNumber"], 16)
    if call["method"] == "eth_getLogs":
        return int(params[0]["toBlock"], 16)
    if call["method"] == "eth_getBlockByNumber":
        return int(params[0], 16)
    return int(params[1], 16)
