"""Answers from the cache given again by the native server (docs/cache.md, "Answers given again
by the native server"): a hit of the response cache is a decision the pipeline hands the server,
which answers the same call again itself, under the caller's id, billed by the one ledger as the
cache call it is (free or at the cache price); anything that could change the pipeline's answer
(the key's domains, a purge of the chain) ends it. A served native router in front of a real
anvil node; which hits are handed over is told in test_decisions.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from chainrouter.management.admin import purge_chain_cache
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

BLOCK = "eth_getBlockByNumber"
FIRST_BLOCKS = range(1, 6)  # final: anvil's finalized block is 64 behind its head of 100
QUICK = {
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
    # Long enough that only an epoch moving ends an answer within a test.
    "CHAINROUTER_CACHE_REPLAY_MAX_AGE_S": "60",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',  # answers are told apart by their count
}
_ANSWERED = "chainrouter_cache_replayed_total{"


def _block(number: int, call_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": BLOCK, "params": [hex(number), False]}


class _Setup:
    def __init__(
        self, tmp: Path, node_url: str, node_path: str, key: dict[str, Any], **settings: str
    ) -> None:
        self.node_path = node_path  # the upstream's, which counts the requests it relays
        self.database_url = f"sqlite:///{tmp / 'answers.db'}"
        self.key = key
        self.node_url = node_url
        self.engine = create_database_engine(self.database_url)
        migrate.upgrade(self.engine)
        self.apply()
        self.router: Served = launch_router(
            tmp / "router",
            "native",
            "127.0.0.1",
            self.database_url,
            key["secret"],
            key["secret"],
            {**QUICK, **settings},
        )

    def apply(self) -> None:
        prices = {BLOCK: "0.000001", "eth_chainId": "0.000001"}
        config = world_config([provider("p", prices, [(self.node_url, CHAIN_A)])], [self.key])
        apply_config(self.engine, validate_document(config))

    def post(self, body: Any, **headers: str) -> httpx.Response:
        return httpx.post(self.router.url(), json=body, headers=headers, timeout=30)

    def answered(self) -> int:
        """Calls the server has answered itself from the cache so far, once the ledger has
        booked the last (free answers are booked just after they leave)."""
        time.sleep(0.1)
        metrics = httpx.get(self.router.base + "/metrics", timeout=30).text
        lines = [line for line in metrics.splitlines() if line.startswith(_ANSWERED)]
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in lines)

    def answered_by_server(self, body: Any, **headers: str) -> tuple[httpx.Response, int]:
        """The answer to `body`, and how many of its calls the server answered itself."""
        before = self.answered()
        reply = self.post(body, **headers)
        return reply, self.answered() - before

    def stop(self) -> None:
        self.router.process.terminate()
        self.router.process.wait(30)

    def metered(self) -> dict[str, tuple[int, int]]:
        """Calls and nano-credits in storage by scenario (after `stop`: its flush wrote them)."""
        usage = t.usage_aggregates
        query = select(
            usage.c.scenario, func.sum(usage.c.request_count), func.sum(usage.c.credits_nano)
        ).group_by(usage.c.scenario)
        with self.engine.connect() as connection:
            return {s: (int(n), int(c)) for s, n, c in connection.execute(query)}


@pytest.fixture
def setup_of(
    final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> Iterator[Any]:
    made: list[_Setup] = []

    def make(name: str, key: dict[str, Any], **settings: str) -> _Setup:
        port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
        path = f"/relay/{port}/full/{name}"
        setup = _Setup(tmp_path, upstream_server.url(path), path, key, **settings)
        made.append(setup)
        return setup

    yield make
    for setup in made:
        if setup.router.process.poll() is None:
            setup.stop()
        setup.engine.dispose()


def test_a_repeated_free_hit_is_answered_by_the_server_and_metered_as_a_cache_call(
    setup_of: Any, final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream
) -> None:
    setup = setup_of("answered", api_key("main"))
    asked = upstream_server.requests[setup.node_path]
    first = setup.post(_block(3, 1))
    second, by_server = setup.answered_by_server(_block(3, 2))
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("MISS", "HIT")
    assert by_server == 0  # the pipeline's hit: it hands the answer over
    ids: list[Any] = [3, "three", None, -17, 123456789012345678, "a b:c"]
    before = setup.answered()
    replies = [setup.post(_block(3, call_id)) for call_id in ids]
    assert setup.answered() == before + len(ids)
    for call_id, reply in zip(ids, replies, strict=True):
        assert reply.status_code == 200
        assert reply.headers["x-cache"] == "HIT"
        node = httpx.post(final_blocks_node.urls["node"], json=_block(3, call_id))
        assert reply.content == node.content
    assert len({reply.headers["x-batch-id"] for reply in replies}) == len(ids)
    assert upstream_server.requests[setup.node_path] == asked + 1  # the node, once
    # An id the server does not echo itself (a string past 64 characters) goes to the pipeline.
    assert setup.answered_by_server(_block(3, "x" * 65))[1] == 0
    setup.stop()
    assert setup.metered() == {"first_choice": (1, 1000), "cache": (1 + len(ids) + 1, 0)}


def test_a_batch_of_hits_is_answered_with_each_callers_id_in_its_place(
    setup_of: Any, final_blocks_node: AnvilNodes
) -> None:
    setup = setup_of("batch", api_key("main"))
    batch = [_block(n, n) for n in FIRST_BLOCKS]
    setup.post(batch)
    assert setup.post(batch).headers["x-cache"] == "HIT"
    again = [_block(n, f"id-{n}") for n in FIRST_BLOCKS]
    reply, by_server = setup.answered_by_server(again)
    assert by_server == len(again)
    assert reply.json() == httpx.post(final_blocks_node.urls["node"], json=again).json()
    setup.stop()
    assert setup.metered() == {"first_choice": (5, 5000), "cache": (10, 0)}


def test_answers_end_when_the_keys_domains_change(setup_of: Any) -> None:
    key = api_key("main", allowed_domains=["app.example.com"])
    setup = setup_of("domains", key)
    page = {"Origin": "https://app.example.com"}
    setup.post(_block(4, 1), **page)
    setup.post(_block(4, 2), **page)
    assert setup.answered_by_server(_block(4, 3), **page)[1] == 1
    key["allowed_domains"] = ["other.example.com"]
    setup.apply()
    deadline = time.monotonic() + 10
    while (reply := setup.post(_block(4, 4), **page)).status_code == 200:
        assert time.monotonic() < deadline, "the new domains were never applied"
        time.sleep(0.05)
    assert reply.status_code == 403
    refused, by_server = setup.answered_by_server(_block(4, 5), **page)
    assert (refused.status_code, by_server) == (403, 0)  # and it stays refused


def test_a_purge_of_the_chain_ends_its_answers(setup_of: Any) -> None:
    setup = setup_of("purged", api_key("main"))
    setup.post(_block(2, 1))
    setup.post(_block(2, 2))
    assert setup.answered_by_server(_block(2, 3))[1] == 1
    purge_chain_cache(setup.engine, CHAIN_A)
    deadline = time.monotonic() + 10
    while (reply := setup.post(_block(2, 4))).headers["x-cache"] == "HIT":
        assert time.monotonic() < deadline, "the purge was never applied"
        time.sleep(0.05)
    assert reply.headers["x-cache"] == "MISS"  # asked of the node again


def test_a_key_with_a_rate_limit_of_its_own_always_goes_through_the_pipeline(
    setup_of: Any,
) -> None:
    limited = setup_of("limited", api_key("main", rate_limit=4, rate_limit_interval_sec=60))
    replies = [limited.post(_block(5, n)) for n in range(6)]
    assert [r.status_code for r in replies] == [200, 200, 200, 200, 429, 429]
    assert limited.answered() == 0
    limited.stop()


def test_a_hit_with_a_cache_price_is_answered_by_the_server_and_billed_every_time(
    setup_of: Any,
) -> None:
    priced = setup_of(
        "priced",
        api_key("main"),
        CHAINROUTER_CACHE_PRICES=json.dumps({f"*:{BLOCK}": "0.000000007"}),
    )
    balance = priced.router.balance()
    replies = [priced.post(_block(5, n)) for n in range(5)]
    assert [r.headers["x-cache"] for r in replies] == ["MISS"] + ["HIT"] * 4
    assert priced.answered() == 3  # the first hit is the pipeline's, handed over
    priced.stop()
    assert priced.metered() == {"first_choice": (1, 1000), "cache": (4, 4 * 7)}
    assert balance - priced.router.balance() == 1000 + 4 * 7
