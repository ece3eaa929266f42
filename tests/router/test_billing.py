"""Billing and usage (design notes, "Routing and billing"): each successful call costs exactly the
price of the route that served it; rejected and failed calls cost nothing; usage is aggregated
per scenario and written by the flush, once, even when a flush is retried, and usage that can
never be written holds back no one else's; on both backends."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, delete, func, select, update

from chainrouter.domain.enums import Scenario
from chainrouter.domain.money import MAX_NANO
from chainrouter.router.journal import unwritten_flushes
from chainrouter.router.metering import UsageBatch, UsageKey
from chainrouter.router.sync import split_by_customer
from chainrouter.stores.sql import engine as engine_module
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.usage import FLUSH_MARK_RETENTION, write_usage
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import (
    CHAIN_A,
    World,
    WorldFactory,
    api_key,
    provider,
    rpc,
    world_config,
)

pytestmark = pytest.mark.anyio

# Paths that answer, and what a call served there costs (nano-credits).
CHEAP, DEAR, REVERT, BROKEN = (
    "/ok/bill-cheap",
    "/ok/bill-dear",
    "/rpc-error/bill",
    "/status/500/bill",
)
PRICES_NANO = {CHEAP: 300, DEAR: 1_700, REVERT: 900}


def _world_config(upstream: FaultyUpstream, **key_fields: object) -> dict[str, object]:
    # eth_blockNumber: cheap route first, dear second. eth_call: a broken route first (never
    # answers), then a route whose node reverts (an answer, charged). eth_getBalance: only dear.
    cheap = provider(
        "cheap",
        {"eth_blockNumber": "0.0000003"},
        [(upstream.url(CHEAP), CHAIN_A)],
    )
    dear = provider(
        "dear",
        {"eth_blockNumber": "0.0000017", "eth_getBalance": "0.0000017"},
        [(upstream.url(DEAR), CHAIN_A)],
    )
    broken = provider("broken", {"eth_call": "0.0000001"}, [(upstream.url(BROKEN), CHAIN_A)])
    revert = provider("revert", {"eth_call": "0.0000009"}, [(upstream.url(REVERT), CHAIN_A)])
    return world_config([cheap, dear, broken, revert], [api_key("main", **key_fields)])


def _served_nano(upstream: FaultyUpstream, before: Counter[str]) -> int:
    return sum((upstream.requests[p] - before[p]) * price for p, price in PRICES_NANO.items())


async def test_mixed_calls_with_failovers_cost_exactly_the_prices_served(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    # No hedging (the worlds' default): the price is counted from what each node served, and a
    # hedge the node served before it was cancelled is served but rightly not billed.
    world = await make_world_on_each_backend(_world_config(upstream))
    before_requests = Counter(upstream.requests)
    before_balance = world.stored_balance()
    methods = ["eth_blockNumber", "eth_call", "eth_getBalance", "eth_unpriced"]
    chooser = random.Random(20261122)
    calls = 0
    for round_number in range(60):
        picks = [chooser.choice(methods) for _ in range(chooser.randint(1, 4))]
        payload = [rpc(m, [], f"{round_number}-{i}") for i, m in enumerate(picks)]
        await world.call(payload if len(payload) > 1 else payload[0])
        calls += len(picks)
        if round_number % 20 == 0:
            # Let the broken node's cooldown lapse now and then so failover keeps happening.
            world.runtime.cooldowns.succeeded(
                next(
                    n.node_id
                    for n in world.service.snapshot.routes.nodes_by_chain[CHAIN_A]
                    if "500" in n.url
                )
            )
    expected = _served_nano(upstream, before_requests)
    assert expected > 0
    assert await world.runtime.sync.flush()
    assert before_balance - world.stored_balance() == expected
    usage = world.stored_usage_by_scenario()
    assert sum(credits for _, credits in usage.values()) == expected
    assert sum(count for count, _ in usage.values()) == calls
    assert usage["failover"][0] > 0  # eth_call fails over from the broken route
    assert usage["unsupported_method"][1] == 0
    with world.engine.connect() as connection:
        ledger = (
            connection.execute(
                select(t.credit_ledger.c.amount_nano).where(t.credit_ledger.c.kind == "usage")
            )
            .scalars()
            .all()
        )
    assert sum(ledger) == -expected


async def test_concurrent_calls_are_each_charged_once(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    # Hedging on with its production floor: lost hedges must not be billed either.
    world = await make_world_on_each_backend(
        _world_config(upstream), hedge_max=2, hedge_delay_floor_ms=2.0
    )
    before_requests = Counter(upstream.requests)
    before_balance = world.stored_balance()
    replies = await asyncio.gather(
        *(
            world.call(rpc("eth_blockNumber" if i % 2 else "eth_getBalance", [], i))
            for i in range(80)
        )
    )
    assert all(reply.status == 200 for reply in replies)
    assert await world.runtime.sync.flush()
    assert before_balance - world.stored_balance() == 40 * 300 + 40 * 1_700
    # Nodes may have been asked more often: a router that has just started knows no latency
    # and hedges early; a hedge that lost was cancelled and is not billed.
    assert _served_nano(upstream, before_requests) >= 40 * 300 + 40 * 1_700


async def test_failures_and_refusals_cost_nothing(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    broken_only = provider(
        "broken", {"eth_blockNumber": "0.001"}, [(upstream.url("/status/503/free"), CHAIN_A)]
    )
    world = await make_world_on_each_backend(world_config([broken_only]))
    before = world.stored_balance()
    statuses = [
        (await world.call(rpc("eth_blockNumber"))).status,  # the node fails: 424
        (await world.call(rpc("eth_blockNumber"))).status,  # cooling down: 429
        (await world.call(rpc("eth_nothing"))).status,  # unsupported: 422
        (await world.call(b"{")).status,  # not JSON: 400
    ]
    assert statuses == [424, 429, 422, 400]
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == before
    usage = world.stored_usage_by_scenario()
    assert usage == {
        "all_failed": (1, 0),
        "rate_limited": (1, 0),
        "unsupported_method": (1, 0),
    }


async def test_spending_counts_against_the_balance_before_it_is_written(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    only = provider(
        "only", {"eth_blockNumber": "0.000001"}, [(upstream.url("/ok/spend-down"), CHAIN_A)]
    )
    world = await make_world(world_config([only], credits="0.000003"))
    statuses = [(await world.call(rpc("eth_blockNumber"))).status for _ in range(4)]
    assert statuses == [200, 200, 200, 402]
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == 0
    assert (await world.call(rpc("eth_blockNumber"))).status == 402


async def test_calls_in_flight_hold_their_price_against_the_balance(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    slow = provider(
        "slow", {"eth_blockNumber": "0.000001"}, [(upstream.url("/sleep/300/held"), CHAIN_A)]
    )
    world = await make_world(world_config([slow], credits="0.000003"))
    # Four at once against credits for three: the fourth finds three prices held, none charged.
    # (The native harness drives one call at a time, so the asyncio run is the one that
    # overlaps them.)
    replies = await asyncio.gather(*(world.call(rpc("eth_blockNumber", [], i)) for i in range(4)))
    assert sorted(reply.status for reply in replies) == [200, 200, 200, 402]
    # Once they end, the holds are gone and the three prices charged: nothing is left.
    assert world.runtime.service.credits.available(world.customer_id) == 0
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == 0


async def test_a_key_that_bypasses_the_check_is_still_charged(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    only = provider(
        "only", {"eth_blockNumber": "0.000001"}, [(upstream.url("/ok/bypass-charge"), CHAIN_A)]
    )
    world = await make_world(
        world_config([only], [api_key("main", bypass_credit_check=True)], credits=None)
    )
    assert (await world.call(rpc("eth_blockNumber"))).status == 200
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == -1_000


async def test_usage_survives_an_unreachable_database_and_is_written_once_it_returns(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world_on_each_backend(_world_config(upstream))
    before = world.stored_balance()
    await world.call(rpc("eth_getBalance"))
    sync = world.runtime.sync
    reachable = sync.engine
    sync.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        assert not await sync.flush()
        await world.call(rpc("eth_getBalance"))
        assert not await sync.flush()
    finally:
        sync.engine.dispose()
        sync.engine = reachable
    assert world.stored_balance() == before
    assert await sync.flush()
    assert before - world.stored_balance() == 2 * 1_700


async def test_a_flush_retried_after_it_was_written_is_not_charged_twice(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world_on_each_backend(_world_config(upstream))
    before = world.stored_balance()
    rows = {
        (
            world.customer_id,
            1,
            CHAIN_A,
            "eth_call",
            "first_choice",
            1_700_000_000 // 3600 * 3600,
            0,
        ): [
            2,
            1_800,
        ]
    }
    spend = {world.customer_id: 1_800}
    write_usage(world.engine, rows, spend, reference="usage:test:1")
    balances = write_usage(world.engine, rows, spend, reference="usage:test:1")
    assert balances[world.customer_id] == before - 1_800
    assert world.stored_usage_by_scenario()["first_choice"] == (2, 1_800)


async def test_a_flush_of_free_calls_retried_after_it_was_written_counts_them_once(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    # No credits moved, so no ledger row to recognise the retry by: the flush's own mark must.
    world = await make_world_on_each_backend(_world_config(upstream, bypass_credit_check=True))
    hour = 1_700_000_000 // 3600 * 3600
    rows = {(world.customer_id, 1, CHAIN_A, "eth_chainId", "first_choice", hour, 0): [3, 0]}
    write_usage(world.engine, rows, {}, reference="usage:test:free")
    write_usage(world.engine, rows, {}, reference="usage:test:free")
    assert world.stored_usage_by_scenario()["first_choice"] == (3, 0)
    with world.engine.connect() as connection:
        daily = connection.execute(select(func.sum(t.usage_daily.c.request_count))).scalar()
        totals = connection.execute(
            select(func.sum(t.usage_hourly_totals.c.request_count))
        ).scalar()
    assert (daily, totals) == (3, 3)
    write_usage(world.engine, rows, {}, reference="usage:test:free-next")
    assert world.stored_usage_by_scenario()["first_choice"] == (6, 0)


async def test_flush_marks_are_pruned_once_no_router_can_retry_them(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world_on_each_backend(_world_config(upstream))
    now = datetime.now(UTC)
    with world.engine.begin() as connection:
        connection.execute(
            t.usage_flushes.insert(),
            [
                {"customer_id": world.customer_id, "reference": name, "written_at": at}
                for name, at in (
                    ("usage:old:1", now - FLUSH_MARK_RETENTION - timedelta(minutes=1)),
                    ("usage:recent:1", now - FLUSH_MARK_RETENTION + timedelta(minutes=5)),
                )
            ],
        )
    hour = 1_700_000_000 // 3600 * 3600
    rows = {(world.customer_id, 1, CHAIN_A, "eth_call", "first_choice", hour, 0): [1, 900]}
    write_usage(world.engine, rows, {world.customer_id: 900}, reference="usage:new:1")
    with world.engine.connect() as connection:
        kept = set(connection.execute(select(t.usage_flushes.c.reference)).scalars())
    assert kept == {"usage:recent:1", "usage:new:1"}


async def test_shutdown_writes_what_was_metered(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world_on_each_backend(_world_config(upstream))
    before = world.stored_balance()
    await world.call([rpc("eth_getBalance", [], 1), rpc("eth_blockNumber", [], 2)])
    await world.runtime.stop()
    assert before - world.stored_balance() == 1_700 + 300


async def test_calls_of_a_key_deleted_before_the_flush_are_charged_and_counted_for_the_customer(
    make_world_on_each_backend: WorldFactory, upstream: FaultyUpstream
) -> None:
    # Nothing in the product deletes a key (keys are deactivated); an operator may, by hand.
    world = await make_world_on_each_backend(_world_config(upstream))
    before = world.stored_balance()
    await world.call(rpc("eth_getBalance"))
    with world.engine.begin() as connection:
        connection.execute(delete(t.api_keys).where(t.api_keys.c.customer_id == world.customer_id))
    assert await world.runtime.sync.flush()
    assert before - world.stored_balance() == 1_700  # served before the key went: paid for
    totals = t.usage_hourly_totals
    with world.engine.connect() as connection:
        charged = connection.execute(
            select(func.sum(t.credit_ledger.c.amount_nano)).where(
                t.credit_ledger.c.customer_id == world.customer_id,
                t.credit_ledger.c.kind == "usage",
            )
        ).scalar_one()
        counted = connection.execute(
            select(func.sum(totals.c.request_count), func.sum(totals.c.credits_nano)).where(
                totals.c.customer_id == world.customer_id
            )
        ).one()
    assert charged == -1_700
    assert tuple(counted) == (1, 1_700)  # the customer's usage explains the charge
    assert world.stored_usage_by_scenario() == {}  # per-key rows went with the key


def _set_balance(world: World, customer_id: int, nano: int) -> None:
    with world.engine.begin() as connection:
        connection.execute(
            update(t.customers).where(t.customers.c.id == customer_id).values(balance_nano=nano)
        )


async def test_usage_that_can_never_be_written_holds_back_no_other_customer(
    make_world_on_each_backend: WorldFactory,
    upstream: FaultyUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _world_config(upstream, bypass_credit_check=True)
    other_key = api_key("other")
    config["customers"].append(  # type: ignore[attr-defined]
        {
            "email": "other@example.com",
            "name": "Other",
            "credits": [{"reference": "grant", "amount": Decimal("10")}],
            "api_keys": [other_key],
        }
    )
    world = await make_world_on_each_backend(config)
    with world.engine.connect() as connection:
        other_id = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == "other@example.com")
        ).scalar_one()
    other_before = world.stored_balance(other_id)
    # The main customer sits at the floor of the balance range: no charge of theirs fits.
    _set_balance(world, world.customer_id, -MAX_NANO + 1)
    sync = world.runtime.sync

    await world.call(rpc("eth_getBalance"))
    await world.call(rpc("eth_getBalance"), key=other_key["secret"])
    with caplog.at_level(logging.ERROR, logger="chainrouter.router.sync"):
        assert not await sync.flush()
    assert world.stored_balance(other_id) == other_before - 1_700
    assert world.stored_balance() == -MAX_NANO + 1
    assert f"customer {world.customer_id}: 0.0000017 credits" in caplog.text

    await world.call(rpc("eth_getBalance"), key=other_key["secret"])
    assert not await sync.flush()
    assert world.stored_balance(other_id) == other_before - 2 * 1_700
    assert sync.unwritten_batches == 1

    _set_balance(world, world.customer_id, 0)  # put right by hand
    assert await sync.flush()
    assert sync.unwritten_batches == 0
    assert world.stored_balance() == -1_700
    assert world.stored_usage_by_scenario()["first_choice"] == (3, 3 * 1_700)


def _refuse_usage_of(world: World, customer_id: int) -> None:
    """Storage answers, but refuses every flush mark of one customer with an OperationalError, as
    for a row that can never be written (on PostgreSQL, class 54: a program limit)."""
    with world.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(
                "CREATE FUNCTION refuse_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'index row size exceeds btree maximum' USING ERRCODE = '54000'; "
                "END $$"
            )
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse_usage BEFORE INSERT ON usage_flushes FOR EACH ROW "
                f"WHEN (NEW.customer_id = {customer_id}) EXECUTE FUNCTION refuse_usage()"
            )
        else:  # json() of what is not JSON: SQLITE_ERROR, an OperationalError
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse_usage BEFORE INSERT ON usage_flushes "
                f"WHEN NEW.customer_id = {customer_id} BEGIN SELECT json('not json'); END"
            )


async def test_usage_waiting_on_another_writers_lock_is_kept_whole_for_the_next_flush(
    make_world: WorldFactory,
    upstream: FaultyUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SQLite's "database is locked" is an OperationalError while a reader still passes: it is
    another writer's turn (an operator's apply), not a write that can never succeed. The flush
    is kept whole and retried, not split and set aside customer by customer (each part waiting
    out the busy time-out again)."""
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 100)
    world = await make_world(_world_config(upstream))
    world.runtime.sync.engine.dispose()  # new connections take the short busy time-out
    before = world.stored_balance()
    await world.call(rpc("eth_getBalance"))
    database = world.runtime.sync.engine.url.database
    assert database is not None
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        with caplog.at_level(logging.ERROR, logger="chainrouter.router.sync"):
            assert not await world.runtime.sync.flush()
        assert world.runtime.sync.unwritten_batches == 1
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert await world.runtime.sync.flush()
    assert before - world.stored_balance() == 1_700


