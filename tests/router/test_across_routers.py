"""Two router processes taking one key's calls in turn, as a balancer spreads them, on one
database and one Redis (docs/deployment.md, "Agreement across routers"): the key's rate limit
holds in total, and the head one router served it is never undercut by the other. And their
stop: a second SIGTERM ends the drain delay."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import AnvilNodes, start_anvil_nodes
from tests.redis_servers import PrivateRedis
from tests.router.conftest import CHAIN_A, api_key, provider, rpc, world_config
from tests.router.test_server import Served, launch_router

LIMIT = 10
DRAIN_S = 60


@dataclass
class Pair:
    routers: list[Served]
    nodes: AnvilNodes
    database_url: str
    keys: dict[str, dict[str, Any]]

    def url(self, router: int, key: str) -> str:
        return f"{self.routers[router].base}/rpc/{CHAIN_A}/{self.keys[key]['secret']}"

    def apply(self, cheap_x2: bool) -> None:
        """x1 at a dear provider; with `cheap_x2`, x2 at a cheap one too."""
        providers = [
            provider("dear", {"eth_blockNumber": "0.000002"}, [(self.nodes.urls["x1"], CHAIN_A)])
        ]
        if cheap_x2:
            providers.append(
                provider(
                    "cheap", {"eth_blockNumber": "0.000001"}, [(self.nodes.urls["x2"], CHAIN_A)]
                )
            )
        engine = create_database_engine(self.database_url)
        apply_config(engine, validate_document(world_config(providers, list(self.keys.values()))))
        engine.dispose()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("across")
    nodes_iter = start_anvil_nodes((("x1", CHAIN_A), ("x2", CHAIN_A)))
    nodes = next(nodes_iter)
    redis = PrivateRedis()
    database_url = f"sqlite:///{tmp / 'shared.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    engine.dispose()
    keys = {
        "limited": api_key("limited", rate_limit=LIMIT, rate_limit_interval_sec=60),
        "reader": api_key("reader"),
    }
    made = Pair([], nodes, database_url, keys)
    made.apply(cheap_x2=False)
    settings = {
        "CHAINROUTER_REDIS_URL": redis.url,
        # The limits are shared only while Redis answers in time; a loaded test machine can
        # take longer than the default 0.1 s, and each router would then limit on its own.
        "CHAINROUTER_REDIS_TIMEOUT_S": "2",
        "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "1",
        "CHAINROUTER_DRAIN_DELAY_S": str(DRAIN_S),  # as behind a balancer
    }
    secret = keys["reader"]["secret"]
    try:
        for name in ("one", "two"):
            made.routers.append(
                launch_router(
                    tmp / name, "native", "127.0.0.1", database_url, secret, secret, settings
                )
            )
        yield made
    finally:
        for router in made.routers:
            _stop_now(router)
        redis.stop()
        nodes_iter.close()


def _stop_now(router: Served) -> None:
    """SIGTERM, and again: no balancer to wait for."""
    if router.process.poll() is None:
        router.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        router.process.send_signal(signal.SIGTERM)
    router.process.wait(20)


def test_a_keys_rate_limit_holds_in_total_across_two_routers(pair: Pair) -> None:
    statuses = [
        httpx.post(pair.url(n % 2, "limited"), json=rpc("eth_blockNumber", [], n)).status_code
        for n in range(3 * LIMIT)
    ]
    assert statuses.count(200) == LIMIT  # not LIMIT on each router
    assert set(statuses) == {200, 429}


def _head(pair: Pair, router: int) -> int:
    answer = httpx.post(pair.url(router, "reader"), json=rpc("eth_blockNumber")).json()
    return int(answer["result"], 16)


def test_the_head_a_key_was_served_on_one_router_is_the_floor_on_the_other(pair: Pair) -> None:
    x1 = pair.nodes.urls["x1"]
    httpx.post(x1, json=rpc("anvil_mine", ["0x1"]))  # x1 one block ahead of x2: both in sync
    served = _head(pair, 0)  # router one has x1 only so far
    assert served >= 1
    version = httpx.get(f"{pair.routers[1].base}/health").json()["configuration_version"]
    pair.apply(cheap_x2=True)  # now router two's first choice is x2, a block behind
    deadline = time.monotonic() + 10
    while httpx.get(f"{pair.routers[1].base}/health").json()["configuration_version"] == version:
        assert time.monotonic() < deadline, "router two did not load the new configuration"
        time.sleep(0.1)
    time.sleep(2.5)  # router two's health checks have seen x2 answer, and x1's head
    assert _head(pair, 1) >= served
    scraped = httpx.get(f"{pair.routers[1].base}/metrics").text
    adopted = re.search(r"(?m)^chainrouter_seen_heads_adopted_total (\S+)$", scraped)
    assert adopted is not None
    assert float(adopted[1]) >= 1


def test_a_second_sigterm_ends_the_drain_delay(pair: Pair) -> None:
    router = pair.routers[1]
    started = time.monotonic()
    router.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert httpx.get(f"{router.base}/health").status_code == 503  # draining
    router.process.send_signal(signal.SIGTERM)
    assert router.process.wait(20) == 0
    assert time.monotonic() - started < 20  # not the drain delay's 60 s
