"""Bounds on answers, served (design notes, "Bounds"; the rules in test_answer_bounds.py): a
request's answers past `max_answer_bytes` are withheld one by one on both executors, including
a request whose every call the native server could serve under decisions (the bound travels in
the decision, and past it the server hands the request to the pipeline); the free tier stops
one address at its answer bytes. The router runs in front of a real anvil node through the
fault-injecting upstream (test_decisions_served.py)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes
from tests.router.test_decisions_served import BALANCE, CHEAP, _Router, balance_of

PRICE_NANO = int(CHEAP[BALANCE] * 10**9)
BOUND = 400  # bytes of one request's answers
FREE_BYTES = 300  # bytes of free-tier answers per address and minute


@pytest.fixture(params=["native", "python"])
def router(
    request: pytest.FixtureRequest,
    final_blocks_node: AnvilNodes,
    upstream: FaultyUpstream,
    tmp_path: Path,
) -> Iterator[_Router]:
    settings = {
        "CHAINROUTER_MAX_ANSWER_BYTES": str(BOUND),
        "CHAINROUTER_FREE_TIER_IP_ANSWER_BYTES": str(FREE_BYTES),
    }
    node = final_blocks_node.urls["node"]
    made = _Router(tmp_path, node, upstream, "10", str(request.param), settings)
    made.start()
    yield made
    if made.served.process.poll() is None:
        made.stop()
    made.engine.dispose()


def _size(item: dict[str, Any]) -> int:
    """An answer's bytes as the node wrote it (compact JSON)."""
    return len(json.dumps(item, separators=(",", ":")))


def _balances(count: int) -> list[dict[str, Any]]:
    return [{**balance_of("0x" + secrets.token_hex(20)), "id": i} for i in range(count)]


def test_a_batch_past_the_bound_is_answered_in_part_even_where_decisions_stand(
    router: _Router,
) -> None:
    balance = router.served.balance()
    for _ in range(3):  # the native server now holds a decision for balances at the head
        assert router.post(balance_of("0x" + secrets.token_hex(20))).status_code == 200
    small = router.post(_balances(4))  # within the bound: served under decisions
    assert all("result" in item for item in small.json())
    decided = router.decided()
    assert router.decided_between(4, 6)
    reply = router.post(_balances(12))
    assert reply.status_code == 200
    items = reply.json()
    answered = [item for item in items if "result" in item]
    withheld = [item for item in items if "error" in item]
    assert answered
    assert withheld
    assert sum(_size(item) for item in answered) <= BOUND
    for item in withheld:
        assert item["error"]["code"] == -32014
        assert item["error"]["data"] == {"max_answer_bytes": BOUND}
    assert router.decided() == decided  # none of the big batch served under decisions
    router.stop()
    billed = 3 + 4 + len(answered)
    assert balance - router.served.balance() == billed * PRICE_NANO
    assert router.usage() == {
        "first_choice": (billed, billed * PRICE_NANO),
        "refused": (len(withheld), 0),
    }


def test_the_free_tier_stops_an_address_at_its_answer_bytes(router: _Router) -> None:
    url = f"{router.served.base}/rpc/evm/{CHAIN_A}"
    reply = httpx.post(url, json=_balances(15), timeout=30)
    assert reply.status_code == 200
    items = reply.json()
    answered = [item for item in items if "result" in item]
    refused = [item for item in items if "error" in item]
    assert 0 < len(answered) < 15
    assert sum(_size(item) for item in answered) <= FREE_BYTES
    assert {item["error"]["code"] for item in refused} == {-32029}
    assert refused[0]["error"]["data"] == {"ip_answer_bytes": FREE_BYTES}
    again = httpx.post(url, json=_balances(1)[0], timeout=30)
    assert again.status_code == 429
    assert int(again.headers["retry-after"]) >= 1
