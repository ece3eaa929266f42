"""Audits: a sampled share of the answers nodes gave is asked again of another provider's node,
off the answer's path, and compared by the method's rule; a disagreement goes to more nodes, and
the node a majority of two or more providers outvotes is cordoned (router/cordon.py). The rules
and the sampling are here; the asking is a program (`Auditor.run`) an executor runs on its own,
awaiting `Forward` and `Wait` like the health checker (docs/integrity.md, "Audits").

What is compared, per method (`RULES`), and when two answers are not compared at all:
- `EXACT`: the two results, as JSON with hex spelled in lower case, must be equal.
- `BY_BLOCK`: as `EXACT`, but only when both name the same block (`blockHash`, or a block's
  `hash`): answers from two forks of a reorg legitimately differ.
- `NEVER`: the method's answers differ between two asks, or between two honest clients (the
  head, gas prices, fee history, peers, a client's version, filters, the pool, traces).
- Whatever the method: a call that reads the head (`latest`, `pending`, no block named) or a
  lagging tag (`safe`, `finalized`) is not compared; nor an answer that is an error, `null`, an
  empty list or not JSON (an absence is belief.py's to judge, an error is no claim); nor a call
  pinned to a block above the chain's finalized block whose answer names no block (a reorg may
  change it).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from chainrouter.domain.requirements import (
    HEAD_TAGS,
    LAGGING_TAGS,
    BadParamsError,
    needs_anything,
    needs_of,
)
from chainrouter.domain.routing import NodeInfo, Route
from chainrouter.router.contract import Failure, Forward, Wait
from chainrouter.router.node_checks import NodeCheck, NodeChecks


class Rule(Enum):
    EXACT = "exact"
    BY_BLOCK = "by block"
    NEVER = "never"


class Outcome(Enum):
    AGREE = "agree"
    DISAGREE = "disagree"
    UNCOMPARED = "uncompared"  # the rule does not compare these two answers


# The one table of what audits compare (docs/integrity.md lists it). A method not here is never
# audited: nothing is claimed about answers the router does not know.
RULES: dict[str, Rule] = {
    # State, at a block the call names.
    "eth_getBalance": Rule.EXACT,
    "eth_getTransactionCount": Rule.EXACT,
    "eth_getCode": Rule.EXACT,
    "eth_getStorageAt": Rule.EXACT,
    "eth_call": Rule.EXACT,
    "eth_getProof": Rule.EXACT,
    # Blocks, transactions, receipts, logs: the same block, the same answer.
    "eth_getBlockByNumber": Rule.BY_BLOCK,
    "eth_getBlockByHash": Rule.BY_BLOCK,
    "eth_getTransactionByHash": Rule.BY_BLOCK,
    "eth_getTransactionReceipt": Rule.BY_BLOCK,
    "eth_getTransactionByBlockHashAndIndex": Rule.BY_BLOCK,
    "eth_getTransactionByBlockNumberAndIndex": Rule.BY_BLOCK,
    "eth_getBlockReceipts": Rule.BY_BLOCK,
    "eth_getLogs": Rule.BY_BLOCK,
    "eth_getBlockTransactionCountByHash": Rule.EXACT,
    "eth_getBlockTransactionCountByNumber": Rule.EXACT,
    "eth_getUncleCountByBlockHash": Rule.EXACT,
    "eth_getUncleCountByBlockNumber": Rule.EXACT,
    "eth_chainId": Rule.EXACT,
    "net_version": Rule.EXACT,
    # What changes between two asks, or between two honest clients.
    "eth_blockNumber": Rule.NEVER,
    "eth_gasPrice": Rule.NEVER,
    "eth_maxPriorityFeePerGas": Rule.NEVER,
    "eth_blobBaseFee": Rule.NEVER,
    "eth_feeHistory": Rule.NEVER,
    "eth_estimateGas": Rule.NEVER,
    "eth_createAccessList": Rule.NEVER,
    "eth_syncing": Rule.NEVER,
    "net_peerCount": Rule.NEVER,
    "net_listening": Rule.NEVER,
    "web3_clientVersion": Rule.NEVER,
    "eth_protocolVersion": Rule.NEVER,
    "eth_getFilterChanges": Rule.NEVER,
    "eth_getFilterLogs": Rule.NEVER,
    "eth_newFilter": Rule.NEVER,
    "eth_newBlockFilter": Rule.NEVER,
    "eth_newPendingTransactionFilter": Rule.NEVER,
    "eth_uninstallFilter": Rule.NEVER,
    "eth_sendRawTransaction": Rule.NEVER,
}
_TAGS = HEAD_TAGS | LAGGING_TAGS
_BLOCK_NAMES = ("blockHash",)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    rate: float = 0.01  # the share of answers audited
    chain_rate: dict[int, float] = field(default_factory=dict)  # per chain, in its place
    watched_rate: float = 0.1  # for nodes younger than a day or under suspicion
    referees: int = 3  # nodes asked at most per audit (the first, then more on a disagreement)
    timeout_s: float = 10.0  # one referee, one call
    queue: int = 1000  # samples waiting at most; more are dropped (counted)
    idle_s: float = 0.05  # the program's pause while nothing waits


@dataclass(frozen=True, slots=True)
class Sample:
    """One answer a node gave, to ask again: the call as sent, and what the node answered."""

    chain_id: int
    method: str
    params: Any
    body: bytes
    answer: bytes
    node: NodeInfo
    final: bool  # every block it names is at or below the chain's finalized block


def comparable(method: str, params: Any) -> bool:
    """Whether answers to this call are compared at all (before looking at them): its method's
    rule compares, and it names no tag (a read of the head or of a lagging tag)."""
    rule = RULES.get(method)
    if rule is None or rule is Rule.NEVER:
        return False
    if _names_tag(params):
        return False
    if needs_anything(method):
        try:
            if needs_of(method, params, None).at_head:
                return False
        except BadParamsError:
            return False
    return True


def _names_tag(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TAGS
    if isinstance(value, list):
        return any(_names_tag(item) for item in value)
    if isinstance(value, dict):
        return any(_names_tag(item) for item in value.values())
    return False


def _result(answer: bytes) -> tuple[bool, Any]:
    """(True, its result) for an answer with a result, (False, None) for any other."""
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return False, None
    if not isinstance(parsed, dict) or "result" not in parsed or "error" in parsed:
        return False, None
    return True, parsed["result"]


def _normal(value: Any) -> Any:
    """The value with every string in lower case: hex is one spelling, whatever the client."""
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in value.items()}
    return value


def _blocks(value: Any, top: bool = True) -> set[str]:
    """The block hashes an answer names: `blockHash` members, and a block's own `hash`."""
    found: set[str] = set()
    if isinstance(value, dict):
        for name in _BLOCK_NAMES:
            named = value.get(name)
            if isinstance(named, str):
                found.add(named.lower())
        if top and "parentHash" in value and isinstance(value.get("hash"), str):
            found.add(value["hash"].lower())
    elif isinstance(value, list):
        for item in value:
            found |= _blocks(item, top=False)
    return found


