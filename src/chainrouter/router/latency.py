"""Each node's recent latency, and what the router derives from it: when to hedge an attempt,
how long to give one, and when a node that keeps being overtaken is cooled down (docs/router.md,
"Tail latency").

A node's latency is kept per kind of work (`Work`): an `eth_call` and an `eth_blockNumber` of the
same node take different times, and a hedge timed by the one would fire on nearly every other.
Each (node, work) keeps its last `WINDOW` answer times; quantiles are read from a sorted copy,
re-sorted only after `RESORT_EVERY` new samples, so that the request path pays an append.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from chainrouter.domain.requirements import Work

WINDOW = 64  # the last answers of each node and kind of work
MIN_SAMPLES = 8  # fewer: the latency is unknown (`estimate` says what stands in for it)
RESORT_EVERY = 8
OVERTAKEN_STRIKES = 3  # overtaken this often in a row, with no answer between: cooled down


@dataclass(frozen=True, slots=True)
class TailPolicy:
    """How one chain's calls are hedged and timed out (settings: `CHAINROUTER_HEDGE_*`,
    `CHAINROUTER_ADAPTIVE_TIMEOUT_*`, per chain `CHAINROUTER_CHAIN_TAIL`)."""

    hedge_max: int = 2  # further attempts in flight beside the first; 0: never hedge
    hedge_quantile: float = 0.95  # of the node's recent answers, for its kind of call
    hedge_floor_s: float = 0.002
    hedge_ceiling_s: float = 1.0
    timeout_multiplier: float = 10.0  # a quick call's time-out: this times the node's p99
    timeout_floor_s: float = 1.0
    timeout_ceiling_s: float = 10.0  # every other call's time-out (the upstream time-out)


# Hedged: reads. Never a write (it would be sent twice), nor a method the router does not know
# (it may be one).
HEDGED_WORK = frozenset({Work.QUICK, Work.EXECUTES, Work.RANGE, Work.TRACE})


class TailPolicies:
    """The policy of each chain: the configured default, or the chain's own."""

    def __init__(self, default: TailPolicy, by_chain: dict[int, TailPolicy] | None = None) -> None:
        self.default = default
        self._by_chain = dict(by_chain or {})

    def policy(self, chain_id: int) -> TailPolicy:
        return self._by_chain.get(chain_id, self.default)


class _Window:
    __slots__ = ("count", "next", "samples", "since_sorted", "sorted")

    def __init__(self) -> None:
        self.samples = [0.0] * WINDOW
        self.next = 0
        self.count = 0
        self.since_sorted = 0
        self.sorted: list[float] = []

    def add(self, seconds: float) -> None:
        self.samples[self.next] = seconds
        self.next = (self.next + 1) % WINDOW
        if self.count < WINDOW:
            self.count += 1
        self.since_sorted += 1

    def quantile(self, q: float) -> float | None:
        if self.count < MIN_SAMPLES:
            return None
        if self.since_sorted >= RESORT_EVERY or len(self.sorted) != self.count:
            self.sorted = sorted(self.samples[: self.count])
            self.since_sorted = 0
        ordered = self.sorted
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


