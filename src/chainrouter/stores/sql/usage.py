"""Writing metered usage: hourly aggregates (and their daily and per-hour roll-ups), one `usage`
ledger row per charged customer and flush, and the flush's mark per customer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, delete, select
from sqlalchemy.exc import IntegrityError

from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.plan_cycle import CycleUse
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.counts import add_counts
from chainrouter.stores.sql.ledger import record_credit_change
from chainrouter.stores.sql.plan_usage import add_plan_use

# (customer id, API key id, chain id, method, scenario, hour start as Unix seconds, plan id or 0)
UsageRowKey = tuple[int, int, int, str, str, int, int]
_KEY_COLUMNS = ("customer_id", "api_key_id", "chain_id", "method", "scenario", "bucket_start")
_DAILY_COLUMNS = ("customer_id", "day", "api_key_id", "chain_id", "method", "scenario")
_TOTAL_COLUMNS = ("customer_id", "bucket_start")
# A router retries a flush only while it runs and holds the batch, so a week covers any outage it
# can survive; the table then holds a week of flushes (one every 5 s) times their customers.
FLUSH_MARK_RETENTION = timedelta(days=7)


def read_balances(connection: Connection) -> dict[int, int]:
    return dict(connection.execute(select(t.customers.c.id, t.customers.c.balance_nano)).all())


def _roll_up(
    rows: list[dict[str, Any]], key_columns: Sequence[str], day: bool
) -> list[dict[str, Any]]:
    """Sum hourly rows by `key_columns` (with the hour truncated to its day when `day`)."""
    sums: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        fields = dict(row)
        if day:
            fields["day"] = row["bucket_start"].replace(hour=0)
        total = sums.setdefault(tuple(fields[c] for c in key_columns), [0, 0])
        total[0] += row["request_count"]
        total[1] += row["credits_nano"]
    return [
        {**dict(zip(key_columns, key, strict=True)), "request_count": n, "credits_nano": c}
        for key, (n, c) in sorted(sums.items())
    ]


def _write_aggregates(
    connection: Connection, keyed: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> None:
    """`keyed`: the rows whose key still exists, for the tables by key; `rows`: all of them,
    for the customer's hourly totals."""
    # Sorted keys give every writer the same lock order, so concurrent flushes of several
    # routers cannot deadlock on PostgreSQL.
    if keyed:
        add_counts(connection, t.usage_aggregates, _KEY_COLUMNS, keyed)
        add_counts(
            connection, t.usage_daily, _DAILY_COLUMNS, _roll_up(keyed, _DAILY_COLUMNS, day=True)
        )
    add_counts(
        connection,
        t.usage_hourly_totals,
        _TOTAL_COLUMNS,
        _roll_up(rows, _TOTAL_COLUMNS, day=False),
    )


def write_usage(
    engine: Engine,
    rows: Mapping[UsageRowKey, list[int]],
    spend: Mapping[int, int],
    *,
    reference: str,
) -> dict[int, int]:
    """Store one flush in one transaction and return the balances as they then stand.

    `reference` names the flush (router instance and flush number). The flush leaves a mark per
    customer under it (`usage_flushes`), and what a customer already has a mark for is left out:
    a flush retried after a commit whose outcome was lost changes nothing, and one written in
    parts (a router sets a failing customer's part aside and writes the others alone, then a
    replay of its journal writes the whole flush) adds exactly the parts not yet in storage.
    Charged customers' ledger rows carry the same reference, a second guard. What plans' nodes
    answered is added to their billing cycles in the same transaction.
    """
    try:
        with engine.begin() as connection:
            done = _marked(connection, _customers_of(rows, spend), reference)
            if done:
                rows = {key: counts for key, counts in rows.items() if key[0] not in done}
                spend = {c: amount for c, amount in spend.items() if c not in done}
            values, served = _aggregate(rows)
            keyed, values, spend = _drop_vanished(connection, values, spend)
            _mark_written(connection, _customers(values, spend), reference)
            if values:
                _write_aggregates(connection, keyed, values)
            add_plan_use(connection, served)
            for customer_id in sorted(spend):
                if spend[customer_id]:
                    record_credit_change(
                        connection,
                        customer_id=customer_id,
                        kind=LedgerEntryKind.USAGE,
                        amount_nano=-spend[customer_id],
                        reference=reference,
                    )
    except IntegrityError:
        # Another writer of the same flush got there first (a retry racing the original).
        with engine.connect() as connection:
            customers = _customers_of(rows, spend)
            if set(customers) - _marked(connection, customers, reference):
                raise
    with engine.connect() as connection:
        return read_balances(connection)


