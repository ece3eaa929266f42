"""The fault-injecting upstream's `/relay` paths: a real node (anvil) answers, except the calls
the path refuses, which get the error a node lacking that capability gives, unforwarded."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chainrouter.testing.faulty_upstream import FaultyUpstream, faulty_upstream
from tests.anvil import CHAIN_A, anvil_binary, free_port, wait_until_answering

HEAD = 20  # blocks mined on the node before the tests


@pytest.fixture(scope="module")
def anvil_port() -> Iterator[int]:
    """One real anvil, mined to block HEAD."""
    port = free_port()
    process = subprocess.Popen(
        [anvil_binary(), "--port", str(port), "--silent"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_answering(url)
        httpx.post(url, json=_call("anvil_mine", [hex(HEAD)]), timeout=10).raise_for_status()
        yield port
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def relay_upstream() -> Iterator[FaultyUpstream]:
    with faulty_upstream() as upstream:
        yield upstream


def _call(method: str, params: list[Any] | None = None, call_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params or []}


def _post(upstream: FaultyUpstream, path: str, payload: Any) -> Any:
    response = httpx.post(upstream.url(path), json=payload, timeout=10)
    assert response.status_code == 200
    return response.json()


def _logs(from_block: str, to_block: str, call_id: Any = 1) -> dict[str, Any]:
    return _call("eth_getLogs", [{"fromBlock": from_block, "toBlock": to_block}], call_id)


def _disabled(method: str, call_id: Any) -> dict[str, Any]:
    message = f"the method {method} does not exist/is not available"
    return {"jsonrpc": "2.0", "id": call_id, "error": {"code": -32601, "message": message}}


def test_full_relays_every_call_to_the_real_node(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    path = f"/relay/{anvil_port}/full"
    assert _post(relay_upstream, path, _call("eth_chainId", call_id=7)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": hex(CHAIN_A),
    }
    traced = _post(relay_upstream, path, _call("trace_block", ["0x1"], call_id=8))
    assert traced["id"] == 8
    assert "error" not in traced
    assert isinstance(traced["result"], list)


def test_no_trace_refuses_trace_and_debug_methods_with_geths_disabled_namespace_error(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    path = f"/relay/{anvil_port}/no-trace"
    assert _post(relay_upstream, path, _call("trace_block", ["0x1"], call_id=3)) == _disabled(
        "trace_block", 3
    )
    debug = _call("debug_traceTransaction", ["0x" + "ab" * 32], call_id="d")
    assert _post(relay_upstream, path, debug) == _disabled("debug_traceTransaction", "d")


def test_no_trace_relays_other_methods(relay_upstream: FaultyUpstream, anvil_port: int) -> None:
    answer = _post(relay_upstream, f"/relay/{anvil_port}/no-trace", _call("eth_blockNumber"))
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": hex(HEAD)}


def test_a_batch_is_judged_item_by_item_and_keeps_its_order_and_ids(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    batch = [
        _call("eth_chainId", call_id=1),
        _call("trace_block", ["0x1"], call_id=2),
        _call("eth_blockNumber", call_id="three"),
        _call("debug_traceTransaction", ["0x" + "ab" * 32], call_id=4),
    ]
    answers = _post(relay_upstream, f"/relay/{anvil_port}/no-trace", batch)
    assert [answer["id"] for answer in answers] == [1, 2, "three", 4]
    assert answers[0]["result"] == hex(CHAIN_A)
    assert answers[1] == _disabled("trace_block", 2)
    assert answers[2]["result"] == hex(HEAD)
    assert answers[3] == _disabled("debug_traceTransaction", 4)


def test_a_batch_refused_whole_is_answered_without_the_node(relay_upstream: FaultyUpstream) -> None:
    # Nothing listens on this port: an answer can only come from the relay itself.
    batch = [_call("trace_block", ["0x1"], call_id=1), _call("debug_foo", call_id=2)]
    answers = _post(relay_upstream, f"/relay/{free_port()}/no-trace", batch)
    assert answers == [_disabled("trace_block", 1), _disabled("debug_foo", 2)]


def test_logs_range_refuses_a_range_wider_than_its_limit(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    answer = _post(relay_upstream, f"/relay/{anvil_port}/logs-range/10", _logs("0x1", "0xb", 5))
    assert answer["id"] == 5
    assert answer["error"]["code"] == -32005
    assert answer["error"]["message"] == (
        "block range too large: this node serves eth_getLogs over at most 10 blocks"
    )
    assert answer["error"]["message"].endswith("at most 10 blocks")


def test_logs_range_relays_a_range_at_its_limit(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    answer = _post(relay_upstream, f"/relay/{anvil_port}/logs-range/10", _logs("0x1", "0xa", 5))
    assert answer == {"jsonrpc": "2.0", "id": 5, "result": []}


def test_logs_range_resolves_latest_by_asking_the_node_its_head(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    path = f"/relay/{anvil_port}/logs-range/10"
    # HEAD - 9 .. latest is 10 blocks; HEAD - 10 .. latest is 11; earliest .. latest is HEAD + 1.
    assert _post(relay_upstream, path, _logs(hex(HEAD - 9), "latest"))["result"] == []
    assert _post(relay_upstream, path, _logs(hex(HEAD - 10), "latest"))["error"]["code"] == -32005
    assert _post(relay_upstream, path, _logs("earliest", "latest"))["error"]["code"] == -32005


def test_logs_range_judges_each_batch_item(relay_upstream: FaultyUpstream, anvil_port: int) -> None:
    batch = [_logs("0x0", "0x13", 1), _logs("0x0", "0x9", 2), _call("eth_chainId", call_id=3)]
    answers = _post(relay_upstream, f"/relay/{anvil_port}/logs-range/10", batch)
    assert [answer["id"] for answer in answers] == [1, 2, 3]
    assert answers[0]["error"]["code"] == -32005
    assert answers[1]["result"] == []
    assert answers[2]["result"] == hex(CHAIN_A)


def test_further_segments_are_nodes_of_their_own(
    relay_upstream: FaultyUpstream, anvil_port: int
) -> None:
    first, second = f"/relay/{anvil_port}/no-trace/a", f"/relay/{anvil_port}/no-trace/b"
    _post(relay_upstream, first, _call("eth_chainId"))
    _post(relay_upstream, first, _call("trace_block", ["0x1"]))
    assert _post(relay_upstream, second, _call("trace_block", ["0x1"], 9)) == _disabled(
        "trace_block", 9
    )
    assert relay_upstream.requests[first] == 2
    assert relay_upstream.requests[second] == 1


def test_an_unreachable_node_is_answered_with_502(relay_upstream: FaultyUpstream) -> None:
    response = httpx.post(
        relay_upstream.url(f"/relay/{free_port()}/full"), json=_call("eth_chainId"), timeout=10
    )
    assert response.status_code == 502
    assert response.content