class RecentLatency:
    """The recent answer times of every node, by kind of work, and their overtaken strikes."""

    def __init__(self) -> None:
        self._windows: dict[tuple[int, Work], _Window] = {}
        self._strikes: dict[int, int] = {}

    def observe(self, node_id: int, work: Work, seconds: float) -> None:
        """A node answered a call of this kind in `seconds`."""
        key = (node_id, work)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window()
        window.add(seconds)
        if self._strikes:
            self._strikes.pop(node_id, None)

    def observe_all(self, node_id: int, work: Work, times: list[float]) -> None:
        """`observe` for each of `times`, in order."""
        key = (node_id, work)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window()
        add = window.add
        for seconds in times:
            add(seconds)
        if self._strikes:
            self._strikes.pop(node_id, None)

    def quantile(self, node_id: int, work: Work, q: float) -> float | None:
        """The q-quantile of the node's recent answer times for this work; None: too few."""
        window = self._windows.get((node_id, work))
        return None if window is None else window.quantile(q)

    def estimate(
        self,
        node_id: int,
        work: Work,
        q: float,
        peers: Sequence[int],
        smoothed_ms: Mapping[int, float] | None = None,
    ) -> float | None:
        """The node's q-quantile for this work, in seconds; where it is unknown (a new node, or
        one that never answers: a hung node), the quickest q-quantile known among `peers` (the
        call's other routes), else, when `smoothed_ms` is given, the quickest smoothed latency
        (quick calls and health checks) of the node or its peers; None when nothing is known (a
        router just started)."""
        own = self.quantile(node_id, work, q)
        if own is not None:
            return own
        known = [k for p in peers if (k := self.quantile(p, work, q)) is not None]
        if known:
            return min(known)
        if smoothed_ms is None:
            return None
        smoothed = [smoothed_ms[n] for n in (node_id, *peers) if n in smoothed_ms]
        return min(smoothed) / 1000 if smoothed else None

    def hedge_delays(self, node_ids: Sequence[int], work: Work, policy: TailPolicy) -> list[float]:
        """When each of a race's attempts starts: the first at once, the next ones one hedge
        delay apart, the delay being the first node's (its quantile for this work at the
        policy's, within floor and ceiling; one look-up on the request path). A first node
        never seen to answer is given the quickest median among the others: nothing says it
        will answer at all. With no answer known (a router just started), the floor, not the
        health checks' latency, whose first samples carry a new connection: a needless hedge
        costs one more call to a node; a late one costs the caller the wait."""
        floor = policy.hedge_floor_s
        window = self._windows.get((node_ids[0], work))
        known = None if window is None else window.quantile(policy.hedge_quantile)
        if known is None:
            known = self.estimate(node_ids[0], work, 0.5, node_ids[1:])
        delay = floor if known is None else min(max(known, floor), policy.hedge_ceiling_s)
        return [delay * lane for lane in range(len(node_ids))]

    def timeout(
        self,
        node_id: int,
        work: Work,
        policy: TailPolicy,
        peers: Callable[[], Sequence[int]],
        smoothed_ms: Mapping[int, float],
    ) -> float:
        """How long an attempt on this node may take: for quick calls, whose time is the node's,
        `timeout_multiplier` times its p99 (`estimate`), within floor and ceiling; for the
        others, whose time is the call's, and while nothing is known, the ceiling. A time-out
        too short would fail calls; one too long only keeps a connection."""
        if work is not Work.QUICK:
            return policy.timeout_ceiling_s
        window = self._windows.get((node_id, work))
        p99 = None if window is None else window.quantile(0.99)
        if p99 is None:  # the peers are read only now: the request path rarely gets here
            p99 = self.estimate(node_id, work, 0.99, peers(), smoothed_ms)
        if p99 is None:
            return policy.timeout_ceiling_s
        adapted = max(policy.timeout_multiplier * p99, policy.timeout_floor_s)
        return min(adapted, policy.timeout_ceiling_s)

    def usual(self, node_id: int, work: Work, seconds: float) -> bool:
        """Whether `seconds` is within the node's usual time for this work (its p99); unknown
        latency: not usual, which keeps the overtaken rule from judging anyone."""
        p99 = self.quantile(node_id, work, 0.99)
        return p99 is not None and seconds <= p99

    def overtaken(self, node_id: int) -> bool:
        """Count one overtaking of this node; True (and the count restarted) when it has been
        overtaken `OVERTAKEN_STRIKES` times with no answer between: time to cool it down."""
        strikes = self._strikes.get(node_id, 0) + 1
        if strikes >= OVERTAKEN_STRIKES:
            self._strikes.pop(node_id, None)
            return True
        self._strikes[node_id] = strikes
        return False

    def forget_except(self, node_ids: set[int]) -> None:
        """Drop what is known of nodes no longer configured."""
        for key in [key for key in self._windows if key[0] not in node_ids]:
            del self._windows[key]
        for node_id in [n for n in self._strikes if n not in node_ids]:
            del self._strikes[node_id]