def _aggregate(
    rows: Mapping[UsageRowKey, list[int]],
) -> tuple[list[dict[str, Any]], dict[tuple[int, datetime], CycleUse]]:
    """The meter's rows as usage rows to add (summed per stored key), and the plans' use."""
    sums: dict[tuple[int, int, int, str, str, int], list[int]] = {}
    served: dict[tuple[int, datetime], CycleUse] = {}
    for (customer_id, key_id, chain_id, method, scenario, hour, plan_id), counts in rows.items():
        # The meter keys rows by the enum member itself; str() is its value.
        total = sums.setdefault(
            (customer_id, key_id, chain_id, method[:100], str(scenario), hour), [0, 0]
        )
        total[0] += counts[0]
        total[1] += counts[1]
        if plan_id:
            at = (plan_id, datetime.fromtimestamp(hour, UTC))
            served[at] = served.get(at, CycleUse()) + CycleUse(counts[0], counts[1])
    values = [
        {
            "customer_id": customer_id,
            "api_key_id": key_id,
            "chain_id": chain_id,
            "method": method,
            "scenario": scenario,
            "bucket_start": datetime.fromtimestamp(hour, UTC),
            "request_count": request_count,
            "credits_nano": credits_nano,
        }
        for (customer_id, key_id, chain_id, method, scenario, hour), (
            request_count,
            credits_nano,
        ) in sorted(sums.items())
    ]
    return values, served


def _drop_vanished(
    connection: Connection, values: list[dict[str, Any]], spend: Mapping[int, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Mapping[int, int]]:
    """What storage can still take of usage whose key or customer was deleted since the calls
    were made: the rows whose key exists (for the tables by key), the rows and charges of
    customers that exist.

    A deleted key's calls were served before it went: they are charged and counted in the
    customer's hourly totals, which name no key, as they would be had the flush come first (the
    key's own rows then go with it, ON DELETE CASCADE), so the charge is explained by usage.
    A deleted customer's usage and charge are both left out: nothing of theirs can be stored.
    Without this one deleted key would make every later flush fail on its foreign key.
    """
    key_ids = {row["api_key_id"] for row in values}
    customer_ids = {row["customer_id"] for row in values} | set(spend)
    live_keys = set(
        connection.execute(select(t.api_keys.c.id).where(t.api_keys.c.id.in_(key_ids))).scalars()
    )
    live_customers = set(
        connection.execute(
            select(t.customers.c.id).where(t.customers.c.id.in_(customer_ids))
        ).scalars()
    )
    if len(live_keys) == len(key_ids) and len(live_customers) == len(customer_ids):
        return values, values, spend
    values = [row for row in values if row["customer_id"] in live_customers]
    return (
        [row for row in values if row["api_key_id"] in live_keys],
        values,
        {customer: amount for customer, amount in spend.items() if customer in live_customers},
    )


def _customers(values: list[dict[str, Any]], spend: Mapping[int, int]) -> list[int]:
    return sorted({row["customer_id"] for row in values} | set(spend))


def _mark_written(connection: Connection, customers: list[int], reference: str) -> None:
    """Mark the flush as written for each customer; a duplicate raises IntegrityError, which
    rolls the whole flush back. Marks past their retention go first: with the index on
    `written_at`, finding none is one probe."""
    now = datetime.now(UTC)
    connection.execute(
        delete(t.usage_flushes).where(t.usage_flushes.c.written_at < now - FLUSH_MARK_RETENTION)
    )
    if customers:
        connection.execute(
            t.usage_flushes.insert(),
            [{"customer_id": c, "reference": reference, "written_at": now} for c in customers],
        )


def _customers_of(rows: Mapping[UsageRowKey, list[int]], spend: Mapping[int, int]) -> list[int]:
    return sorted({key[0] for key in rows} | set(spend))


def _marked(connection: Connection, customers: list[int], reference: str) -> set[int]:
    """Which of `customers` have this flush in storage already."""
    if not customers:
        return set()
    return set(
        connection.execute(
            select(t.usage_flushes.c.customer_id).where(
                t.usage_flushes.c.customer_id.in_(customers),
                t.usage_flushes.c.reference == reference,
            )
        ).scalars()
    )
