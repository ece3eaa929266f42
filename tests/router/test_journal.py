"""Crash-safe usage (router/journal.py): what a router metered survives `kill -9`, is written
once at the next start, and is never charged twice."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Connection, Engine, func, select

from chainrouter.domain.enums import Scenario
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import parse_yaml, validate_document
from chainrouter.router import journal as journal_module
from chainrouter.router.journal import (
    ReplayedFlush,
    UsageJournal,
    _row_line,
    database_fingerprint,
    replay_journals,
    unwritten_flushes,
)
from chainrouter.router.metering import UsageMeter
from chainrouter.router.sync import split_by_customer
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.usage import FLUSH_MARK_RETENTION, write_usage
from tests.redis_servers import PrivateRedis
from tests.router.conftest import CHAIN_A, AnvilNodes, WorldFactory, provider, rpc, world_config
from tests.router.test_server import ACCOUNT, Served, start_router, start_router_on

DB = database_fingerprint("sqlite:///test.db")
# eth_getBalance in start_router_on's world, nano-credits: the cheap provider's node answers
# unless it is slow (a hedge, a failover on a loaded machine), and then the dear one's does.
PRICE_BY_PLAN = {"cheap": 200, "dear": 1000}


def _charged_by_plan(connection: Connection, served: int) -> int:
    """What `served` eth_getBalance calls cost, from which plan's node answered each (counted per
    plan by the same flushes): exact whichever node answered."""
    rows = connection.execute(
        select(t.providers.c.slug, t.plan_hourly_usage.c.request_count)
        .join(t.plans, t.plans.c.id == t.plan_hourly_usage.c.plan_id)
        .join(t.providers, t.providers.c.id == t.plans.c.provider_id)
    ).all()
    counts = {slug: int(count) for slug, count in rows}
    assert sum(counts.values()) == served, counts
    return sum(PRICE_BY_PLAN[slug] * count for slug, count in counts.items())


def _key(customer: int = 1) -> tuple[int, int, int, str, Scenario, int, int]:
    return (customer, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 3600, 0)


def _replay(
    directory: Path, write: Callable[[ReplayedFlush], None], now: float | None = None
) -> int:
    return replay_journals(
        directory,
        DB,
        write,
        marks_kept_s=FLUSH_MARK_RETENTION.total_seconds(),
        now=time.time if now is None else lambda: now,
    )


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_every_metered_call_and_every_take_is_journaled_as_it_happens(tmp_path: Path) -> None:
    journal = UsageJournal(tmp_path, "r1", DB)
    meter = UsageMeter(journal=journal)
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    meter.take()
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    journal.written(1)
    lines = _lines(tmp_path / "r1.journal")
    assert lines[0] == b'{"db":"%s"}' % DB.encode()
    assert re.fullmatch(rb'\{"t":1,"at":(\d+)\}', lines[2])
    assert abs(int(json.loads(lines[2])["at"]) - time.time()) < 60
    assert lines[-1] == b'{"w":1}'
    journal.close(remove=False)


_FILLING_DISK = """
import resource, signal, sys
from pathlib import Path
from chainrouter.domain.enums import Scenario
from chainrouter.router.journal import UsageJournal
from chainrouter.router.metering import UsageMeter

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the size limit: EFBIG, not a signal
journal = UsageJournal(Path(sys.argv[1]), "full", sys.argv[2])
meter = UsageMeter(journal=journal)
meter.record(1, 7, 1, "eth_call", Scenario.FIRST_CHOICE, 100)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
size = journal.path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4, hard))  # 4 bytes of flush 1's marker fit
meter.take()  # flush 1's marker: written in part, then the disk is full
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
meter.record(1, 7, 1, "eth_call", Scenario.FIRST_CHOICE, 100)
meter.record(1, 7, 1, "eth_call", Scenario.FIRST_CHOICE, 100)
journal.close(remove=False)
print(journal.failed_writes)
"""


def test_a_marker_lost_to_a_full_disk_is_written_once_there_is_room(tmp_path: Path) -> None:
    """A file size limit (the kernel's EFBIG, as a full disk's ENOSPC) cuts the `t` line of
    flush 1 after 4 bytes: the journal writes it again before the next line, so the replay
    keeps flush 1's row apart from the two after it, and the torn bytes are a line of their
    own, skipped."""
    child = subprocess.run(
        [sys.executable, "-c", _FILLING_DISK, str(tmp_path), DB],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "1"
    lines = _lines(tmp_path / "full.journal")
    assert lines[2] == b'{"t"'
    assert lines[3].startswith(b'{"t":1,"at":')
    flushes = unwritten_flushes("full", iter(lines))
    assert [(f.sequence, sum(c for c, _ in f.rows.values())) for f in flushes] == [(1, 1), (2, 2)]


def test_a_live_routers_journal_starts_afresh_once_everything_in_it_is_in_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It would otherwise grow with every call the router serves. Past its size bound, with
    every flush taken in storage, the file is replaced by one holding only the calls metered
    since, under the flush numbers that follow; a replay then writes exactly those."""
    monkeypatch.setattr(journal_module, "ROTATE_BYTES", 200)
    journal = UsageJournal(tmp_path, "r1", DB)
    meter = UsageMeter(journal=journal)
    for _ in range(5):
        meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    meter.take()  # flush 1
    for _ in range(3):
        meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    assert len(_lines(journal.path)) == 1 + 5 + 1 + 3
    journal.written(1)
    meter.rotate_journal(1)  # what the sync does once flush 1, the last taken, is in storage
    lines = _lines(journal.path)
    assert lines[0] == b'{"db":"%s","s":1}' % DB.encode()
    assert len(lines) == 2  # the three calls since flush 1, as one row with its count
    meter.take()  # flush 2
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    os.close(journal._fd)  # killed
    found: list[ReplayedFlush] = []
    assert _replay(tmp_path, found.append) == 2
    assert [(f.reference, sum(c for c, _ in f.rows.values())) for f in found] == [
        ("usage:r1:2", 3),
        ("usage:r1:3", 1),
    ]
    assert [f.spend for f in found] == [{1: 300}, {1: 100}]


