"""The response cache's parts on their own: the in-process store bounded in bytes, the chains'
finality, the calls in flight (router/response_cache.py, finality.py, flights.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.enums import Scenario
from chainrouter.router.finality import Finality
from chainrouter.router.flights import Flights, Landed
from chainrouter.router.response_cache import ENTRY_OVERHEAD, MemoryCache, ResponseCache


def _key(chain: int, n: int, method: str = "eth_getBalance") -> str:
    return f"{chain}:0:{method}:{n:040x}"


@given(sizes=st.lists(st.integers(0, 3000), max_size=60), bound=st.integers(0, 20_000))
def test_the_store_never_holds_more_bytes_than_its_bound(sizes: list[int], bound: int) -> None:
    memory = MemoryCache(bound)
    for n, size in enumerate(sizes):
        memory.put(_key(1, n), b"x" * size)
        assert memory.size_bytes <= bound
        held = sum(len(_key(1, i)) + len(v) + ENTRY_OVERHEAD for i, v in _entries(memory))
        assert memory.size_bytes == held == sum(memory.bytes_by.values())


def _entries(memory: MemoryCache) -> list[tuple[int, bytes]]:
    return [(int(k.rsplit(":", 1)[1], 16), v) for k, v in memory._entries.items()]


def test_the_least_recently_used_answer_goes_first_and_is_counted() -> None:
    entry = len(_key(1, 0)) + 10 + ENTRY_OVERHEAD
    memory = MemoryCache(3 * entry)
    for n in range(3):
        memory.put(_key(1, n), b"0123456789")
    assert memory.get(_key(1, 0)) is not None  # used: now the most recent
    memory.put(_key(1, 3), b"0123456789")
    assert memory.get(_key(1, 1)) is None
    assert [memory.get(_key(1, n)) is not None for n in (0, 2, 3)] == [True] * 3
    assert memory.evictions == {(1, "eth_getBalance"): 1}


def test_an_answer_larger_than_the_whole_cache_is_kept_nowhere() -> None:
    memory = MemoryCache(100)
    memory.put(_key(1, 0), b"x" * 100)
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
    finality.report(1, node_id=9, finalized=None)  # stopped answering the tag
    finality.forget(1, 8)
    assert finality.finalized(1) == 900
    finality.forget(1, 7)
    assert finality.finalized(1) == 936


def test_finality_going_backwards_has_the_chains_answers_dropped() -> None:
    dropped: list[int] = []
    finality = Finality({1: 1000}.get, depth=64, on_regress=dropped.append)
    finality.report(1, 7, 900)
    finality.report(1, 7, 950)
    assert dropped == []
    finality.report(1, 7, 940)
    assert dropped == [1]


def test_a_call_joins_a_flight_of_its_key_and_takes_what_lands() -> None:
    flights = Flights()
    leader, leads = flights.lead_or_join("k", None, at_head=False)
    follower, joins_as_leader = flights.lead_or_join("k", None, at_head=False)
    assert (leads, joins_as_leader, follower is leader, leader.followers) == (True, False, True, 1)
    landed = Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x1"')
    flights.land("k", leader, landed)
    assert follower.outcome.result(0) is landed
    assert len(flights) == 0
    _, leads_again = flights.lead_or_join("k", None, at_head=False)
    assert leads_again  # the landed flight is gone: nothing is kept


def test_a_head_read_joins_only_a_leader_that_saw_as_new_a_block() -> None:
    flights = Flights()
    leader, _ = flights.lead_or_join("k", 100, at_head=True)
    assert flights.lead_or_join("k", 100, at_head=True)[0] is leader
    assert flights.lead_or_join("k", None, at_head=True)[0] is leader
    newer, leads = flights.lead_or_join("k", 101, at_head=True)
    assert leads
    assert newer is not leader
    flights.land("k", leader, None)  # cut short: its followers go on their own
    assert leader.outcome.result(0) is None
