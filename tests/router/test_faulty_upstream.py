"""The fault-injecting upstream's behaviours that the fault table (bench/faults.py) is made of:
a node that never answers, a JSON body cut short, a node of another chain, and a fault on a
share of the calls only."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from chainrouter.testing.faulty_upstream import CHAIN_ID, OK_RESULT, FaultyUpstream

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