def test_credits_charged_for_no_call_are_replayed_and_survive_a_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subscription held open is charged with no call counted (router/ws/holding.py): its
    lines carry a count of 0, which a replay keeps (only a row of 0 calls and 0 credits is
    nothing), in a rotated file as in a live one."""
    monkeypatch.setattr(journal_module, "ROTATE_BYTES", 100)
    journal = UsageJournal(tmp_path, "r1", DB)
    meter = UsageMeter(journal=journal)
    held = (1, 7, CHAIN_A, "newHeads", Scenario.SUBSCRIPTION_HELD)
    meter.record_credits(*held, 1_234)
    meter.take()  # flush 1, in storage
    journal.written(1)
    meter.record_credits(*held, 500)
    meter.record_credits(*held, 250)
    meter.rotate_journal(1)
    assert _lines(journal.path)[0] == b'{"db":"%s","s":1}' % DB.encode()
    meter.take()  # flush 2
    meter.record_credits(*held, 7)
    os.close(journal._fd)  # killed
    found: list[ReplayedFlush] = []
    assert _replay(tmp_path, found.append) == 2
    assert [(f.reference, list(f.rows.values()), f.spend) for f in found] == [
        ("usage:r1:2", [[0, 750]], {1: 750}),
        ("usage:r1:3", [[0, 7]], {1: 7}),
    ]


def test_a_rotation_its_router_died_in_is_replayed_from_the_old_file_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """Killed after writing the replacement and before renaming it: the old file holds every
    call, and is replayed; the unrenamed replacement goes with it."""
    journal = UsageJournal(tmp_path, "r1", DB)
    meter = UsageMeter(journal=journal)
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    (tmp_path / "r1.journal.new").write_bytes(b'{"db":"%s","s":0}\n' % DB.encode())
    os.close(journal._fd)  # killed
    found: list[ReplayedFlush] = []
    assert _replay(tmp_path, found.append) == 1
    assert [f.spend for f in found] == [{1: 100}]
    assert list(tmp_path.iterdir()) == []


def test_a_journal_rotated_while_another_router_waits_to_replay_it_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starting router opens the file, the live one renames its new journal over it and lets
    the old go, and only then the starting one takes the lock: what it holds is no longer the
    journal at the path, and it must neither replay nor remove it."""
    monkeypatch.setattr(journal_module, "ROTATE_BYTES", 10)
    live = UsageJournal(tmp_path, "live", DB)
    meter = UsageMeter(journal=live)
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    meter.take()
    live.written(1)
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 100)
    real_flock = fcntl.flock
    old_file = live._fd

    def rotate_first(fd: int, operation: int) -> None:
        if fd not in (old_file, live._fd):  # the starting router's lock on the file it opened
            monkeypatch.setattr(fcntl, "flock", real_flock)
            meter.rotate_journal(1)
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", rotate_first)
    found: list[ReplayedFlush] = []
    assert _replay(tmp_path, found.append) == 0
    assert found == []
    assert live.path.exists()
    live.close(remove=True)