async def test_usage_failing_as_if_storage_were_away_while_it_answers_holds_back_no_one(
    make_world_on_each_backend: WorldFactory,
    upstream: FaultyUpstream,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    # An OperationalError is what an unreachable database raises, and also what one row that can
    # never be written may raise: when storage still answers, the flush must not wait for it.
    config = _world_config(upstream)
    other_key = api_key("other")
    config["customers"].append(  # type: ignore[attr-defined]
        {
            "email": "other@example.com",
            "name": "Other",
            "credits": [{"reference": "grant", "amount": Decimal("10")}],
            "api_keys": [other_key],
        }
    )
    world = await make_world_on_each_backend(config, usage_journal_dir=str(tmp_path))
    with world.engine.connect() as connection:
        other_id = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == "other@example.com")
        ).scalar_one()
    before, other_before = world.stored_balance(), world.stored_balance(other_id)
    _refuse_usage_of(world, world.customer_id)
    sync = world.runtime.sync

    await world.call(rpc("eth_getBalance"))
    await world.call(rpc("eth_getBalance"), key=other_key["secret"])
    with caplog.at_level(logging.ERROR, logger="chainrouter.router.sync"):
        assert not await sync.flush()
    assert world.stored_balance(other_id) == other_before - 1_700
    assert world.stored_balance() == before
    stuck = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert f"customer {world.customer_id}: 0.0000017 credits" in stuck[0].getMessage()

    await world.call(rpc("eth_getBalance"), key=other_key["secret"])
    assert not await sync.flush()
    assert world.stored_balance(other_id) == other_before - 2 * 1_700
    assert sync.unwritten_batches == 1  # the refused part, kept
    [journal] = tmp_path.glob("*.journal")
    lines = iter(journal.read_bytes().splitlines()[1:])
    assert [flush.sequence for flush in unwritten_flushes(journal.stem, lines)] == [1]

    with world.engine.begin() as connection:  # put right by hand
        connection.exec_driver_sql(
            "DROP TRIGGER refuse_usage ON usage_flushes"
            if connection.dialect.name == "postgresql"
            else "DROP TRIGGER refuse_usage"
        )
    assert await sync.flush()
    assert world.stored_balance() == before - 1_700
    assert world.stored_usage_by_scenario()["first_choice"] == (3, 3 * 1_700)


