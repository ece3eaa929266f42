"""Verified answers, served (docs/integrity.md, "Verified answers"): two providers over one real
anvil chain, the cheaper one's node lying about balances and receipts (the fault-injecting
upstream's `lie` mode: well-formed, altered answers). On both executors, with the chain's
`verify` at `always`, the client gets the chain's answer with `X-Verified: proof`, and the
false answers are counted; with `verify` off, the lie is what the client gets (what the proof
is for)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, node_result, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

RECIPIENT = "0x00000000000000000000000000000000000000aa"
METHODS = ("eth_getBalance", "eth_getTransactionReceipt", "eth_blockNumber", "eth_chainId")
SETTINGS = {
    "CHAINROUTER_HEDGE_MAX": "0",
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',
}


class _Chain:
    def __init__(self, url: str, transfer: str) -> None:
        self.url, self.transfer = url, transfer
        self.port = url.rsplit(":", 1)[1]


@pytest.fixture(scope="module")
def chain() -> Iterator[_Chain]:
    """An anvil of its own: a transfer in block 1, then a few blocks."""
    nodes = start_anvil_nodes((("proven", CHAIN_A),))
    url = next(nodes).urls["proven"]
    sender = node_result(url, "eth_accounts", [])[0]
    transfer = node_result(
        url, "eth_sendTransaction", [{"from": sender, "to": RECIPIENT, "value": "0x2a"}]
    )
    node_result(url, "anvil_mine", ["0x4"])
    yield _Chain(url, transfer)
    nodes.close()


class _Router:
    def __init__(
        self, chain: _Chain, upstream: FaultyUpstream, tmp: Path, executor: str, verify: str
    ) -> None:
        self.paths = {
            "lying": f"/relay/{chain.port}/lie/eth_getBalance,eth_getTransactionReceipt/"
            f"{tmp.name}-lying",
            "honest": f"/relay/{chain.port}/full/{tmp.name}-honest",
        }
        prices = {"lying": "0.0000001", "honest": "0.000001"}
        key = api_key("main")
        engine = create_database_engine(f"sqlite:///{tmp / 'verified.db'}")
        migrate.upgrade(engine)
        providers = [
            provider(name, dict.fromkeys(METHODS, prices[name]), [(upstream.url(path), CHAIN_A)])
            for name, path in self.paths.items()
        ]
        apply_config(engine, validate_document(world_config(providers, [key])))
        url = engine.url.render_as_string()
        engine.dispose()
        secret = key["secret"]
        settings = {**SETTINGS, "CHAINROUTER_VERIFY": verify}
        self.served: Served = launch_router(
            tmp / "router", executor, "127.0.0.1", url, secret, secret, settings
        )
        deadline = time.monotonic() + 20
        while self.metric("chainrouter_node_up{") < 2:
            assert time.monotonic() < deadline, "the nodes never came up"
            time.sleep(0.05)

    def metric(self, prefix: str) -> float:
        text = httpx.get(self.served.base + "/metrics", timeout=30).text
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    def ask(self, method: str, params: list[Any]) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(self.served.url(), json=body, timeout=30)

    def stop(self) -> None:
        self.served.process.terminate()
        self.served.process.wait(30)


@pytest.fixture
def served(
    chain: _Chain, upstream: FaultyUpstream, tmp_path: Path, on_native: bool
) -> Iterator[tuple[_Router, _Router]]:
    """The same world twice: `verify` always, and off."""
    executor = "native" if on_native else "python"
    routers = []
    try:
        for verify in ("always", "off"):
            (tmp_path / verify).mkdir()
            routers.append(_Router(chain, upstream, tmp_path / verify, executor, verify))
        yield routers[0], routers[1]
    finally:
        for router in routers:
            router.stop()


def test_a_lying_nodes_answers_are_proven_false_and_never_served(
    served: tuple[_Router, _Router], chain: _Chain
) -> None:
    proving, believing = served
    balance = proving.ask("eth_getBalance", [RECIPIENT, "0x2"])
    assert balance.json()["result"] == "0x2a"
    assert balance.headers["x-verified"] == "proof"
    receipt = proving.ask("eth_getTransactionReceipt", [chain.transfer])
    truth = node_result(chain.url, "eth_getTransactionReceipt", [chain.transfer])
    assert receipt.json()["result"] == truth
    assert receipt.headers["x-verified"] == "proof"
    false = [
        line
        for line in httpx.get(proving.served.base + "/metrics", timeout=30).text.splitlines()
        if line.startswith("chainrouter_answers_checked_total{") and 'outcome="false"' in line
    ]
    # The first lie was counted, and cooled its node down: the receipt was the honest node's.
    assert sum(float(line.rsplit(" ", 1)[1]) for line in false) == 1
    # Without proofs the cheaper node's word is what the client gets.
    lie = believing.ask("eth_getBalance", [RECIPIENT, "0x2"])
    assert lie.json()["result"] != "0x2a"
    assert "x-verified" not in lie.headers


def test_an_answer_from_the_cache_says_it_was_proven_on_either_executor(
    served: tuple[_Router, _Router], chain: _Chain, on_native: bool
) -> None:
    """A proven answer the cache kept says `X-Verified: proof` each time it is served again,
    whether the pipeline answers the hit or the native server does under its decision."""
    proving, believing = served
    block = node_result(chain.url, "eth_getBlockByNumber", ["0x2", False])["hash"]
    params = [RECIPIENT, {"blockHash": block}]  # pinned to a hash: kept, whatever finality
    first = proving.ask("eth_getBalance", params)
    assert first.json()["result"] == "0x2a"
    assert (first.headers["x-verified"], first.headers["x-cache"]) == ("proof", "MISS")
    replayed = "chainrouter_cache_replayed_total{"
    before = proving.metric(replayed)
    for _ in range(4):
        hit = proving.ask("eth_getBalance", params)
        assert hit.json()["result"] == "0x2a"
        assert (hit.headers.get("x-verified"), hit.headers["x-cache"]) == ("proof", "HIT")
    time.sleep(0.1)  # the server's answers are booked just after they leave
    assert (proving.metric(replayed) > before) == on_native
    # Kept under `off`, a node's word: its hits say nothing of a check (the lie, kept as is).
    for _ in range(2):
        lie = believing.ask("eth_getBalance", params)
        assert lie.json()["result"] != "0x2a"
        assert "x-verified" not in lie.headers
