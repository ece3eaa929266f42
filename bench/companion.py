"""The companion MCP server: what a tool call costs on top of the router call it makes.

One go, on one machine: an anvil node, `chainrouter serve --role rpc` and `--role api` on a SQLite
file, and `chainrouter mcp` driven over stdio by the official MCP client. Measured:
- the baseline: `eth_chainId` posted straight to the router (httpx, one connection reused);
- the same through the companion's `rpc_call` tool, and `rpc_get_fee_data` (a three-call batch);
- start-up, from spawning the companion to its tool list, without and with a provider-linked
  management token (which adds one management API request);
- the companion's resident memory after the calls.
The overhead is the tool call's p50 minus the baseline's p50; the ratio is theirs.
Results: bench/results/companion.{json,md}.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.cpu import rss_mb
from bench.router import _children
from bench.upstreams import anvil, free_port, wait_until_ready
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CHAIN = 31337
CALLS = int(os.environ.get("BENCH_COMPANION_CALLS", "300"))
STARTS = 5
TARGET_OVERHEAD_MS = 10.0
METHODS = ("eth_chainId", "eth_gasPrice", "eth_maxPriorityFeePerGas", "eth_feeHistory")


def _world(node: str, secrets: dict[str, str]) -> dict[str, Any]:
    return {
        "version": 1,
        "chains": [
            {
                "chain_id": CHAIN,
                "name": "Bench",
                "short_name": "bench",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": [
            {
                "slug": "bench",
                "name": "Bench",
                "plans": [
                    {
                        "name": "p",
                        "methods": [{"method": m, "cost": "0.0000001"} for m in METHODS],
                        "nodes": [{"url": node, "chain_id": CHAIN}],
                    }
                ],
            }
        ],
        "customers": [
            {
                "email": "bench@example.com",
                "name": "Bench",
                "provider": "bench",
                "credits": [{"reference": "bench", "amount": "1000"}],
                "api_keys": [
                    {
                        "name": "k",
                        "secret": secrets["key"],
                        "allowed_domains": ["*"],
                        "routing_strategy": "economy",
                    }
                ],
                "management_tokens": [{"label": "t", "secret": secrets["token"]}],
            }
        ],
    }


@contextmanager
def _service(work: Path, secrets: dict[str, str]) -> Iterator[tuple[str, str]]:
    rpc_port, api_port = free_port(), free_port()
    with anvil(CHAIN) as (node, _):
        database_url = f"sqlite:///{work / 'bench.db'}"
        engine = create_database_engine(database_url)
        migrate.upgrade(engine)
        apply_config(engine, validate_document(_world(node, secrets)))
        engine.dispose()
        env = {
            **os.environ,
            "CHAINROUTER_DATABASE_URL": database_url,
            "CHAINROUTER_RPC_PORT": str(rpc_port),
            "CHAINROUTER_API_PORT": str(api_port),
            "CHAINROUTER_LOG_LEVEL": "warning",
            "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its node is a local anvil
        }
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "chainrouter.cli", "serve", "--role", role], env=env
            )
            for role in ("rpc", "api")
        ]
        try:
            router, api = f"http://127.0.0.1:{rpc_port}", f"http://127.0.0.1:{api_port}"
            for url in (router, api):
                wait_until_ready(url)
            yield router, api
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(30)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def _timed(action: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    for _ in range(20):  # warm-up: connections, caches
        await action()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await action()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _env(router: str, api: str, secrets: dict[str, str], token: bool) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "SERVICE_API_KEY": secrets["key"],
        "SERVICE_BASE_URL": router,
        "SERVICE_API_SERVER_URL": api,
    }
    if token:
        env["SERVICE_MGMT_TOKEN"] = secrets["token"]
    return env


def _params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "chainrouter.cli", "mcp"], env=env
    )


async def _start_up_ms(env: dict[str, str]) -> float:
    with open(os.devnull, "w") as quiet:
        start = time.perf_counter()
        async with (
            stdio_client(_params(env), errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            return (time.perf_counter() - start) * 1000


async def _measure(router: str, api: str, secrets: dict[str, str]) -> dict[str, Any]:
    url = f"{router}/rpc/{CHAIN}/{secrets['key']}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    async with httpx.AsyncClient() as client:

        async def direct() -> None:
            response = await client.post(url, json=body)
            response.raise_for_status()

        baseline = await _timed(direct, CALLS)

    env = _env(router, api, secrets, token=False)
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(_params(env), errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def tool_call() -> None:
                result = await session.call_tool(
                    "rpc_call", {"chainId": CHAIN, "method": "eth_chainId"}
                )
                assert not result.is_error, result.content

            async def fee_data() -> None:
                result = await session.call_tool("rpc_get_fee_data", {"chainId": CHAIN})
                assert not result.is_error, result.content

            through = await _timed(tool_call, CALLS)
            fees = await _timed(fee_data, CALLS // 3)
            companions = [p for p in _children(os.getpid()) if p]
            rss = max(rss_mb(pid) for pid in companions) if companions else float("nan")

    starts_plain = [
        await _start_up_ms(_env(router, api, secrets, token=False)) for _ in range(STARTS)
    ]
    starts_token = [
        await _start_up_ms(_env(router, api, secrets, token=True)) for _ in range(STARTS)
    ]
    direct_p50 = statistics.median(baseline)
    tool_p50 = statistics.median(through)
    return {
        "calls": CALLS,
        "direct_router": _percentiles(baseline),
        "rpc_call_tool": _percentiles(through),
        "rpc_get_fee_data_tool": _percentiles(fees),
        "overhead_p50_ms": round(tool_p50 - direct_p50, 3),
        "ratio_p50": round(tool_p50 / direct_p50, 2),
        "start_up_ms_median": {
            "rpc_tools_only": round(statistics.median(starts_plain), 1),
            "with_provider_token": round(statistics.median(starts_token), 1),
        },
        "companion_rss_mb": round(rss, 1),
        "target_overhead_ms": TARGET_OVERHEAD_MS,
    }


def _markdown(result: dict[str, Any]) -> str:
    direct, tool, fees = (
        result["direct_router"],
        result["rpc_call_tool"],
        result["rpc_get_fee_data_tool"],
    )
    verdict = "met" if result["overhead_p50_ms"] < TARGET_OVERHEAD_MS else "NOT met"
    return f"""# Companion MCP server benchmark

