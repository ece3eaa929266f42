"""Chain catalog rows: bulk create-or-update that writes only what changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update

from chainrouter.domain.chains import Chain, Explorer
from chainrouter.domain.enums import ChainStatus
from chainrouter.stores.sql.schema import chains, utcnow

_DATA_COLUMNS = (
    "name",
    "short_name",
    "network",
    "vm",
    "native_currency_name",
    "native_currency_symbol",
    "native_currency_decimals",
    "info_url",
    "icon",
    "status",
    "explorers",
    "public_rpc_urls",
)


@dataclass(frozen=True, slots=True)
class UpsertCounts:
    created: int
    updated: int
    unchanged: int


def chain_to_row(chain: Chain) -> dict[str, Any]:
    return {
        "chain_id": chain.chain_id,
        "name": chain.name,
        "short_name": chain.short_name,
        "network": chain.network,
        "vm": chain.vm,
        "native_currency_name": chain.native_currency_name,
        "native_currency_symbol": chain.native_currency_symbol,
        "native_currency_decimals": chain.native_currency_decimals,
        "info_url": chain.info_url,
        "icon": chain.icon,
        "status": chain.status.value,
        "explorers": [
            {"name": e.name, "url": e.url, "standard": e.standard} for e in chain.explorers
        ],
        "public_rpc_urls": list(chain.public_rpc_urls),
    }


def row_to_chain(row: Any) -> Chain:
    return Chain(
        chain_id=row.chain_id,
        name=row.name,
        short_name=row.short_name,
        network=row.network,
        vm=row.vm,
        native_currency_name=row.native_currency_name,
        native_currency_symbol=row.native_currency_symbol,
        native_currency_decimals=row.native_currency_decimals,
        info_url=row.info_url,
        icon=row.icon,
        status=ChainStatus(row.status),
        explorers=tuple(Explorer(e["name"], e["url"], e.get("standard")) for e in row.explorers),
        public_rpc_urls=tuple(row.public_rpc_urls),
    )


def upsert_chains(connection: Connection, items: list[Chain]) -> UpsertCounts:
    """Create missing chains and update changed ones, in the caller's transaction.

    Existing rows are read once and compared in memory, so an unchanged catalog writes nothing and
    keeps its `updated_at`.
    """
    # The whole catalog is a few thousand rows: one read beats thousands of bound parameters.
    existing = {row.chain_id: row_to_chain(row) for row in connection.execute(select(chains))}
    now = utcnow()
    to_create = [c for c in items if c.chain_id not in existing]
    to_update = [c for c in items if c.chain_id in existing and existing[c.chain_id] != c]
    if to_create:
        connection.execute(
            chains.insert(),
            [{**chain_to_row(c), "created_at": now, "updated_at": now} for c in to_create],
        )
    if to_update:
        statement = (
            update(chains)
            .where(chains.c.chain_id == bindparam("b_chain_id"))
            .values({name: bindparam(f"b_{name}") for name in (*_DATA_COLUMNS, "updated_at")})
        )
        connection.execute(
            statement,
            [
                {f"b_{k}": v for k, v in {**chain_to_row(c), "updated_at": now}.items()}
                for c in to_update
            ],
        )
    return UpsertCounts(
        created=len(to_create),
        updated=len(to_update),
        unchanged=len(items) - len(to_create) - len(to_update),
    )


def count_chains(connection: Connection) -> int:
    return int(connection.execute(select(func.count()).select_from(chains)).scalar_one())


def purge_cache(connection: Connection, chain_id: int) -> int | None:
    """Count one more purge of the chain's cached answers; its new generation (None: no such
    chain). The caller bumps the configuration version, which tells the routers."""
    generation: int | None = connection.execute(
        update(chains)
        .where(chains.c.chain_id == chain_id)
        .values(cache_generation=chains.c.cache_generation + 1)
        .returning(chains.c.cache_generation)
    ).scalar_one_or_none()
    return generation


def cache_generations(connection: Connection) -> dict[int, int]:
    """Chain id -> purge generation, for the chains purged at least once."""
    rows = connection.execute(
        select(chains.c.chain_id, chains.c.cache_generation).where(chains.c.cache_generation > 0)
    )
    return {int(chain_id): int(generation) for chain_id, generation in rows}
