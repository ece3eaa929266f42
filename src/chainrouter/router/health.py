"""Node health: head block, chain head, in-sync flag, latency and failures, checked in background.

Each node is asked `eth_blockNumber` about once per `interval_s`; with many nodes the checker
never starts more than `max_per_s` checks a second nor keeps more than `concurrency` in flight,
so a round over 1,940 chains x 3 nodes stretches out rather than flooding the nodes or the router.

A chain's head is the highest head that nodes of at least two providers have reached (the
highest reached where one provider serves the chain), ignoring any report more than
`_IMPLAUSIBLE_LEAD` blocks ahead of the chain's median: no one provider, lying or broken, moves
it (design notes, "Integrity"). Nodes tell their heads at different times (a check every
interval, an answer now and then), so a node's lag is the chain's head less its head less the
blocks the chain has made since it told it (at the chain's block time, learned from its head's
progress): a node is not found behind only for having been checked before the others. A node
more than the chain's `max_block_lag` blocks behind is *lagging*: it serves no call that reads
the head (router/stages/heads.py), but still serves blocks it has. One on another chain, or
implausibly far ahead, is out of sync and serves nothing. Latency is smoothed from health
checks and from the answers to real calls.
A failed check puts the node on cooldown (as a failed call does); a passing one lifts it.

The checker is a program (contract.py) like a request: it sends its probes with `Forward`, paces
itself with `Wait` and starts each check with `Spawn`, so that the executor that serves requests
runs it too (on the native one, on the server's thread, with no lock changing hands).

A check also asks `eth_chainId` when the node is new, has a new URL, failed its last check, or
has not been asked for `_CHAIN_RECHECK_EVERY` checks. Screening asked it once at registration,
but a node can be re-pointed later, and nodes from the operator's file are never screened. A node
that answers another chain's ID gets no traffic (it joins the out-of-sync set, not merely a
cooldown that would lapse) until a check finds the right chain again.

When the response cache is on, a passed check also asks the node its `finalized` block, for the
chain's finality (router/finality.py); a node that does not answer the tag is asked again
`_CHAIN_RECHECK_EVERY` checks later, and not answering it fails nothing.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from chainrouter.domain.requirements import Work
from chainrouter.domain.routing import HealthReport, NodeHealth, NodeInfo
from chainrouter.router import epochs
from chainrouter.router.contract import Failure, Forward, Spawn, Wait
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.epochs import Epochs
from chainrouter.router.finality import Finality
from chainrouter.router.latency import RecentLatency

log = logging.getLogger(__name__)

_PROBE = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
_CHAIN_PROBE = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
_FINALIZED_PROBE = (
    b'{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["finalized",false]}'
)
_CHAIN_RECHECK_EVERY = 20  # checks: about every 5 minutes at the default 15 s interval
_IMPLAUSIBLE_LEAD = 1000
_SMOOTHING = 0.2  # weight of a new latency sample (and of a block time's)
# A chain's block time until its head's progress tells it: short, so that a node is given more
# blocks of grace, not fewer, while it is unknown.
_FIRST_BLOCK_TIME_S = 0.25
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@dataclass(slots=True)
class NodeState:
    head: int | None = None
    told_at: float = 0.0  # monotonic time it last told its head (a check, an answer)
    failures: int = 0  # consecutive failed checks
    checked_at: float | None = None  # monotonic time of the last check
    last_error: str | None = None
    chain_verified_url: str | None = None  # the URL whose chain ID was last found right
    checks_until_chain_check: int = 0
    wrong_chain: bool = False
    checks_until_finality_check: int = 0  # counts down after a node did not answer the tag


class WrongChainError(ValueError):
    """The node answers `eth_chainId` with another chain than the one it is registered for."""


class ProbeError(ValueError):
    """The node gave no usable answer to a probe."""


async def probe(url: str, body: bytes, timeout_s: float) -> bytes:
    """A 2xx answer of the node at `url` to `body`; `ProbeError` otherwise."""
    answer = await Forward(url, body, timeout_s)
    if isinstance(answer, Failure):
        raise ProbeError(f"{answer.kind}: {answer.detail}")
    return answer


def parse_quantity(body: bytes, what: str = "a block number") -> int:
    """The quantity in a JSON-RPC answer (`eth_blockNumber`, `eth_chainId`); ValueError when
    there is none."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError("answer is not JSON") from None
    result = answer.get("result") if isinstance(answer, dict) else None
    digits = result[2:] if isinstance(result, str) and result.startswith("0x") else ""
    if not 0 < len(digits) <= 16 or not all(c in _HEX_DIGITS for c in digits):
        raise ValueError(f"not {what}: {str(result)[:40]!r}")
    return int(digits, 16)


