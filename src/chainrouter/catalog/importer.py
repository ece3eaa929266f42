"""`chainrouter chains import`: read a catalog, parse it, store it, and say what happened."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from chainrouter.catalog.parse import EntryProblem, parse_catalog
from chainrouter.catalog.source import read_catalog_source
from chainrouter.stores.sql.chains import UpsertCounts, upsert_chains
from chainrouter.stores.sql.config_version import bump_config_version


@dataclass(frozen=True, slots=True)
class ImportReport:
    counts: UpsertCounts
    problems: list[EntryProblem]

    def summary(self) -> str:
        c = self.counts
        return (
            f"chains: {c.created} created, {c.updated} updated, {c.unchanged} unchanged, "
            f"{len(self.problems)} skipped"
        )


def import_catalog(
    engine: Engine, location: str, *, max_bytes: int, timeout_s: float
) -> ImportReport:
    """Import every usable entry of the catalog at `location` (file path or http(s) URL).

    Raises `CatalogSourceError` or `CatalogFormatError` when the document as a whole is unusable;
    problems with single entries are returned in the report instead.
    """
    document = read_catalog_source(location, max_bytes=max_bytes, timeout_s=timeout_s)
    parsed = parse_catalog(document)
    with engine.begin() as connection:
        counts = upsert_chains(connection, parsed.chains)
        if counts.created or counts.updated:
            bump_config_version(connection)
    return ImportReport(counts=counts, problems=parsed.problems)