def compare(method: str, params: Any, first: bytes, second: bytes, *, final: bool) -> Outcome:
    """What two nodes' answers to one call come to under the method's rule."""
    if not comparable(method, params):
        return Outcome.UNCOMPARED
    rule = RULES[method]
    has_first, one = _result(first)
    has_second, other = _result(second)
    if not (has_first and has_second) or one in (None, []) or other in (None, []):
        return Outcome.UNCOMPARED
    one, other = _normal(one), _normal(other)
    blocks_one, blocks_other = _blocks(one), _blocks(other)
    if rule is Rule.BY_BLOCK and blocks_one != blocks_other:
        return Outcome.UNCOMPARED  # two forks, or a block one node has not seen yet
    if not final and not (blocks_one and blocks_one == blocks_other):
        return Outcome.UNCOMPARED  # above finality, naming no block: a reorg may change it
    return Outcome.AGREE if one == other else Outcome.DISAGREE


@dataclass(slots=True)
class Standing:
    """What the audits found of one node, for the metrics and the views."""

    passed: int = 0
    failed: int = 0


@dataclass(slots=True)
class _Votes:
    """Answers grouped by agreement: each group's answer and the nodes that gave it."""

    groups: list[tuple[bytes, list[NodeInfo]]] = field(default_factory=list)

    def add(self, sample: Sample, answer: bytes, node: NodeInfo) -> None:
        for group_answer, nodes in self.groups:
            outcome = compare(
                sample.method, sample.params, group_answer, answer, final=sample.final
            )
            if outcome is Outcome.AGREE:
                nodes.append(node)
                return
        self.groups.append((answer, [node]))

    def outvoted(self) -> tuple[list[NodeInfo], list[NodeInfo]]:
        """(the nodes outvoted, the majority) when one group has more nodes than every other
        and of at least two providers; else nobody is outvoted."""
        ranked = sorted(self.groups, key=lambda group: -len(group[1]))
        if len(ranked) < 2 or len(ranked[0][1]) <= len(ranked[1][1]):
            return [], []
        majority = ranked[0][1]
        if len({node.provider_id for node in majority}) < 2:
            return [], []
        return [node for _, nodes in ranked[1:] for node in nodes], majority


Cordon = Callable[[NodeInfo, str], bool]