def finalized_number(body: bytes) -> int | None:
    """The block number in an answer to `eth_getBlockByNumber("finalized")`; None when the answer
    holds no block."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    result = answer.get("result") if isinstance(answer, dict) else None
    number = result.get("number") if isinstance(result, dict) else None
    digits = number[2:] if isinstance(number, str) and number.startswith("0x") else ""
    if not 0 < len(digits) <= 16 or not all(c in _HEX_DIGITS for c in digits):
        return None
    return int(digits, 16)


class HealthMonitor:
    def __init__(
        self,
        cooldowns: MemoryCooldowns,
        *,
        interval_s: float,
        max_per_s: float,
        concurrency: int,
        timeout_s: float,
        max_block_lag: int,
        chain_max_block_lag: Mapping[int, int] | None = None,
        epoch_store: Epochs | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cooldowns = cooldowns
        self._clock = clock
        # The router's epochs: raised as a node's health or a chain's heads change.
        self.epochs = epoch_store if epoch_store is not None else Epochs()
        self._interval_s = interval_s
        self._max_per_s = max_per_s
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self.max_block_lag = max_block_lag  # the capability book reads it too
        self._chain_max_block_lag = dict(chain_max_block_lag or {})
        self._states: dict[int, NodeState] = {}
        # What the request path reads, updated in place (never replaced): set and dictionary
        # look-ups, nothing built per call.
        self._out_of_sync: set[int] = set()
        self._lagging: set[int] = set()  # more than their chain's lag behind its head
        self._latency_ms: dict[int, float] = {}  # smoothed; absent: not measured yet
        self._first_check_out: set[int] = set()  # never heard from, their first check in flight
        self._cordoned: set[int] = set()  # out whatever their checks say (router/cordon.py)
        self.recent = RecentLatency()  # by kind of call: for hedges and time-outs
        self._chain_heads: dict[int, int] = {}
        self._chain_moved: dict[int, tuple[int, float]] = {}  # chain -> (head, when it rose)
        self._block_time_s: dict[int, float] = {}  # chain -> seconds a block, smoothed
        self._chain_of: dict[int, int] = {}
        self._provider_of: dict[int, int] = {}
        self._members: dict[int, set[int]] = {}  # chain id -> node ids
        self._unreported: set[int] = set()  # checked since the last `take_reports`
        self._in_flight = 0  # checks started by `run` and not ended
        self._stopping = False
        # Told each node's `finalized` block after each passed check, when set (the cache).
        self.finality: Finality | None = None

    # -- read by the request path ------------------------------------------------------------

    @property
    def out_of_sync(self) -> Set[int]:
        """Nodes known to be out of sync: a live view."""
        return self._out_of_sync

    @property
    def lagging(self) -> Set[int]:
        """Nodes more than their chain's `max_block_lag` behind its head when they last told
        their head: a live view."""
        return self._lagging

    def max_lag(self, chain_id: int) -> int:
        """Blocks a node of the chain may be behind its head and still serve reads of the head."""
        return self._chain_max_block_lag.get(chain_id, self.max_block_lag)

    @property
    def latency_ms(self) -> Mapping[int, float]:
        """Smoothed latency per measured node: a live view."""
        return self._latency_ms

    @property
    def first_check_out(self) -> Set[int]:
        """Nodes never heard from whose first health check is in flight (a router that has just
        started, a node just added; a hung node's stays out until its time-out): a live view."""
        return self._first_check_out

    def health(self, node_id: int) -> NodeHealth:
        """One node's health as a record (for callers outside the request path)."""
        in_sync = node_id not in self._out_of_sync and node_id not in self._lagging
        return NodeHealth(in_sync, self._latency_ms.get(node_id))

    def chain_head(self, chain_id: int) -> int | None:
        return self._chain_heads.get(chain_id)

    def node_head(self, node_id: int) -> int | None:
        """The head the node reported at its last passed check."""
        state = self._states.get(node_id)
        return None if state is None else state.head

    def state(self, node_id: int) -> NodeState | None:
        return self._states.get(node_id)

    def observe_latency(self, node_id: int, latency_ms: float) -> None:
        """Fold in a measured latency; called on every served call as well as by checks."""
        previous = self._latency_ms.get(node_id)
        self._latency_ms[node_id] = (
            latency_ms if previous is None else previous + _SMOOTHING * (latency_ms - previous)
        )

    def observe_answer(self, node_id: int, work: Work, seconds: float) -> None:
        """A node answered a call of this kind in `seconds`: into its recent record for that
        work (hedges and time-outs) and, for a quick look-up, whose time is the node's, its
        smoothed latency (the `performance` order). A heavy call's time is the caller's: it must
        not move other customers' calls off the node."""
        if work is Work.QUICK:
            self.observe_latency(node_id, seconds * 1000)
        self.recent.observe(node_id, work, seconds)

    def observe_answers(self, node_id: int, work: Work, times: list[float]) -> None:
        """`observe_answer` for each of `times`, in order (repeated forwards, in groups)."""
        if work is Work.QUICK:
            latency = self._latency_ms.get(node_id)
            for seconds in times:
                ms = seconds * 1000
                latency = ms if latency is None else latency + _SMOOTHING * (ms - latency)
            if latency is not None:
                self._latency_ms[node_id] = latency
        self.recent.observe_all(node_id, work, times)

    # -- checking ----------------------------------------------------------------------------

    async def check(self, node: NodeInfo) -> None:
        state = self._state_of(node)
        first = state.checked_at is None and node.node_id not in self._latency_ms
        if first:
            self._first_check_out.add(node.node_id)
            self._changed(node.node_id)
        try:
            await self._check(node, state)
        finally:
            if first:
                self._first_check_out.discard(node.node_id)
                self._changed(node.node_id)

    async def _check(self, node: NodeInfo, state: NodeState) -> None:
        started = time.monotonic()
        try:
            if self._chain_check_due(node, state):
                await self._verify_chain(node, state)
                started = time.monotonic()  # the latency sample is the block-number call's
            head = parse_quantity(await probe(node.url, _PROBE, self._timeout_s))
        except ValueError as exc:
            state.failures += 1
            state.last_error = str(exc)
            state.checked_at = time.monotonic()
            self.cooldowns.failed(node.node_id)
            self._unreported.add(node.node_id)
            if isinstance(exc, WrongChainError):
                if not state.wrong_chain and self.finality is not None:
                    self.finality.distrust(node.chain_id, node.node_id)  # its answers kept
                state.wrong_chain = True
                state.head = None  # another chain's head says nothing of this one's
                self._out_of_sync.add(node.node_id)
                self._changed(node.node_id)
                self.epochs.bump(epochs.chain_heads(node.chain_id))
                if state.failures == 1:
                    log.warning("node %d gets no traffic: %s", node.node_id, exc)
            elif state.failures == 1:
                log.info("node %d failed its health check: %s", node.node_id, exc)
            return
        if state.failures:
            log.info("node %d passes its health check again", node.node_id)
        state.checks_until_chain_check -= 1
        self.record_head(node, head)
        elapsed = time.monotonic() - started
        self.observe_answer(node.node_id, Work.QUICK, elapsed)
        if self.finality is not None:
            await self._check_finality(node, state, self.finality)

    async def _check_finality(self, node: NodeInfo, state: NodeState, finality: Finality) -> None:
        """Ask the node its `finalized` block; one that does not answer the tag (an error, no
        block, garbage) is asked again `_CHAIN_RECHECK_EVERY` checks later, and its failure to
        answer is no failure of the check."""
        if state.checks_until_finality_check > 0:
            state.checks_until_finality_check -= 1
            return
        try:
            finalized = finalized_number(await probe(node.url, _FINALIZED_PROBE, self._timeout_s))
        except ValueError:  # no answer: as good as no tag
            finalized = None
        if finalized is None or state.head is None or finalized > state.head:
            state.checks_until_finality_check = _CHAIN_RECHECK_EVERY
            finalized = None
        finality.report(node.chain_id, node.node_id, finalized)

    def observe_head(self, node: NodeInfo, head: int) -> None:
        """A node answered the head `head` to a call: it is there at least. Moves its head (and
        the chain's) forward, never back, and only once it was checked (a head from an answer
        does not replace the check)."""
        state = self._states.get(node.node_id)
        if state is None or state.head is None or head <= state.head:
            return
        state.head = head
        state.told_at = self._clock()
        self._update_chain_head(node.chain_id, node.node_id)

    def record_head(self, node: NodeInfo, head: int) -> None:
        """A passed check that found the node at block `head`."""
        state = self._state_of(node)
        state.failures = 0
        state.last_error = None
        state.head = head
        state.checked_at = state.told_at = self._clock()
        self.cooldowns.succeeded(node.node_id)
        self._update_chain_head(node.chain_id, node.node_id)
        self._unreported.add(node.node_id)

    def _state_of(self, node: NodeInfo) -> NodeState:
        if self._chain_of.get(node.node_id) != node.chain_id:  # new, or moved to another chain
            self._forget(node.node_id)
            self._chain_of[node.node_id] = node.chain_id
            self._members.setdefault(node.chain_id, set()).add(node.node_id)
        self._provider_of[node.node_id] = node.provider_id
        return self._states.setdefault(node.node_id, NodeState())

    @staticmethod
    def _chain_check_due(node: NodeInfo, state: NodeState) -> bool:
        return (
            state.failures > 0
            or state.checks_until_chain_check <= 0
            or state.chain_verified_url != node.url
        )

    async def _verify_chain(self, node: NodeInfo, state: NodeState) -> None:
        answered = parse_quantity(
            await probe(node.url, _CHAIN_PROBE, self._timeout_s), "a chain ID"
        )
        if answered != node.chain_id:
            raise WrongChainError(
                f"answers chain ID {answered}, but is registered for chain {node.chain_id}"
            )
        state.wrong_chain = False
        state.chain_verified_url = node.url
        state.checks_until_chain_check = _CHAIN_RECHECK_EVERY

    def take_reports(self) -> list[HealthReport]:
        """The nodes checked since the last call, as they stand now."""
        wall_offset = time.time() - time.monotonic()
        reports = []
        # Swapped, not read then cleared: on the native server checks run on another thread.
        taken, self._unreported = self._unreported, set()
        for node_id in sorted(taken):
            state = self._states.get(node_id)
            if state is None or state.checked_at is None:
                continue
            reports.append(
                HealthReport(
                    node_id=node_id,
                    in_sync=node_id not in self._out_of_sync and node_id not in self._lagging,
                    head_block=state.head,
                    latency_ms=self._latency_ms.get(node_id),
                    consecutive_failures=state.failures,
                    checked_at=datetime.fromtimestamp(state.checked_at + wall_offset, UTC),
                )
            )
        return reports

    def _update_chain_head(self, chain_id: int, told_by: int) -> None:
        """Node `told_by` told its head: the chain's head again, and the standing of the nodes
        it moves (all of them when the chain's head moved, else that node's)."""
        members = self._members.get(chain_id, ())
        told = [
            (self._provider_of.get(node_id, 0), state.head)
            for node_id in members
            if (state := self._states.get(node_id)) is not None and state.head is not None
        ]
        median = statistics.median_low(head for _, head in told)
        best: dict[int, int] = {}  # each provider's highest plausible head
        for provider, head in told:
            if head - median <= _IMPLAUSIBLE_LEAD and head > best.get(provider, -1):
                best[provider] = head
        highest = sorted(best.values(), reverse=True)
        chain_head = highest[1] if len(highest) > 1 else highest[0]
        previous = self._chain_heads.get(chain_id)
        self._chain_heads[chain_id] = chain_head
        self.epochs.bump(epochs.chain_heads(chain_id))  # a node's head moved
        if previous is not None and chain_head > previous:
            self._chain_rose(chain_id, chain_head)
        for node_id in members if chain_head != previous else (told_by,):
            state = self._states.get(node_id)
            if state is not None:
                self._publish(node_id, state)

    def _chain_rose(self, chain_id: int, head: int) -> None:
        now = self._clock()
        moved = self._chain_moved.get(chain_id)
        self._chain_moved[chain_id] = (head, now)
        if moved is None or now <= moved[1]:
            return
        sample = (now - moved[1]) / (head - moved[0])
        known = self._block_time_s.get(chain_id)
        self._block_time_s[chain_id] = (
            sample if known is None else known + _SMOOTHING * (sample - known)
        )

    def _publish(self, node_id: int, state: NodeState) -> None:
        """The node's standing: its head against the chain's, less the blocks made since it
        told it."""
        chain_id = self._chain_of.get(node_id, -1)
        chain_head = self._chain_heads.get(chain_id)
        # Unknown counts as in sync (a node is not punished before it is checked); a head
        # implausibly far ahead of the chain is as wrong as a wrong chain.
        behind = None
        if state.head is not None and chain_head is not None:
            block_time_s = self._block_time_s.get(chain_id, _FIRST_BLOCK_TIME_S)
            since = int((self._clock() - state.told_at) / block_time_s)
            behind = chain_head - state.head
            if behind > 0:
                behind = max(0, behind - since)
        out = (
            state.wrong_chain
            or (behind is not None and behind < -_IMPLAUSIBLE_LEAD)
            or node_id in self._cordoned
        )
        lagging = not out and behind is not None and behind > self.max_lag(chain_id)
        if out != (node_id in self._out_of_sync) or lagging != (node_id in self._lagging):
            self._changed(node_id)
        for flagged, member in ((out, self._out_of_sync), (lagging, self._lagging)):
            if flagged:
                member.add(node_id)
            else:
                member.discard(node_id)

    def cordon(self, node_id: int) -> None:
        """The node is cordoned (router/cordon.py): out at once, and stays out whatever its
        checks say, until storage drops it from the snapshot."""
        self._cordoned.add(node_id)
        self._out_of_sync.add(node_id)
        self._changed(node_id)

    def uncordon(self, node_id: int) -> None:
        """The node's cordon was lifted: it stands as its checks say again."""
        if node_id not in self._cordoned:
            return
        self._cordoned.discard(node_id)
        state = self._states.get(node_id)
        if state is not None:
            self._publish(node_id, state)
        else:
            self._out_of_sync.discard(node_id)
            self._changed(node_id)

    def forget_except(self, node_ids: set[int]) -> None:
        """Drop what is known of nodes no longer configured."""
        for gone in [n for n in self._states if n not in node_ids]:
            self._forget(gone)
        self.recent.forget_except(node_ids)

    def _changed(self, node_id: int) -> None:
        """The node's health as the pipeline reads it changed (router/epochs.py)."""
        self.epochs.bump(epochs.node(node_id))

    def _forget(self, node_id: int) -> None:
        self._changed(node_id)
        self._states.pop(node_id, None)
        self._out_of_sync.discard(node_id)
        self._lagging.discard(node_id)
        self._provider_of.pop(node_id, None)
        self._latency_ms.pop(node_id, None)
        self._first_check_out.discard(node_id)
        self._cordoned.discard(node_id)
        chain_id = self._chain_of.pop(node_id, None)
        if chain_id is not None:
            self._members.get(chain_id, set()).discard(node_id)
            if self.finality is not None:
                self.finality.forget(chain_id, node_id)

    async def run(self, current_nodes: Callable[[], Sequence[NodeInfo]]) -> None:
        """Check every node, round after round, until `stop`ped (a program: run it with an
        executor's `spawn`)."""
        first = True
        while not self._stopping:
            nodes = current_nodes()
            self.forget_except({node.node_id for node in nodes})
            if not nodes:
                await Wait(self._interval_s)
                continue
            await self._round(nodes, first)
            first = False

    def stop(self) -> None:
        """End `run` before its next check starts (from any thread); checks in flight finish."""
        self._stopping = True

    async def _round(self, nodes: Sequence[NodeInfo], first: bool = False) -> None:
        """One check of every node, spread over the interval; the first round of a router as
        fast as `max_per_s` allows: until a node has answered a check the router can only
        guess about it (readiness waits for one, and a call tries it after those that have)."""
        started = time.monotonic()
        fastest_s = len(nodes) / self._max_per_s
        round_s = max(self._interval_s, fastest_s)
        gap_s = (fastest_s if first else round_s) / len(nodes)
        for index, node in enumerate(nodes):
            # Pace the starts against the round's schedule, not the previous start, so a slow
            # node does not push the whole round back; past the bound on checks in flight, wait
            # for one to end (polled at the pace of the starts: the bound is rarely reached).
            while True:
                if self._stopping:
                    return
                wait_s = started + index * gap_s - time.monotonic()
                if wait_s <= 0 and self._in_flight < self._concurrency:
                    break
                await Wait(wait_s if wait_s > 0 else gap_s)
            self._in_flight += 1
            await Spawn(self._guarded_check(node))
        rest_s = started + round_s - time.monotonic()
        if rest_s > 0:
            await Wait(rest_s)

    async def _guarded_check(self, node: NodeInfo) -> None:
        try:
            await self.check(node)
        except Exception:  # a bug in one check must not stop the checker
            log.exception("health check of node %d crashed", node.node_id)
        finally:
            self._in_flight -= 1
