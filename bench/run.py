"""Foundation benchmarks: catalog import and operator apply at full size, on both backends.

Each figure is the median of several runs and is reported next to a baseline measured in the same
run on the same database: a plain bulk INSERT of the same rows, the floor any import could reach.
The machine is shared and noisy, so the ratios matter more than the absolute times.
Results: bench/results/foundation.json and bench/results/foundation.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, delete, text

from chainrouter.catalog.importer import import_catalog
from chainrouter.catalog.parse import parse_catalog
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.chains import chain_to_row
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.schema import utcnow

ROOT = Path(__file__).resolve().parents[1]
CHAINS_JSON = ROOT.parent / "shared" / "data" / "chains.json"
RESULTS = ROOT / "bench" / "results"
POSTGRES_ADMIN_URL = os.environ.get(
    "CHAINROUTER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REPEATS = 3
NODES_PER_CHAIN = 3


@contextmanager
def database(backend: str) -> Iterator[Engine]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            engine = create_database_engine(f"sqlite:///{directory}/bench.db")
            yield engine
            engine.dispose()
        return
    name = f"chainrouter_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine = create_database_engine(POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def timed(action: Callable[[], Any], reset: Callable[[], None]) -> float:
    samples = []
    for _ in range(REPEATS):
        reset()
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def clear(engine: Engine) -> None:
    """Empty every table but the one-row configuration version, which migrations create."""
    with engine.begin() as connection:
        for table in reversed(t.metadata.sorted_tables):
            if table is not t.config_version:
                connection.execute(delete(table))


def big_operator_file() -> dict[str, Any]:
    """Two providers serving every registry chain with three nodes per chain between them."""
    chain_ids = [c.chain_id for c in parse_catalog(CHAINS_JSON.read_bytes()).chains]
    plans: list[dict[str, Any]] = [
        {"name": "economy", "methods": [{"method": "eth_call", "cost": "0.0000003"}], "nodes": []},
        {"name": "fast", "methods": [{"method": "eth_call", "cost": "0.000001"}], "nodes": []},
    ]
    for chain_id in chain_ids:
        for n in range(NODES_PER_CHAIN):
            plans[n % 2]["nodes"].append(
                {"url": f"https://node{n}.chain{chain_id}.example/rpc", "chain_id": chain_id}
            )
    return {
        "providers": [
            {"slug": "economy-co", "name": "Economy Co", "plans": [plans[0]]},
            {"slug": "fast-co", "name": "Fast Co", "plans": [plans[1]]},
        ]
    }


def bench_backend(backend: str) -> dict[str, Any]:
    document = CHAINS_JSON.read_bytes()
    rows = [chain_to_row(c) for c in parse_catalog(document).chains]
    config = validate_document(big_operator_file())
    node_count = sum(len(p.nodes) for pr in config.providers for p in pr.plans)
    with database(backend) as engine:
        migrate.upgrade(engine)

        def raw_insert() -> None:
            now = utcnow()
            with engine.begin() as connection:
                connection.execute(
                    t.chains.insert(), [{**r, "created_at": now, "updated_at": now} for r in rows]
                )

        def do_import() -> None:
            import_catalog(engine, str(CHAINS_JSON), max_bytes=64 * 1024 * 1024, timeout_s=60.0)

        baseline = timed(raw_insert, lambda: clear(engine))
        cold = timed(do_import, lambda: clear(engine))
        warm = timed(do_import, lambda: None)

        def raw_nodes() -> None:
            now = utcnow()
            with engine.begin() as connection:
                provider = connection.execute(
                    t.providers.insert().values(
                        slug="raw", name="Raw", created_at=now, updated_at=now
                    )
                ).inserted_primary_key
                assert provider is not None
                plan = connection.execute(
                    t.plans.insert().values(
                        provider_id=provider[0], name="raw", created_at=now, updated_at=now
                    )
                ).inserted_primary_key
                assert plan is not None
                connection.execute(
                    t.nodes.insert(),
                    [
                        {
                            "plan_id": plan[0],
                            "chain_id": n.chain_id,
                            "url": n.url,
                            "created_at": now,
                            "updated_at": now,
                        }
                        for pr in config.providers
                        for p in pr.plans
                        for n in p.nodes
                    ],
                )

        def reset_to_catalog() -> None:
            clear(engine)
            raw_insert()

        nodes_baseline = timed(raw_nodes, reset_to_catalog)
        apply_cold = timed(lambda: apply_config(engine, config), reset_to_catalog)
        apply_warm = timed(lambda: apply_config(engine, config), lambda: None)
    return {
        "chains": len(rows),
        "nodes": node_count,
        "catalog_bulk_insert_s": round(baseline, 4),
        "catalog_import_s": round(cold, 4),
        "catalog_reimport_s": round(warm, 4),
        "catalog_import_ratio": round(cold / baseline, 2),
        "nodes_bulk_insert_s": round(nodes_baseline, 4),
        "apply_nodes_s": round(apply_cold, 4),
        "reapply_nodes_s": round(apply_warm, 4),
        "apply_nodes_ratio": round(apply_cold / nodes_baseline, 2),
    }


def main() -> None:
    backends = {backend: bench_backend(backend) for backend in ("sqlite", "postgresql")}
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "repeats": REPEATS,
        "backends": backends,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "foundation.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Foundation benchmark",
        "",
        f"{results['when']}, {results['machine']}, median of {REPEATS} runs.",
        "",
        "| backend | what | time (s) | baseline: bulk INSERT (s) | ratio |",
        "|---|---|---|---|---|",
    ]
    for backend, r in backends.items():
        lines += [
            f"| {backend} | import {r['chains']} chains (empty catalog) | {r['catalog_import_s']} "
            f"| {r['catalog_bulk_insert_s']} | {r['catalog_import_ratio']}x |",
            f"| {backend} | re-import, nothing changed | {r['catalog_reimport_s']} | | |",
            f"| {backend} | apply {r['nodes']} nodes on 2 plans | {r['apply_nodes_s']} "
            f"| {r['nodes_bulk_insert_s']} | {r['apply_nodes_ratio']}x |",
            f"| {backend} | re-apply, nothing changed | {r['reapply_nodes_s']} | | |",
        ]
    (RESULTS / "foundation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