async def test_usage_never_written_is_logged_at_exit(
    make_world: WorldFactory, upstream: FaultyUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    world = await make_world(_world_config(upstream))
    await world.call(rpc("eth_getBalance"))
    await world.call(rpc("eth_blockNumber"))
    sync = world.runtime.sync
    reachable = sync.engine
    sync.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        with caplog.at_level(logging.ERROR, logger="chainrouter.router.sync"):
            await world.runtime.stop()
    finally:
        sync.engine.dispose()
        sync.engine = reachable
    lost = [r.getMessage() for r in caplog.records if "usage lost at exit" in r.getMessage()]
    assert len(lost) == 1
    assert "2 calls" in lost[0]
    assert f"customer {world.customer_id}: 0.000002 credits" in lost[0]


_usage_keys = st.tuples(
    st.integers(1, 4),  # customer
    st.integers(1, 6),  # key
    st.sampled_from([1, 10]),
    st.sampled_from(["eth_call", "eth_blockNumber"]),
    st.sampled_from(list(Scenario)),
    st.sampled_from([0, 3600]),
)


@given(
    rows=st.dictionaries(_usage_keys, st.tuples(st.integers(1, 99), st.integers(0, 10**12))),
    sequence=st.integers(1, 10**6),
)
def test_splitting_usage_by_customer_keeps_every_call_and_credit(
    rows: dict[UsageKey, tuple[int, int]], sequence: int
) -> None:
    spend: dict[int, int] = {}
    for key, (_, credits) in rows.items():
        if credits:
            spend[key[0]] = spend.get(key[0], 0) + credits
    batch = UsageBatch({k: list(v) for k, v in rows.items()}, spend, sequence)
    parts = split_by_customer(batch)
    assert all(part.sequence == sequence for part in parts)
    assert all(len({key[0] for key in part.rows}) == 1 for part in parts)
    assert all(set(part.spend) <= {key[0] for key in part.rows} for part in parts)
    assert {k: v for part in parts for k, v in part.rows.items()} == batch.rows
    assert sum(len(part.rows) for part in parts) == len(batch.rows)
    assert {c: n for part in parts for c, n in part.spend.items()} == spend