def test_unwritten_flushes_are_those_not_marked_written_and_the_rows_after_the_last_take(
    tmp_path: Path,
) -> None:
    journal = UsageJournal(tmp_path, "r1", DB)
    meter = UsageMeter(journal=journal)
    for credits in (100, 200):  # flush 1, written
        meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, credits)
    meter.take()
    journal.written(1)
    meter.record(2, 8, CHAIN_A, "eth_call", Scenario.FAILOVER, 50)  # flush 2, taken, not written
    meter.take()
    meter.record(1, 7, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 5)  # not taken yet
    journal.close(remove=False)
    with (tmp_path / "r1.journal").open("ab") as torn:
        torn.write(b'{"u":[1,7,31337,"eth_ca')  # the process died inside a write
    lines = iter(_lines(tmp_path / "r1.journal")[1:])
    flushes = unwritten_flushes("r1", lines)
    assert [(f.sequence, f.spend) for f in flushes] == [(2, {2: 50}), (3, {1: 5})]
    assert flushes[0].reference == "usage:r1:2"
    [(key, counts)] = flushes[0].rows.items()
    assert (key[:5], counts) == ((2, 8, CHAIN_A, "eth_call", Scenario.FAILOVER), [1, 50])


def test_a_live_routers_journal_and_another_databases_are_not_replayed(tmp_path: Path) -> None:
    live = UsageJournal(tmp_path, "live", DB)
    live.metered(_key(), 10)
    other = UsageJournal(tmp_path, "other", database_fingerprint("sqlite:///else.db"))
    other.metered(_key(), 10)
    other.close(remove=False)  # dead, but another database's
    written: list[str] = []
    assert _replay(tmp_path, lambda flush: written.append(flush.reference)) == 0
    assert written == []
    assert (tmp_path / "live.journal").exists()
    assert (tmp_path / "other.journal").exists()
    live.close(remove=True)
    assert not (tmp_path / "live.journal").exists()


@pytest.mark.anyio
async def test_replay_writes_once_even_a_flush_storage_already_had(
    make_world_on_each_backend: WorldFactory, tmp_path: Path
) -> None:
    world = await make_world_on_each_backend(
        world_config([provider("p", {"eth_call": "0.001"}, [("http://127.0.0.1:9/", CHAIN_A)])])
    )
    key_id = next(iter(world.runtime.service.snapshot.keys_by_hash.values())).key_id
    customer = world.customer_id
    dead = UsageJournal(tmp_path, "dead", DB)
    meter = UsageMeter(journal=dead)
    for _ in range(3):
        meter.record(customer, key_id, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 10**6)
    first = meter.take()  # flush 1 reached storage, but the process died before saying so
    write_usage(world.engine, first.rows, first.spend, reference="usage:dead:1")
    for _ in range(2):
        meter.record(customer, key_id, CHAIN_A, "eth_call", Scenario.FIRST_CHOICE, 10**6)
    os.close(dead._fd)  # killed: the lock goes with the process
    before = world.stored_balance()

    def write(flush: object) -> None:
        from chainrouter.router.journal import ReplayedFlush

        assert isinstance(flush, ReplayedFlush)
        write_usage(world.engine, flush.rows, flush.spend, reference=flush.reference)

    assert _replay(tmp_path, write) == 2  # flush 1 again (a no-op) and the rest
    assert before - world.stored_balance() == 2 * 10**6
    assert world.stored_usage_by_scenario()[Scenario.FIRST_CHOICE] == (5, 5 * 10**6)
    assert not (tmp_path / "dead.journal").exists()
    assert _replay(tmp_path, write) == 0


