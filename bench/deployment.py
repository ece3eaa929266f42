"""Throughput through the deployment recipe's balancer: one, two and three routers, in one run.

The recipe (chainrouter.deploy.render) is rendered three times for this machine: HAProxy in front
of one router, of two and of three; the routers (the native executor, one worker each, on their
own loopback addresses) share PostgreSQL and a Redis with the rendered limits' configuration,
and forward to a static nginx upstream. wrk loads each balancer in interleaved rounds
(BENCH_ROUNDS, 2 by default; BENCH_DURATION_S each), and one router directly, for what the
balancer costs. The ratios N/one are the medians of the per-round ratios. Every request is a
keyed, billed eth_blockNumber (coalescing and the cache off, as in bench/router.py).

This machine has 2 cores for wrk, HAProxy, nginx and the routers together: the ratios say what
more routers add when the cores are shared, not what more machines add.
Results: bench/results/deployment.{json,md}.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench.host import probe
from bench.run import RESULTS, database
from bench.upstreams import free_port, nginx, require_tools, wait_until_ready, wait_until_serving
from bench.wrk import WrkResult, run_wrk
from chainrouter.deploy.render import load_site, render, write
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate

CHAIN = 1
BODY = '{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":1}'
CONNECTIONS = 64
DURATION_S = int(os.environ.get("BENCH_DURATION_S", "8"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
ROUTERS = ("127.0.0.11", "127.0.0.12", "127.0.0.13")
COUNTS = (1, 2, 3)
BALANCER = "127.0.0.10"


def _world(database_url: str, static_url: str) -> str:
    from chainrouter.stores.sql.engine import create_database_engine

    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    key = generate_secret(SecretKind.API_KEY)
    nodes = [{"url": f"{static_url}chain/1/n{n}", "chain_id": CHAIN} for n in range(2)]
    methods = [{"method": "eth_blockNumber", "cost": "0.0000003"}]
    config = {
        "version": 1,
        "chains": [
            {
                "chain_id": CHAIN,
                "name": "Bench chain",
                "short_name": "bench",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": [
            {
                "slug": "bench",
                "name": "Bench",
                "plans": [{"name": "one", "methods": methods, "nodes": nodes}],
            }
        ],
        "customers": [
            {
                "email": "bench@example.com",
                "name": "Bench",
                "credits": [{"reference": "bench", "amount": "1000000"}],
                "api_keys": [{"name": "bench", "secret": key, "allowed_domains": ["*"]}],
            }
        ],
    }
    apply_config(engine, validate_document(config))
    engine.dispose()
    return key


def _recipe(directory: Path, routers: tuple[str, ...], port: int, front: int, db: str) -> Path:
    site = (
        f"routers = {list(routers)!r}\n"
        f'api_hosts = ["{BALANCER}"]\n'
        f'database_url = "{db}"\n'
        f'redis_url = "redis://127.0.0.1:{_REDIS_PORT}/0"\n'
        f'cache_redis_url = "redis://127.0.0.1:{_REDIS_PORT}/1"\n'
        f'balancer_bind = "{BALANCER}"\n'
        f"rpc_port = {port}\n"
        f"balancer_rpc_port = {front}\n"
        f"balancer_api_port = {free_port()}\n"
        "[extra_env]\n"
        'CHAINROUTER_OUTBOUND_ALLOW_PRIVATE = "true"\n'  # its nodes are the local nginx
        'CHAINROUTER_COALESCE = "false"\n'
        'CHAINROUTER_CACHE_MAX_BYTES = "0"\n'
        'CHAINROUTER_LOG_LEVEL = "warning"\n'
    )
    out = directory / f"recipe-{len(routers)}"
    write(render(load_site(tomllib.loads(site))), out)
    return out


_REDIS_PORT = free_port()


@contextmanager
def _process(command: list[str], **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(command, **kwargs)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _environment(recipe: Path, host: str) -> dict[str, str]:
    pairs = [
        line.split("=", 1)
        for line in (recipe / "systemd" / "chainrouter.env").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    # One machine: each router on its own loopback address, the journals apart.
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")},
        **dict(pairs),
        "CHAINROUTER_RPC_HOST": host,
    }


def main() -> None:
    require_tools()
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("missing haproxy: scripts/services.sh installs it")
    static_port = free_port()
    rpc_port, fronts = free_port(), {n: free_port() for n in COUNTS}
    rounds: list[dict[str, WrkResult]] = []
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(nginx(static_port, free_port()))
        engine = stack.enter_context(database("postgresql"))
        db_url = engine.url.render_as_string(hide_password=False)
        key = _world(db_url, f"http://127.0.0.1:{static_port}/")
        recipes = {
            n: _recipe(directory, ROUTERS[:n], rpc_port, fronts[n], db_url.replace("+psycopg", ""))
            for n in COUNTS
        }
        stack.enter_context(
            _process(
                [
                    "redis-server",
                    str(recipes[3] / "redis" / "limits.conf"),
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(_REDIS_PORT),
                    "--dir",
                    str(directory),
                ],
                stdout=subprocess.DEVNULL,
            )
        )
        for n, host in enumerate(ROUTERS):
            home = directory / f"router{n}"
            home.mkdir()
            stack.enter_context(
                _process(
                    [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"],
                    env=_environment(recipes[3], host),
                    cwd=home,
                )
            )
            wait_until_ready(f"http://{host}:{rpc_port}")
        for n in COUNTS:
            stack.enter_context(
                _process(
                    [haproxy, "-db", "-f", str(recipes[n] / "haproxy" / "haproxy.cfg")],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            wait_until_ready(f"http://{BALANCER}:{fronts[n]}")
        targets = {
            "router direct": f"http://{ROUTERS[0]}:{rpc_port}/rpc/{CHAIN}/{key}",
            **{_name(n): f"http://{BALANCER}:{fronts[n]}/rpc/{CHAIN}/{key}" for n in COUNTS},
        }
        for url in targets.values():
            wait_until_serving(url)
        for _ in range(ROUNDS):
            rounds.append(
                {
                    name: run_wrk(url, BODY, connections=CONNECTIONS, duration_s=DURATION_S)
                    for name, url in targets.items()
                }
            )
    _report(rounds)


def _name(routers: int) -> str:
    return f"HAProxy, {routers} router{'s' if routers > 1 else ''}"


def _report(rounds: list[dict[str, WrkResult]]) -> None:
    ratios = {
        n: [r[_name(n)].requests_per_s / r[_name(1)].requests_per_s for r in rounds]
        for n in COUNTS[1:]
    }
    rows = {
        name: {
            "requests_per_s": round(statistics.median(r[name].requests_per_s for r in rounds)),
            "p50_ms": round(statistics.median(r[name].p50_ms for r in rounds), 2),
            "p99_ms": round(statistics.median(r[name].p99_ms for r in rounds), 2),
            "errors": sum(r[name].errors for r in rounds),
        }
        for name in rounds[0]
    }
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": probe().describe(),
        "rounds": ROUNDS,
        "duration_s": DURATION_S,
        "connections": CONNECTIONS,
        "targets": rows,
        **{
            f"{n}_over_1": {
                "median": round(statistics.median(values), 2),
                "range": [round(min(values), 2), round(max(values), 2)],
            }
            for n, values in ratios.items()
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "deployment.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Deployment: one, two and three routers behind HAProxy",
        "",
        f"{result['date']}, {ROUNDS} interleaved rounds of {DURATION_S} s, {CONNECTIONS} "
        "connections, keyed billed `eth_blockNumber` (bench/deployment.py). The balancer and the "
        "routers are the rendered recipe; routers: native executor, one worker each, PostgreSQL "
        "and the limits' Redis shared; upstream: static nginx. One 2-core machine runs wrk, "
        "HAProxy, nginx and every router.",
        "",
        "| target | requests/s | p50 ms | p99 ms | errors |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {row['requests_per_s']:,} | {row['p50_ms']} | {row['p99_ms']} | "
            f"{row['errors']} |"
            for name, row in rows.items()
        ),
        "",
        *(
            f"**{n} routers over one: {statistics.median(values):.2f}x** (rounds: "
            f"{min(values):.2f} to {max(values):.2f})."
            for n, values in ratios.items()
        ),
        "",
        "What it predicts for more cores: here every router shares the two cores with wrk, HAProxy "
        "and nginx, so a second or a third router adds contention, not capacity. Given a core "
        "each (and one for the balancer), each router serves about what one serves directly "
        f"({rows['router direct']['requests_per_s']:,}/s here, on a shared core), so N routers "
        "should serve about N times that until the balancer's core is full; HAProxy's cost per "
        "request is the gap between one router directly and one behind it.",
        "",
    ]
    (RESULTS / "deployment.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
