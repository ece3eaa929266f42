"""Router fixtures: real anvil nodes, the fault-injecting upstream, and a router built on a real
database from an operator file, exactly as `chainrouter serve` builds it.

A test describes its world (providers with prices and nodes, keys, credits) with the helpers
below, gets a `World`, and calls the router's pipeline directly or through a served router.
Every world is made twice, once on each executor: the Python one (asyncio and aiohttp, as
`CHAINROUTER_RPC_SERVER=python` runs it) and the native one (the Rust driver and client, as
`CHAINROUTER_RPC_SERVER=native` runs it), so that every rule is checked on both.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.domain.routing import NodeInfo
from chainrouter.net.outbound import DialRule, dial_rule
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.ratelimit.window import Limiter, MemoryLimiter
from chainrouter.router.executors import Executor
from chainrouter.router.executors.native import NativeExecutor, load_native_module, new_driver
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.pipeline import Reply
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.router.service import RpcService
from chainrouter.settings import Settings
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import CHAIN_A, CHAIN_B, AnvilNodes, free_port, node_result, start_anvil_nodes

__all__ = ["CHAIN_A", "CHAIN_B", "AnvilNodes", "free_port"]

CUSTOMER_EMAIL = "dev@router.test"


# -- describing a world ---------------------------------------------------------------------


def provider(
    slug: str,
    prices: dict[str, str],
    nodes: list[tuple[str, int]] | list[tuple[str, int, dict[str, Any]]],
    **plan: Any,
) -> dict[str, Any]:
    """A provider with one plan pricing `prices` (method -> credits) on the given nodes."""
    return {
        "slug": slug,
        "name": slug.title(),
        "plans": [
            {
                "name": f"{slug}-plan",
                "methods": [
                    {"method": method, "cost": Decimal(cost)} for method, cost in prices.items()
                ],
                "nodes": [
                    {"url": node[0], "chain_id": node[1], **(node[2] if len(node) > 2 else {})}
                    for node in nodes
                ],
                **plan,
            }
        ],
    }


def api_key(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "secret": generate_secret(SecretKind.API_KEY),
        "allowed_domains": ["*"],
        "routing_strategy": "economy",
        **fields,
    }


def world_config(
    providers: list[dict[str, Any]],
    keys: list[dict[str, Any]] | None = None,
    *,
    credits: str | None = "10",
) -> dict[str, Any]:
    customer: dict[str, Any] = {
        "email": CUSTOMER_EMAIL,
        "name": "Router Test",
        "api_keys": keys if keys is not None else [api_key("main")],
    }
    if credits is not None:
        customer["credits"] = [{"reference": "test-grant", "amount": Decimal(credits)}]
    return {
        "version": 1,
        "chains": [
            {
                "chain_id": chain_id,
                "name": f"Test chain {chain_id}",
                "short_name": f"t{chain_id}",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
            for chain_id in (CHAIN_A, CHAIN_B)
        ],
        "providers": providers,
        "customers": [customer],
    }


# -- a running world ------------------------------------------------------------------------


def make_executor(
    native: bool,
    *,
    limiter: Limiter | None = None,
    max_response_bytes: int = 1 << 20,
    ca_file: str | None = None,
    idle_s: float = 30.0,
    rule: DialRule | None = None,
) -> Executor:
    """An executor of either kind, called from a running event loop (which, on the native one,
    serves the Redis limiter's awaits); its client closes connections idle for `idle_s`. The
    nodes of tests are on loopback: by default the dial rule lets them be dialled."""
    rule = rule or DialRule(allow_private=True)
    limiter = limiter or MemoryLimiter()
    ca_path = Path(ca_file) if ca_file else None
    if native:
        driver = new_driver(
            load_native_module(),
            limiter,
            asyncio.get_running_loop(),
            max_response_bytes=max_response_bytes,
            connect_timeout_s=2.0,
            idle_s=idle_s,
            ca_file=ca_path,
            rule=rule,
        )
        return NativeExecutor(driver)
    return PythonExecutor(
        limiter,
        max_response_bytes=max_response_bytes,
        connect_timeout_s=2.0,
        idle_timeout_s=idle_s,
        ca_file=ca_path,
        rule=rule,
    )


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        call["params"] = params
    return call


@dataclass
class World:
    engine: Engine
    runtime: RouterRuntime
    secrets: dict[str, str]  # key name -> secret
    customer_id: int
    executor: Executor

    @property
    def service(self) -> RpcService:
        return self.runtime.service

    async def check_health(self, node: NodeInfo) -> None:
        """One health check of `node`, on this world's executor."""
        await self.executor.run(self.runtime.health.check(node))

    async def _run(self, pipeline: Coroutine[Any, Any, Reply]) -> Reply:
        return await self.executor.run(pipeline)

    async def call(
        self,
        payload: Any,
        *,
        chain: int | str = CHAIN_A,
        key: str = "main",
        origin: str | None = None,
        referer: str | None = None,
    ) -> Reply:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        secret = self.secrets.get(key, key)
        return await self._run(
            self.runtime.service.handle_keyed(
                str(chain), secret, body, origin=origin, referer=referer
            )
        )

    async def public(
        self, payload: Any, *, ip: str = "198.51.100.7", chain: int = CHAIN_A
    ) -> Reply:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return await self._run(self.runtime.service.handle_public(str(chain), ip, body))

    def stored_balance(self, customer_id: int | None = None) -> int:
        """A customer's balance in storage (nano-credits); by default the world's customer's."""
        wanted = self.customer_id if customer_id is None else customer_id
        with self.engine.connect() as connection:
            balance: int = connection.execute(
                select(t.customers.c.balance_nano).where(t.customers.c.id == wanted)
            ).scalar_one()
            return balance

    def stored_usage_by_scenario(self) -> dict[str, tuple[int, int]]:
        """Calls and nano-credits per scenario, as flushed to storage so far."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(
                    t.usage_aggregates.c.scenario,
                    func.sum(t.usage_aggregates.c.request_count),
                    func.sum(t.usage_aggregates.c.credits_nano),
                ).group_by(t.usage_aggregates.c.scenario)
            ).all()
        return {scenario: (int(count), int(credits)) for scenario, count, credits in rows}


WorldFactory = Callable[..., Awaitable[World]]


async def _make_world(
    database_url: str, native: bool, config: dict[str, Any], **settings: Any
) -> World:
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    apply_config(engine, validate_document(config))
    settings.setdefault("outbound_allow_private", True)  # the nodes of tests are on loopback
    # Each world journals its usage apart (a journal is replayed only into its own database).
    settings.setdefault("usage_journal_dir", tempfile.mkdtemp(prefix="usage-journal-"))
    # No hedging unless a test asks for it: whether a hedge starts depends on how fast a loopback
    # answer comes back on a loaded machine (a 250 ms floor was still passed in CI), and a hedge
    # changes the per-node request counts the routing and failover tests check. The hedging
    # tests, and the billing test that races concurrent calls, turn it on.
    settings.setdefault("hedge_max", 0)
    # No response cache and no coalescing unless a test asks for them (tests/router/test_cache*):
    # the routing, failover and billing tests count what each call does at the nodes.
    settings.setdefault("cache_max_bytes", 0)
    settings.setdefault("verify", "off")  # proofs only where a test asks: they ask nodes more
    settings.setdefault("coalesce", False)
    # No audits unless a test asks (tests/router/test_audits_served.py).
    settings.setdefault("audit_rate", 0)
    router_settings = Settings(database_url=database_url, **settings)
    runtime = build_runtime(router_settings, engine)
    executor = make_executor(
        native,
        limiter=runtime.limiter,
        max_response_bytes=router_settings.max_response_bytes,
        rule=dial_rule(
            allow_private=router_settings.outbound_allow_private,
            trusted_networks=router_settings.outbound_trusted_networks,
        ),
    )
    with engine.connect() as connection:
        customer_id = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == CUSTOMER_EMAIL)
        ).scalar_one()
    keys = config["customers"][0]["api_keys"]
    return World(engine, runtime, {k["name"]: k["secret"] for k in keys}, customer_id, executor)


async def _factory(database_url: str, native: bool) -> AsyncIterator[WorldFactory]:
    worlds: list[World] = []

    async def make(config: dict[str, Any], **settings: Any) -> World:
        world = await _make_world(database_url, native, config, **settings)
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        await world.runtime.stop()
        await world.executor.close()
        world.engine.dispose()  # the test may have used it after the router stopped


@pytest.fixture(scope="module")
def final_blocks_node() -> Iterator[AnvilNodes]:
    """One anvil node of chain A (`urls["node"]`) with 100 blocks mined: anvil's `finalized` is
    64 behind its head, so blocks up to 36 are final (the response cache's tests)."""
    started = start_anvil_nodes((("node", CHAIN_A),))
    nodes = next(started)
    node_result(nodes.urls["node"], "anvil_mine", ["0x64"])
    yield nodes
    started.close()


@pytest.fixture(params=["python", "native"])
def on_native(request: pytest.FixtureRequest) -> bool:
    """Whether the pipeline runs on the native executor (else on the Python one)."""
    return bool(request.param == "native")


@pytest.fixture
async def make_world(sqlite_database_url: str, on_native: bool) -> AsyncIterator[WorldFactory]:
    """A router on SQLite: for rules that do not depend on the storage backend."""
    async for factory in _factory(sqlite_database_url, on_native):
        yield factory


@pytest.fixture
async def make_world_on_each_backend(
    database_url: str, on_native: bool
) -> AsyncIterator[WorldFactory]:
    """A router on SQLite, then on PostgreSQL: for billing and anything stored."""
    async for factory in _factory(database_url, on_native):
        yield factory