TWO_CUSTOMERS = """
chains:
  - {chain_id: 31337, name: Local, short_name: local, native_currency: {name: E, symbol: E}}
providers:
  - slug: p
    name: P
    plans:
      - name: flat
        methods: [{method: eth_call, cost: "0.000001"}]
        nodes: [{url: "http://127.0.0.1:1/n", chain_id: 31337}]
customers:
  - {email: a@example.com, name: A, credits: [{reference: a, amount: "1"}],
     api_keys: [{name: a, allowed_domains: ["*"]}]}
  - {email: b@example.com, name: B, credits: [{reference: b, amount: "1"}],
     api_keys: [{name: b, allowed_domains: ["*"]}]}
"""


def test_a_flush_written_in_parts_then_replayed_whole_charges_each_part_once(
    engine: Engine, tmp_path: Path
) -> None:
    """A router writes a failing customer's part of a flush apart from the others' (sync's
    split by customer); killed before the rest is written, its journal's replay writes the
    whole flush: what storage has is left out, what it lacks is written."""
    apply_config(engine, validate_document(parse_yaml(TWO_CUSTOMERS)))
    with engine.connect() as connection:
        keys = connection.execute(select(t.api_keys.c.id, t.api_keys.c.customer_id)).all()
    dead = UsageJournal(tmp_path, "dead", DB)
    meter = UsageMeter(journal=dead)
    for key_id, customer in keys:
        meter.record(customer, key_id, 31337, "eth_call", Scenario.FIRST_CHOICE, 1000 * customer)
    batch = meter.take()
    first, _ = split_by_customer(batch)
    before = _balances(engine)
    write_usage(engine, first.rows, first.spend, reference=f"usage:dead:{batch.sequence}")
    os.close(dead._fd)  # killed before the second part was written

    def write(flush: ReplayedFlush) -> None:
        write_usage(engine, flush.rows, flush.spend, reference=flush.reference)

    assert _replay(tmp_path, write) == 1
    after = _balances(engine)
    assert {c: before[c] - after[c] for c in before} == {c: 1000 * c for _, c in keys}
    with engine.connect() as connection:
        calls = connection.execute(select(func.sum(t.usage_aggregates.c.request_count))).scalar()
    assert calls == 2


_DAY_S = 86_400


