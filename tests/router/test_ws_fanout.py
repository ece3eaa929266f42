"""What each subscriber of a chain feed gets (router/ws/fanout.py): every head to `newHeads`
subscribers, each matching log to `logs` subscribers, orphaned logs again with `removed: true`;
a subscriber whose queue is full is named so that its client alone is closed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.router.ws.fanout import Fanout, Subscription
from chainrouter.router.ws.heads import Head
from chainrouter.router.ws.protocol import LogFilter, SubscriptionKind

A1, A2 = "0x" + "aa" * 20, "0x" + "bb" * 20
T1 = "0x" + "11" * 32


@dataclass(eq=False)
class Queue:
    room: int = 100
    got: list[dict[str, object]] = field(default_factory=list)

    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        if len(self.got) >= self.room:
            return False
        self.got.append(json.loads(message))
        return True

    def too_slow(self) -> None:
        raise AssertionError("the feed closes a client, never the fan-out")


def _results(queue: Queue) -> list[object]:
    return [m["params"]["result"] for m in queue.got]  # type: ignore[index]


def test_heads_go_to_every_heads_subscriber_under_its_own_id() -> None:
    fanout = Fanout()
    first, second = Queue(), Queue()
    fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, first))
    fanout.add(Subscription("0x2", SubscriptionKind.NEW_HEADS, second))
    heads = [
        Head(n, f"0x{n}", f"0x{n - 1}", json.dumps({"number": hex(n)}).encode()) for n in (5, 6)
    ]
    assert fanout.heads(heads) == []
    assert _results(first) == [{"number": "0x5"}, {"number": "0x6"}]
    assert [m["params"]["subscription"] for m in second.got] == ["0x2", "0x2"]  # type: ignore[index]
    assert first.got[0]["method"] == "eth_subscription"


def test_logs_go_to_the_subscribers_whose_filter_matches_and_orphans_come_back_removed() -> None:
    fanout = Fanout()
    mine, everything = Queue(), Queue()
    fanout.add(Subscription("0xa", SubscriptionKind.LOGS, mine, LogFilter(frozenset({A1}))))
    fanout.add(Subscription("0xb", SubscriptionKind.LOGS, everything, LogFilter()))
    logs = [
        {"address": A1, "topics": [T1], "logIndex": "0x0", "removed": False},
        {"address": A2, "topics": [], "logIndex": "0x1", "removed": False},
    ]
    fanout.logs(logs)
    fanout.logs(logs[:1], removed=True)
    assert _results(mine) == [logs[0], {**logs[0], "removed": True}]
    assert len(everything.got) == 3


def test_a_full_queue_is_named_and_the_others_still_get_theirs() -> None:
    fanout = Fanout()
    full, fine = Queue(room=0), Queue()
    fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, full))
    fanout.add(Subscription("0x2", SubscriptionKind.NEW_HEADS, fine))
    assert fanout.heads([Head(1, "0x1", "0x0", b"{}")]) == [full]
    assert len(fine.got) == 1
    assert [s.subscription_id for s in fanout.remove_sink(full)] == ["0x1"]
    assert len(fanout) == 1


def test_unsubscribing_stops_the_messages_and_says_whether_there_was_one() -> None:
    fanout = Fanout()
    queue = Queue()
    fanout.add(Subscription("0x1", SubscriptionKind.NEW_PENDING_TRANSACTIONS, queue))
    assert fanout.wants(SubscriptionKind.NEW_PENDING_TRANSACTIONS)
    fanout.pending(b'"0xabc"')
    assert fanout.remove("0x1") is not None
    assert fanout.remove("0x1") is None
    fanout.pending(b'"0xdef"')
    assert _results(queue) == ["0xabc"]
    assert not fanout.wants(SubscriptionKind.NEW_PENDING_TRANSACTIONS)


_ADDRESSES = [A1, A2, "0x" + "cc" * 20]
_TOPICS = [T1, "0x" + "22" * 32]


@settings(max_examples=80, deadline=None)
@given(
    filters=st.lists(
        st.tuples(
            st.none() | st.frozensets(st.sampled_from(_ADDRESSES), min_size=1),
            st.lists(st.none() | st.frozensets(st.sampled_from(_TOPICS), min_size=1), max_size=2),
        ),
        max_size=8,
    ),
    removed=st.sets(st.integers(0, 7)),
    logs=st.lists(
        st.tuples(
            st.sampled_from([*_ADDRESSES, A1.upper().replace("0X", "0x")]),
            st.lists(st.sampled_from(_TOPICS), max_size=2),
        ),
        max_size=6,
    ),
)
def test_a_log_reaches_exactly_the_subscribers_whose_filter_matches_it_whatever_the_index(
    filters: list[tuple[frozenset[str] | None, list[frozenset[str] | None]]],
    removed: set[int],
    logs: list[tuple[str, list[str]]],
) -> None:
    """Logs are matched through an index by address; each subscriber still gets, in order,
    exactly the logs its filter matches, after any subscriptions came and went."""
    fanout = Fanout()
    queues = [Queue() for _ in filters]
    held: list[tuple[LogFilter, Queue]] = []
    for n, ((addresses, topics), queue) in enumerate(zip(filters, queues, strict=True)):
        log_filter = LogFilter(addresses, tuple(topics))
        fanout.add(Subscription(f"0x{n}", SubscriptionKind.LOGS, queue, log_filter))
        if n in removed:
            fanout.remove(f"0x{n}")
        else:
            held.append((log_filter, queue))
    given_logs = [{"address": address, "topics": topics} for address, topics in logs]
    fanout.logs(given_logs)
    for log_filter, queue in held:
        assert _results(queue) == [log for log in given_logs if log_filter.matches(log)]
    assert all(not queue.got for n, queue in enumerate(queues) if n in removed)
