"""The fault-injecting upstream's behaviours that the fault table (bench/faults.py) is made of:
a node that never answers, a JSON body cut short, a node of another chain, and a fault on a
share of the calls only; and the misbehaving nodes of the integrity tests, relayed to a real
anvil: one that lags N blocks behind, one that alters the answers of named methods."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chainrouter.testing.faulty_upstream import CHAIN_ID, OK_RESULT, FaultyUpstream
from tests.anvil import CHAIN_A, DEPLOY_LOGGING, node_result, start_anvil_nodes

CALL = {"jsonrpc": "2.0", "id": 7, "method": "eth_blockNumber", "params": []}


def test_hang_never_answers_and_lets_go_when_the_client_closes(upstream: FaultyUpstream) -> None:
    before = upstream.open_connections  # kept ones of other tests
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(upstream.url("/hang/t1"), json=CALL, timeout=0.3)
    assert time.monotonic() - started >= 0.3
    deadline = time.monotonic() + 5
    while upstream.open_connections > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert upstream.open_connections == before


def test_cut_json_is_a_complete_http_answer_whose_body_is_not_json(
    upstream: FaultyUpstream,
) -> None:
    response = httpx.post(upstream.url("/cut-json"), json=CALL, timeout=5)
    assert response.status_code == 200
    assert len(response.content) == int(response.headers["content-length"])
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)


def test_chain_answers_like_ok_but_names_another_chain(upstream: FaultyUpstream) -> None:
    chain_id = {**CALL, "method": "eth_chainId"}
    answers = httpx.post(upstream.url("/chain/5"), json=[CALL, chain_id], timeout=5).json()
    assert [a["result"] for a in answers] == [OK_RESULT, "0x5"]
    ok = httpx.post(upstream.url("/ok"), json=chain_id, timeout=5).json()
    assert ok["result"] == hex(CHAIN_ID)


def test_some_gives_its_fault_to_that_share_of_calls_evenly_spread(
    upstream: FaultyUpstream,
) -> None:
    statuses = [
        httpx.post(upstream.url("/some/30/status/503/t2"), json=CALL, timeout=5).status_code
        for _ in range(20)
    ]
    assert statuses.count(503) == 6
    assert statuses.count(200) == 14
    assert "503, 503" not in ", ".join(map(str, statuses))  # spread, not bunched
    assert upstream.requests["/some/30/status/503/t2"] == 20


SENDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"  # anvil's first dev account


@pytest.fixture(scope="module")
def real_node() -> Iterator[tuple[str, str]]:
    """An anvil of its own at block 21, whose head block holds a transaction that logged:
    its URL and that transaction's hash."""
    nodes = start_anvil_nodes((("misbehaving", CHAIN_A),))
    url = next(nodes).urls["misbehaving"]
    node_result(url, "anvil_mine", ["0x14"])
    tx = node_result(url, "eth_sendTransaction", [{"from": SENDER, "data": DEPLOY_LOGGING}])
    yield url, tx
    nodes.close()


def _ask(url: str, method: str, params: list[Any]) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 3, "method": method, "params": params}, timeout=10
    ).json()
    return answer


