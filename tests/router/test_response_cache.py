"""The response cache's parts on their own: the in-process store bounded in bytes, the chains'
finality, the calls in flight (router/response_cache.py, finality.py, flights.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.enums import Scenario
from chainrouter.domain.verification import Verified
from chainrouter.router.contract import Landed
from chainrouter.router.finality import Finality
from chainrouter.router.flights import FlightLeader, FlightTable
from chainrouter.router.memory_cache import ENTRY_OVERHEAD, MemoryCache
from chainrouter.router.response_cache import ResponseCache, entry, read_entry


def _key(chain: int, n: int, method: str = "eth_getBalance") -> str:
    return f"{chain}:0:{method}:{n:040x}"


@given(sizes=st.lists(st.integers(1, 3000), max_size=80), bound=st.integers(0, 40_000))
def test_the_store_never_holds_more_bytes_than_its_bound(sizes: list[int], bound: int) -> None:
    memory = MemoryCache(bound)
    kept: dict[str, bytes] = {}
    for n, size in enumerate(sizes):
        value = bytes([n % 256]) * size
        memory.put(_key(1, n), value)
        kept[_key(1, n)] = value
        assert memory.size_bytes <= bound
        held = memory.keys()
        assert memory.size_bytes == sum(len(kept[k]) + ENTRY_OVERHEAD for k in held)
        assert memory.size_bytes == sum(memory.bytes_by.values())
        # Whatever is still held is what was put under its key, never another answer's bytes.
        assert all(memory.get(key) == kept[key] for key in held)


def test_the_newest_answers_stay_and_the_oldest_are_counted_out() -> None:
    memory = MemoryCache(4 * 1000)  # a ring of 3,000 bytes
    for n in range(6):
        memory.put(_key(1, n), bytes(900))
    assert [memory.get(_key(1, n)) is not None for n in range(6)] == [False] * 3 + [True] * 3
    assert memory.evictions == {(1, "eth_getBalance"): 3}


def test_an_answer_in_use_is_not_written_over() -> None:
    memory = MemoryCache(4 * 1000)
    for n in range(3):
        memory.put(_key(1, n), bytes(900))
    memory.put(_key(1, 3), bytes(900))  # over 0: the next to go is 1
    assert memory.get(_key(1, 1)) is not None  # read as the writing nears it: to the front
    memory.put(_key(1, 4), bytes(900))
    assert memory.get(_key(1, 1)) is not None
    assert memory.get(_key(1, 2)) is None


def test_an_answer_larger_than_half_the_cache_is_kept_nowhere() -> None:
    memory = MemoryCache(1000)
    memory.put(_key(1, 0), b"x" * 400)
    assert len(memory) == 0
    assert memory.size_bytes == 0


def test_a_purge_drops_one_chains_answers_only() -> None:
    cache = ResponseCache(MemoryCache(1 << 20))
    for chain in (1, 10, 100):
        cache.keep(_key(chain, 0), b"0x1")
    assert cache.purge(10) == 1
    assert [cache.memory.get(_key(c, 0)) for c in (1, 10, 100)] == [b"0x1", None, b"0x1"]
    assert set(cache.memory.bytes_by) == {(1, "eth_getBalance"), (100, "eth_getBalance")}


def test_finality_is_the_median_of_the_nodes_tags_else_a_depth_behind_the_head() -> None:
    heads = {1: 1000, 2: 50}
    finality = Finality(heads.get, depth=64, depths={2: 10})
    assert finality.finalized(1) == 936
    assert finality.finalized(2) == 40
    assert finality.finalized(3) is None  # no head known
    finality.report(1, node_id=7, finalized=900)
    finality.report(1, node_id=8, finalized=990)  # ahead of the others, or lying
    finality.report(1, node_id=9, finalized=901)
    assert finality.finalized(1) == 901
    finality.report(1, node_id=9, finalized=None)  # a failed check: its last answer stands
    assert finality.finalized(1) == 901
    finality.forget(1, 8)
    assert finality.finalized(1) == 900
    finality.forget(1, 7)
    finality.forget(1, 9)
    assert finality.finalized(1) == 936  # no node answers the tag: the depth


def test_nodes_coming_going_or_failing_a_check_are_not_a_regress() -> None:
    """Only a node answering a lower finalized block than it did before can take a chain's
    finality back; churn moves the median without dropping what was kept (in Redis too)."""
    dropped: list[int] = []
    finality = Finality({1: 2000}.get, depth=64, on_regress=dropped.append)
    finality.report(1, 1, 1000)
    finality.report(1, 2, 1000)
    finality.report(1, 2, 1032)
    finality.report(1, 1, None)  # one check failed
    finality.report(1, 1, 1000)
    finality.report(1, 3, 500)  # a lagging node joins
    finality.forget(1, 2)  # the node ahead leaves
    single = Finality({2: 2000}.get, depth=64, on_regress=dropped.append)
    single.report(2, 1, 1036)
    single.report(2, 1, None)  # a chain's one node fails a check: not head - depth
    assert single.finalized(2) == 1036
    assert (dropped, finality.epoch(1), single.epoch(2)) == ([], 0, 0)
    assert finality.finalized(1) == 500  # what is kept from now on follows the median


def test_finality_going_backwards_has_the_chains_answers_dropped_and_its_keys_changed() -> None:
    dropped: list[int] = []
    finality = Finality({1: 1000}.get, depth=64, on_regress=dropped.append)
    finality.report(1, 7, 900)
    finality.report(1, 7, 950)
    assert (dropped, finality.epoch(1)) == ([], 0)
    finality.report(1, 7, 940)
    assert (dropped, finality.epoch(1), finality.epoch(2)) == ([1], 1, 0)


def test_a_call_joins_a_flight_of_its_key_and_takes_what_lands() -> None:
    flights = FlightTable()
    leader = flights.board("k")
    follower = flights.board("k")
    assert isinstance(leader, FlightLeader)
    assert isinstance(follower, concurrent.futures.Future)
    assert flights.board("other") is not None
    assert len(flights) == 2
    landed = Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x1"')
    leader.land(landed)
    assert follower.result(0) is landed
    assert len(flights) == 1, "only the other key's"
    assert isinstance(flights.board("k"), FlightLeader)  # the landed flight is gone


def test_a_leader_cut_short_sends_its_followers_on_their_own() -> None:
    flights = FlightTable()
    leader = flights.board("k")
    follower = flights.board("k")
    assert isinstance(leader, FlightLeader)
    assert isinstance(follower, concurrent.futures.Future)
    leader.land(None)
    assert follower.result(0) is None
    leader.land(Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x1"'))  # twice: harmless
    assert follower.result(0) is None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30), st.integers(1, 1500)),
        st.tuples(st.just("get"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("purge"), st.integers(1, 3), st.just(0)),
    ),
    max_size=120,
)


@given(steps=operations, bound=st.integers(1_500, 12_000))
def test_whatever_is_put_read_and_purged_an_answer_read_is_the_one_put_under_its_key(
    steps: list[tuple[str, int, int]], bound: int
) -> None:
    """The ring is written over, refreshed and purged in any order: a read never returns bytes
    of another answer, or of an older one of the same key, and the counts stay exact."""
    memory = MemoryCache(bound)
    latest: dict[str, bytes] = {}
    for step, (what, n, size) in enumerate(steps):
        key = _key(n % 3 + 1, n)
        if what == "put":
            value = bytes([step % 251, n]) * (size // 2 + 1)
            memory.put(key, value)
            latest[key] = value
        elif what == "get":
            found = memory.get(key)
            assert found is None or found == latest[key]
        else:
            memory.purge(n)
            latest = {k: v for k, v in latest.items() if not k.startswith(f"{n}:")}
        held = memory.keys()
        assert all(memory.get(k) == latest[k] for k in held)
        assert memory.size_bytes == sum(len(latest[k]) + ENTRY_OVERHEAD for k in held)
        assert memory.size_bytes == sum(memory.bytes_by.values()) <= bound


@pytest.mark.anyio
async def test_a_joined_call_cancelled_while_it_waits_cancels_no_one_elses_wait() -> None:
    """asyncio passes a cancellation on to the future it wraps: the flight's outcome must
    refuse it, or every other call waiting on it would be cancelled too."""
    flights = FlightTable()
    leader = flights.board("k")
    outcome = flights.board("k")
    assert isinstance(leader, FlightLeader)
    assert isinstance(outcome, concurrent.futures.Future)
    gone = asyncio.ensure_future(asyncio.wrap_future(outcome))
    staying = asyncio.ensure_future(asyncio.wrap_future(outcome))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    assert not outcome.cancelled()
    landed = Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x1"')
    leader.land(landed)
    assert await staying is landed
    leader.land(None)  # landing twice is harmless


@given(
    result=st.sampled_from([b'"0x2a"', b"null", b"[]", b'{"a":1}', b"true", b"12"]),
    verified=st.sampled_from([None, *Verified]),
)
def test_an_entry_reads_back_as_the_answer_kept_and_how_it_was_verified(
    result: bytes, verified: Verified | None
) -> None:
    stored = entry(result, verified)
    assert read_entry(stored) == (result, verified)
    # Kept in memory as it is stored: the mark travels with the answer.
    memory = MemoryCache(1 << 16)
    memory.put(_key(1, 1), stored)
    found = memory.get(_key(1, 1))
    assert found is not None
    assert read_entry(found) == (result, verified)


def test_an_entry_kept_before_entries_were_marked_reads_as_unverified() -> None:
    """Redis may hold entries of routers before the mark: JSON text, which begins with neither
    mark's byte."""
    for old in (b'"0x2a"', b"null", b'{"hash":"0x01"}', b"[1]", b" 1", b"\t[]"):
        assert read_entry(old) == (old, None)