def test_a_flush_taken_before_storage_forgets_its_marks_is_set_aside_not_counted_again(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Storage tells a flush it has by its marks, kept FLUSH_MARK_RETENTION. A journal replayed
    later than that (a disk re-attached after a week) cannot know whether its flushes reached
    storage: a free call has no ledger row to guard it and would be counted twice, a charged
    one would be refused by the ledger's reference at every start. Such a flush is not written:
    the journal is set aside and an operator told; rows never taken are still written."""
    apply_config(engine, validate_document(parse_yaml(TWO_CUSTOMERS)))
    with engine.connect() as connection:
        (key_id, customer), _ = connection.execute(
            select(t.api_keys.c.id, t.api_keys.c.customer_id).order_by(t.api_keys.c.id)
        ).all()
    dead = UsageJournal(tmp_path, "dead", DB)
    meter = UsageMeter(journal=dead)
    meter.record(customer, key_id, 31337, "eth_call", Scenario.CACHE, 0)  # free
    meter.record(customer, key_id, 31337, "eth_call", Scenario.FIRST_CHOICE, 1000)
    flush = meter.take()  # it reached storage; the process died before marking it written
    write_usage(engine, flush.rows, flush.spend, reference=f"usage:dead:{flush.sequence}")
    meter.record(customer, key_id, 31337, "eth_call", Scenario.FIRST_CHOICE, 1000)  # untaken
    os.close(dead._fd)
    with engine.begin() as connection:  # a week on: storage has let the flush's marks go
        connection.execute(t.usage_flushes.delete())
    before = _balances(engine)
    written: list[ReplayedFlush] = []

    def write(flush: ReplayedFlush) -> None:
        write_usage(engine, flush.rows, flush.spend, reference=flush.reference)
        written.append(flush)

    assert _replay(tmp_path, write, now=time.time() + 8 * _DAY_S) == 1
    assert [f.sequence for f in written] == [2]  # only the rows never taken
    assert before[customer] - _balances(engine)[customer] == 1000
    with engine.connect() as connection:
        calls = dict(
            connection.execute(
                select(
                    t.usage_aggregates.c.scenario, func.sum(t.usage_aggregates.c.request_count)
                ).group_by(t.usage_aggregates.c.scenario)
            ).all()
        )
    assert calls == {"cache": 1, "first_choice": 2}  # the free call once, not twice
    assert not (tmp_path / "dead.journal").exists()
    assert (tmp_path / "dead.journal.stale").exists()
    assert "usage:dead:1" in caplog.text
    assert "set aside" in caplog.text
    assert _replay(tmp_path, write) == 0  # set aside: not tried again at every start


def test_a_take_written_before_takes_had_their_time_is_dated_by_the_files_last_change(
    tmp_path: Path,
) -> None:
    lines = [b'{"db":"%s"}' % DB.encode(), _row_line(_key(), 10), b'{"t":1}']
    for name, age_s in (("recent", _DAY_S), ("old", 8 * _DAY_S)):
        path = tmp_path / f"{name}.journal"
        path.write_bytes(b"\n".join(lines) + b"\n")
        os.utime(path, (time.time() - age_s, time.time() - age_s))
    found: list[ReplayedFlush] = []
    assert _replay(tmp_path, found.append) == 1
    assert [f.reference for f in found] == ["usage:recent:1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.journal.stale"]


def _balances(engine: Engine) -> dict[int, int]:
    with engine.connect() as connection:
        return dict(connection.execute(select(t.customers.c.id, t.customers.c.balance_nano)).all())


def test_a_journal_is_locked_while_its_router_lives(tmp_path: Path) -> None:
    journal = UsageJournal(tmp_path, "r1", DB)
    fd = os.open(tmp_path / "r1.journal", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
        journal.close(remove=True)


@pytest.mark.parametrize("server", ["python", "native"])
def test_kill_9_loses_no_served_usage_and_charges_nothing_twice(
    tmp_path: Path, anvil: AnvilNodes, server: str
) -> None:
    """A router killed with SIGKILL under load, long before its next flush: at its next start
    every call the nodes served is charged once."""
    first = start_router(tmp_path, anvil, server)
    engine = create_database_engine(first.database_url)
    try:
        with engine.connect() as connection:
            before = connection.execute(select(func.sum(t.customers.c.balance_nano))).scalar_one()
        served = 0
        with httpx.Client(timeout=10) as client:
            for _ in range(40):
                answer = client.post(first.url(), json=rpc("eth_getBalance", [ACCOUNT, "latest"]))
                served += answer.status_code == 200 and "result" in answer.json()
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
        assert served == 40
        with engine.connect() as connection:
            unchanged = connection.execute(
                select(func.sum(t.customers.c.balance_nano))
            ).scalar_one()
        assert unchanged == before  # the flush interval is 300 s: nothing was written yet
        second = start_router(tmp_path, anvil, server)  # replays the journal as it starts
        try:
            with engine.connect() as connection:
                after = connection.execute(
                    select(func.sum(t.customers.c.balance_nano))
                ).scalar_one()
                calls = connection.execute(
                    select(func.sum(t.usage_aggregates.c.request_count)).where(
                        t.usage_aggregates.c.method == "eth_getBalance"
                    )
                ).scalar_one()
                charged = _charged_by_plan(connection, served)
            assert before - after == charged
            assert calls == served
            assert list((tmp_path / "var" / "usage-journal").glob("*.journal")) != []  # its own
        finally:
            second.process.send_signal(signal.SIGTERM)
            assert second.process.wait(30) == 0
        time.sleep(0.1)
        assert list((tmp_path / "var" / "usage-journal").glob("*.journal")) == []
        with engine.connect() as connection:
            final = connection.execute(select(func.sum(t.customers.c.balance_nano))).scalar_one()
        assert final == after  # the graceful stop wrote nothing more, nothing twice
    finally:
        engine.dispose()


def test_a_journal_directory_that_cannot_be_written_does_not_stop_the_router(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from chainrouter.router.runtime import build_runtime
    from chainrouter.settings import Settings
    from chainrouter.stores.sql import migrate

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    database_url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    settings = Settings(database_url=database_url, usage_journal_dir=str(blocked / "journal"))
    runtime = build_runtime(settings, engine)
    assert runtime.service.snapshot is not None
    assert "usage journal unavailable" in caplog.text
    engine.dispose()


def test_two_routers_on_postgresql_and_redis_killed_lose_no_charge_and_charge_none_twice(
    tmp_path: Path, anvil: AnvilNodes, postgresql_database_url: str
) -> None:
    """Two routers sharing one PostgreSQL database and one Redis, as routers that share load do,
    both served calls at once and were killed with SIGKILL before their next flush: when they
    start again, each replays its own journal, and every call either served is charged once."""
    # Not coalesced: every call is to reach a node, and be charged its price (coalescing and its
    # bills: tests/router/test_coalescing.py).
    # A Redis of its own: the routers share keys' heads through it, and a test beside it with
    # key 1 of its own database must not see them.
    redis = PrivateRedis()
    shared = {"CHAINROUTER_REDIS_URL": redis.url, "CHAINROUTER_COALESCE": "false"}
    first = start_router_on(tmp_path / "one", anvil, "native", postgresql_database_url, **shared)
    second = start_router(tmp_path / "two", anvil, "python", beside=first, **shared)
    engine = create_database_engine(postgresql_database_url)
    try:
        balance = select(func.sum(t.customers.c.balance_nano))
        with engine.connect() as connection:
            before = connection.execute(balance).scalar_one()

        def load(router: Served) -> int:
            served = 0
            with httpx.Client(timeout=10) as client:
                for _ in range(30):
                    body = rpc("eth_getBalance", [ACCOUNT, "latest"])
                    answer = client.post(router.url(), json=body)
                    served += answer.status_code == 200 and "result" in answer.json()
            return served

        with ThreadPoolExecutor(4) as pool:
            served = sum(pool.map(load, [first, second, first, second]))
        for router in (first, second):
            router.process.send_signal(signal.SIGKILL)
            router.process.wait(10)
        assert served == 120
        with engine.connect() as connection:
            assert connection.execute(balance).scalar_one() == before  # nothing written yet
        again = [
            start_router(tmp_path / "one", anvil, "native", beside=first, **shared),
            start_router(tmp_path / "two", anvil, "python", beside=first, **shared),
        ]
        try:
            with engine.connect() as connection:
                after = connection.execute(balance).scalar_one()
                calls = connection.execute(
                    select(func.sum(t.usage_aggregates.c.request_count)).where(
                        t.usage_aggregates.c.method == "eth_getBalance"
                    )
                ).scalar_one()
                charged = _charged_by_plan(connection, served)
            assert before - after == charged
            assert calls == served
        finally:
            for router in again:
                router.process.send_signal(signal.SIGTERM)
                assert router.process.wait(30) == 0
        with engine.connect() as connection:
            assert connection.execute(balance).scalar_one() == after  # nothing more, nothing twice
    finally:
        engine.dispose()
        redis.stop()
