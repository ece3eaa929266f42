"""Misbehaving nodes, served (issue 51; docs/integrity.md, "Heads"): three providers over one
real anvil chain, the cheapest one's node 8 blocks behind the others (the fault-injecting
upstream's `lag` mode: its own `eth_blockNumber` says so, and it answers `null` and `[]` for
what it does not have). On both executors, what a client gets is the chain's, never the lagging
node's: the head it is told is the chain's, the last blocks' logs are there, the receipt of a
transaction of the head block is there, and the head block by number is there. The lagging node
still serves what it has: an old block."""

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
from tests.anvil import CHAIN_A, DEPLOY_LOGGING, LOG_TOPIC, node_result, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

LAG = 8
METHODS = (
    "eth_blockNumber",
    "eth_getLogs",
    "eth_getTransactionReceipt",
    "eth_getBlockByNumber",
    "eth_chainId",
)
SETTINGS = {
    "CHAINROUTER_CACHE_MAX_BYTES": "0",  # every answer is a node's, never a kept one
    "CHAINROUTER_HEDGE_MAX": "0",
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",  # the chain stands still: one check each
    "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',
}


class _Chain:
    def __init__(self, url: str, head: int, tx: str) -> None:
        self.url, self.head, self.tx = url, head, tx
        self.port = url.rsplit(":", 1)[1]


@pytest.fixture(scope="module")
def chain() -> Iterator[_Chain]:
    """An anvil of its own: 24 blocks, the last one holding a transaction that logged."""
    nodes = start_anvil_nodes((("lagged", CHAIN_A),))
    url = next(nodes).urls["lagged"]
    node_result(url, "anvil_mine", ["0x17"])
    sender = node_result(url, "eth_accounts", [])[0]
    tx = node_result(url, "eth_sendTransaction", [{"from": sender, "data": DEPLOY_LOGGING}])
    head = int(node_result(url, "eth_blockNumber", []), 16)
    assert node_result(url, "eth_getTransactionReceipt", [tx])["blockNumber"] == hex(head)
    yield _Chain(url, head, tx)
    nodes.close()


class _Router:
    def __init__(self, chain: _Chain, upstream: FaultyUpstream, tmp: Path, executor: str) -> None:
        self.upstream = upstream
        self.paths = {
            "lagging": f"/relay/{chain.port}/lag/{LAG}/{tmp.name}-lagging",
            "second": f"/relay/{chain.port}/full/{tmp.name}-second",
            "third": f"/relay/{chain.port}/full/{tmp.name}-third",
        }
        prices = {"lagging": "0.0000001", "second": "0.000001", "third": "0.000002"}
        key = api_key("main")
        engine = create_database_engine(f"sqlite:///{tmp / 'misbehaving.db'}")
        migrate.upgrade(engine)
        providers = [
            provider(name, dict.fromkeys(METHODS, prices[name]), [(upstream.url(path), CHAIN_A)])
            for name, path in self.paths.items()
        ]
        apply_config(engine, validate_document(world_config(providers, [key])))
        url = engine.url.render_as_string()
        engine.dispose()
        secret = key["secret"]
        self.served: Served = launch_router(
            tmp / "router", executor, "127.0.0.1", url, secret, secret, SETTINGS
        )
        deadline = time.monotonic() + 20
        while self._metric("chainrouter_node_up{") < 3:  # every node answered its checks
            assert time.monotonic() < deadline, "the nodes never came up"
            time.sleep(0.05)

    def _metric(self, prefix: str) -> float:
        text = httpx.get(self.served.base + "/metrics", timeout=30).text
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    def result(self, method: str, params: list[Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = httpx.post(self.served.url(), json=body, timeout=30).json()
        assert "result" in answer, answer
        return answer["result"]

    def stop(self) -> None:
        self.served.process.terminate()
        self.served.process.wait(30)


@pytest.fixture(params=["native", "python"])
def router(
    request: pytest.FixtureRequest, chain: _Chain, upstream: FaultyUpstream, tmp_path: Path
) -> Iterator[_Router]:
    served = _Router(chain, upstream, tmp_path, str(request.param))
    yield served
    served.stop()


def test_a_node_eight_blocks_behind_never_answers_for_blocks_it_lacks(
    router: _Router, chain: _Chain
) -> None:
    lagging = router.paths["lagging"]
    assert node_result(router.upstream.url(lagging), "eth_blockNumber", []) == hex(chain.head - LAG)
    heads = [router.result("eth_blockNumber", []) for _ in range(5)]
    assert heads == [hex(chain.head)] * 5
    logs = router.result("eth_getLogs", [{"fromBlock": hex(chain.head - 2), "toBlock": "latest"}])
    assert [log["topics"] for log in logs] == [[LOG_TOPIC]]
    pinned = [{"fromBlock": hex(chain.head - 2), "toBlock": hex(chain.head)}]
    assert router.result("eth_getLogs", pinned) == logs
    receipt = router.result("eth_getTransactionReceipt", [chain.tx])
    assert receipt is not None
    assert receipt["blockNumber"] == hex(chain.head)
    block = router.result("eth_getBlockByNumber", [hex(chain.head), False])
    assert block is not None
    assert block["number"] == hex(chain.head)
    assert router.result("eth_getBlockByNumber", ["latest", False])["number"] == hex(chain.head)
    # It is not shut out: an old block, which it has, is its to serve (it is the cheapest).
    asked = router.upstream.requests[lagging]
    old = router.result("eth_getBlockByNumber", [hex(chain.head - LAG - 2), False])
    assert old == node_result(chain.url, "eth_getBlockByNumber", [hex(chain.head - LAG - 2), False])
    assert router.upstream.requests[lagging] == asked + 1