class Auditor:
    """Chooses the answers to audit and audits them. `offer` (any thread) queues a sample; the
    program `run` asks referees and cordons through `cordon` (router/cordon.py), the one hook
    a failed proof calls too. `clean` is told of each clean audit (the dispute record starts
    anew from it). `cordoned` nodes (and those out of sync: another chain, a head far ahead)
    are neither audited nor asked."""

    def __init__(
        self,
        settings: AuditSettings,
        routes_of: Callable[[int, str], Sequence[Route]],
        cordon: Cordon,
        clean: Callable[[int], None],
        *,
        cordoned: Callable[[int], bool] = lambda node_id: False,
        now: Callable[[], float] = time.time,
        draw: Callable[[], float] = random.random,
        checks: NodeChecks | None = None,
    ) -> None:
        self.settings = settings
        self._routes_of = routes_of
        self._cordon = cordon
        self._clean = clean
        self._cordoned = cordoned
        self._now = now
        self._draw = draw
        self._checks = NodeChecks() if checks is None else checks  # for storage (sync.py)
        self._queue: deque[Sample] = deque()
        self._lock = threading.Lock()
        self._stopping = False
        self.standings: dict[int, Standing] = {}
        self.dropped = 0  # samples past the queue's bound
        self.audited = 0

    # -- sampling --------------------------------------------------------------------------

    def rate(self, node: NodeInfo) -> float:
        """The share of the node's answers audited: more while it is watched (young, or
        under suspicion since it came back from a cordon)."""
        settings = self.settings
        rate = settings.chain_rate.get(node.chain_id, settings.rate)
        if rate <= 0:
            return 0.0
        watched = node.watched_until > self._now()
        return max(rate, settings.watched_rate) if watched else rate

    def every(self, node: NodeInfo) -> int:
        """For calls the native server serves under a decision: every n-th is sampled (0:
        none), the same share as `rate`."""
        rate = self.rate(node)
        return 0 if rate <= 0 else max(1, round(1 / rate))

    def draws(self, node: NodeInfo) -> bool:
        """Whether one answer of the node is sampled, at its rate."""
        rate = self.rate(node)
        return rate > 0 and self._draw() < rate

    def offer(self, sample: Sample) -> None:
        """Queue a sample (never waits; dropped past the bound)."""
        with self._lock:
            if len(self._queue) >= self.settings.queue:
                self.dropped += 1
                return
            self._queue.append(sample)

    def _next(self) -> Sample | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    # -- auditing (a program) ---------------------------------------------------------------

    async def run(self) -> None:
        """Audit the samples as they come, until `stop`ped."""
        while not self._stopping:
            sample = self._next()
            if sample is None:
                await Wait(self.settings.idle_s)
                continue
            await self.audit(sample)

    def stop(self) -> None:
        self._stopping = True

    async def drain(self) -> None:
        """Audit every sample waiting now (tests and the bench)."""
        while (sample := self._next()) is not None:
            await self.audit(sample)

    async def audit(self, sample: Sample) -> None:
        """Ask referees, other providers' first, until one agrees, or a majority outvotes."""
        audited = sample.node
        if self._cordoned(audited.node_id):
            return
        referees = self._referees(sample)
        if not referees:
            return
        self.audited += 1
        votes = _Votes()
        votes.groups.append((sample.answer, [audited]))
        disagreed = False
        for node in referees[: self.settings.referees]:
            answer = await Forward(node.url, sample.body, self.settings.timeout_s)
            if isinstance(answer, Failure):
                continue
            outcome = compare(
                sample.method, sample.params, sample.answer, answer, final=sample.final
            )
            if outcome is Outcome.UNCOMPARED:
                continue  # nothing learned from this one (its error, its null): the next
            if outcome is Outcome.AGREE and not disagreed:
                self._count(audited, passed=True)
                self._clean(audited.node_id)
                return
            disagreed = True
            votes.add(sample, answer, node)
            if audited in votes.outvoted()[0]:
                break
        losers, majority = votes.outvoted()
        if not losers:
            return  # no majority: nobody is cordoned on a tie
        providers = sorted({node.provider_id for node in majority})
        for node in losers:
            self._count(node, passed=False)
            reason = (
                f"audit: its {sample.method} answer on chain {sample.chain_id} was outvoted by "
                f"{len(majority)} nodes of providers {', '.join(map(str, providers))}"
            )
            self._cordon(node, reason)
        for node in majority:
            self._count(node, passed=True)
            if node is audited:
                self._clean(node.node_id)

    def _referees(self, sample: Sample) -> list[NodeInfo]:
        """Nodes that can answer the call, but the audited one and the cordoned: other
        providers' first, one per provider before a second of any."""
        audited = sample.node
        seen: set[int] = set()
        first: list[NodeInfo] = []
        more: list[NodeInfo] = []
        for route in self._routes_of(sample.chain_id, sample.method):
            node = route.node
            if node.node_id == audited.node_id or node.node_id in seen:
                continue
            if self._cordoned(node.node_id):
                continue
            seen.add(node.node_id)
            providers = {n.provider_id for n in first} | {audited.provider_id}
            (more if node.provider_id in providers else first).append(node)
        return first + more

    def _count(self, node: NodeInfo, *, passed: bool) -> None:
        """One audit's outcome for the node: this worker's metrics, and storage's totals."""
        standing = self.standings.get(node.node_id)
        if standing is None:
            standing = self.standings[node.node_id] = Standing()
        if passed:
            standing.passed += 1
        else:
            standing.failed += 1
        self._checks.add(node.node_id, NodeCheck.AUDIT_PASSED if passed else NodeCheck.AUDIT_FAILED)
