"""The property of issue 51 (docs/integrity.md): whatever nodes lag, lie or fail, as long as one
honest node serves the chain, no answer a client gets contradicts the chain.

Three providers' nodes relay to one real anvil through the fault-injecting upstream, each one
honest, lagging (N blocks behind), lying (the named methods' answers altered) or failing, in any
price order; the chain's `verify` is `always`. Every call is checked against what the real node
itself answers: the calls the chain lets the router prove, a block's logs (which the head rules
judge), and the head."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
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


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    nodes = start_anvil_nodes((("property", CHAIN_A),))
    url = next(nodes).urls["property"]
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