def test_lag_answers_as_a_node_n_blocks_behind(
    upstream: FaultyUpstream, real_node: tuple[str, str]
) -> None:
    node, tx = real_node
    port = node.rsplit(":", 1)[1]
    lagging = upstream.url(f"/relay/{port}/lag/5/t3")
    head = int(node_result(node, "eth_blockNumber", []), 16)
    behind = head - 5

    def result(method: str, params: list[Any]) -> Any:
        return _ask(lagging, method, params)["result"]

    assert int(result("eth_blockNumber", []), 16) == behind
    assert result("eth_getBlockByNumber", [hex(head), False]) is None
    assert result("eth_getBlockByNumber", ["latest", False])["number"] == hex(behind)
    assert result("eth_getBlockByNumber", [hex(behind), False]) == node_result(
        node, "eth_getBlockByNumber", [hex(behind), False]
    )
    assert result("eth_getTransactionReceipt", [tx]) is None
    assert result("eth_getTransactionByHash", [tx]) is None
    assert result("eth_getBlockReceipts", [hex(head)]) is None
    assert node_result(node, "eth_getLogs", [{"fromBlock": hex(head - 2)}]) != []
    assert result("eth_getLogs", [{"fromBlock": hex(head - 2), "toBlock": "latest"}]) == []
    assert result("eth_getLogs", [{"fromBlock": "0x0"}]) == []
    past = _ask(lagging, "eth_getBalance", [SENDER, hex(head)])
    assert past["error"]["code"] == -32000
    assert result("eth_getBalance", [SENDER, "latest"]) == node_result(
        node, "eth_getBalance", [SENDER, hex(behind)]
    )
    # A batch is answered item by item, in its order.
    batch = [
        {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        for n, (method, params) in enumerate(
            [("eth_blockNumber", []), ("eth_getTransactionReceipt", [tx]), ("eth_chainId", [])]
        )
    ]
    answers = httpx.post(lagging, json=batch, timeout=10).json()
    assert [a["id"] for a in answers] == [0, 1, 2]
    assert [a["result"] for a in answers] == [hex(behind), None, hex(CHAIN_A)]


def test_lie_alters_the_named_methods_answers_well_formed(
    upstream: FaultyUpstream, real_node: tuple[str, str]
) -> None:
    node, tx = real_node
    port = node.rsplit(":", 1)[1]
    named = [
        "eth_getBalance",
        "eth_getTransactionCount",
        "eth_call",
        "eth_getCode",
        "eth_getStorageAt",
        "eth_getTransactionReceipt",
        "eth_getBlockByNumber",
        "eth_getLogs",
        "eth_getProof",
    ]
    lying = upstream.url(f"/relay/{port}/lie/{','.join(named)}/t4")
    contract = node_result(node, "eth_getTransactionReceipt", [tx])["contractAddress"]
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getBalance", [SENDER, "latest"]),
        ("eth_getTransactionCount", [SENDER, "latest"]),
        ("eth_call", [{"to": contract}, "latest"]),
        ("eth_getCode", [contract, "latest"]),
        ("eth_getStorageAt", [contract, "0x0", "latest"]),
        ("eth_getTransactionReceipt", [tx]),
        ("eth_getBlockByNumber", ["latest", False]),
        ("eth_getLogs", [{"fromBlock": "0x0"}]),
        ("eth_getProof", [SENDER, [], "latest"]),
    ]
    for method, params in calls:
        truth, lie = node_result(node, method, params), _ask(lying, method, params)["result"]
        assert lie != truth, method
        assert type(lie) is type(truth), method
        if isinstance(truth, str):
            assert lie.startswith("0x"), method
            if method in ("eth_getCode", "eth_call", "eth_getStorageAt"):
                assert len(lie) == len(truth), method
    proof = _ask(lying, "eth_getProof", [SENDER, [], "latest"])["result"]
    truth = node_result(node, "eth_getProof", [SENDER, [], "latest"])
    assert proof["accountProof"] == truth["accountProof"]
    assert proof["balance"] != truth["balance"]
    receipt = _ask(lying, "eth_getTransactionReceipt", [tx])["result"]
    assert receipt["status"] == "0x0"
    assert {k: v for k, v in receipt.items() if k != "status"} == {
        k: v
        for k, v in node_result(node, "eth_getTransactionReceipt", [tx]).items()
        if k != "status"
    }
    # Methods not named, and answers that are null, pass as the node gave them.
    assert _ask(lying, "eth_blockNumber", [])["result"] == node_result(node, "eth_blockNumber", [])
    assert _ask(lying, "eth_getTransactionReceipt", ["0x" + "00" * 32])["result"] is None
    unknown = httpx.post(upstream.url(f"/relay/{port}/lie/eth_chainId"), json=CALL, timeout=5)
    assert unknown.status_code == 404