Run {result["when"]} on {result["machine"]}; {result["calls"]} sequential calls each, after a
warm-up. Baseline: `eth_chainId` posted straight to the router over one reused connection.

| path | p50 ms | p95 ms | mean ms |
|---|---|---|---|
| router, direct (baseline) | {direct["p50_ms"]} | {direct["p95_ms"]} | {direct["mean_ms"]} |
| `rpc_call` through the companion | {tool["p50_ms"]} | {tool["p95_ms"]} | {tool["mean_ms"]} |
| `rpc_get_fee_data` (three-call batch) | {fees["p50_ms"]} | {fees["p95_ms"]} | {fees["mean_ms"]} |

- Overhead of a tool call at p50: **{result["overhead_p50_ms"]} ms** \
({result["ratio_p50"]}x the direct call); target under {TARGET_OVERHEAD_MS:.0f} ms: {verdict}.
- Start-up to a tool list (median of {STARTS}): \
{result["start_up_ms_median"]["rpc_tools_only"]} ms with the RPC tools only, \
{result["start_up_ms_median"]["with_provider_token"]} ms with a provider-linked token \
(one more request, to learn the provider link).
- Resident memory of the companion after the calls: {result["companion_rss_mb"]} MB.
"""


def main() -> None:
    secrets = {
        "key": generate_secret(SecretKind.API_KEY),
        "token": generate_secret(SecretKind.MANAGEMENT_TOKEN),
    }
    with tempfile.TemporaryDirectory() as work, _service(Path(work), secrets) as (router, api):
        result = anyio.run(_measure, router, api, secrets)
    result["when"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "companion.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "companion.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
