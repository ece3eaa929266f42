"""What the stages of the pipeline read and write: one request, and each call in it.

A `RequestContext` is made when a request reaches the router and holds everything known about it
so far; the request stages fill it in (who it is for, which chain, its calls) or refuse it. Each
call of the request then gets a `CallContext`, which the call stages fill in (its routes, the
credits held, the outcome) until one of them ends the call.

Each call also records what its decision depended on, for the native server to apply it to later
calls in the same scope (docs/architecture.md, "Scoped decisions"): a stage that read the call's
parameters beyond its block parameter says so (`read_params`), and one that read something that
can change records that thing's epoch slot and value (`read_epoch`; router/epochs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.cacheable import Pinned
from chainrouter.domain.enums import RoutingStrategy, Scenario
from chainrouter.domain.requirements import NOTHING, Needs
from chainrouter.domain.routing import NodeInfo, Route
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.verification import ProofPlan, Verified
from chainrouter.jsonrpc.envelope import InvalidCall, RpcCall
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.router.belief import NOTHING_EXPECTED, Expected
from chainrouter.router.contract import Attempted, Leading
from chainrouter.router.epochs import Epochs


@dataclass(slots=True)
class RequestContext:
    """One HTTP request to `/rpc/...`."""

    snapshot: RouterSnapshot  # the configuration the whole request is served from
    snapshot_epoch: int  # the SNAPSHOT epoch when it was read (router/epochs.py)
    batch_id: str
    body: bytes
    chain_segment: str  # the chain ID as the path spells it
    api_key: str | None  # the path's key; None on the free tier
    page: str | None  # the Origin header, else Referer: the page a browser sent it from
    client_ip: str | None  # set on the free tier, which limits per IP
    content_type: str | None  # as the request declared it
    access: KeyAccess | None = None  # the key, once found; None on the free tier
    chain_id: int = 0
    strategy: RoutingStrategy = RoutingStrategy.ECONOMY
    calls: list[RpcCall | InvalidCall] = field(default_factory=list)
    is_batch: bool = False
    refusal: RpcError | None = None  # set by the stage that refuses the request as a whole
    split_ranges: int = 0  # eth_getLogs ranges asked of nodes for calls split in parts
    cache_hits: int = 0  # calls answered from the cache or by joining an identical call
    answer_bytes: int = 0  # of the answers its calls have ended with so far (stages/bounds.py)
    # Seconds the native server spent on the request before the pipeline got it (calls it sent
    # under decisions): taken off every call's deadline.
    waited_s: float = 0.0
    # The calls it sent meanwhile: each the first attempt at its call (router/stages/attempt.py).
    attempts: list[Attempted] = field(default_factory=list)
    # Each call once it ended, kept only when requests are logged (router/request_log.py).
    ended: list[CallContext] | None = None
    # Calls whose answer was checked before it was served (`X-Verified`), and of those how many
    # by a proof rather than by two providers' agreement (router/proving.py).
    verified_calls: int = 0
    proven_calls: int = 0


@dataclass(slots=True)
class CallContext:
    """One JSON-RPC call: the only one of a request, or one item of a batch."""

    request: RequestContext
    call: RpcCall
    body: bytes  # the call as a node receives it
    index: int = 0  # its place in the request: 0 for a single call
    needs: Needs = NOTHING  # what a node must be able to do to answer it
    routes: tuple[Route, ...] = ()  # every route that prices the method on the chain
    ordered: Sequence[Route] = ()  # the ones to try, in order
    held_nano: int = 0  # credits held while the call is in flight
    split_size: int = 0  # eth_getLogs split in ranges of this many blocks; 0: not split
    # The outcome, set by the stage that ends the call:
    status: int = 200
    answer: bytes = b""
    scenario: Scenario | None = None  # None while the call goes on
    served_by: Route | None = None  # the route whose node answered, and is paid
    charged_nano: int | None = None  # what it costs when not one route's price (split calls)
    ranges_served_by: tuple[Route, ...] = ()  # a split call's: the route of each range
    retry_after_s: float | None = None  # refused for limits: when the first route frees up
    attempts: int = 0  # nodes the call was sent to (hedges and failovers included)
    # The response cache's and coalescing's (router/stages/cache.py); None: neither applies.
    cache_key: str | None = None
    cache_pin: Pinned | None = None  # None: never kept (coalesced at most)
    cached: bytes | None = None  # answered from the cache: its `"result":...`
    looked_up: bool = False  # looked for in the cache: its answer will be kept (final)
    leading: Leading | None = None  # the flight this call leads
    seen_head: int | None = None  # a read of the head: the newest block its key had seen
    expected: Expected = NOTHING_EXPECTED  # what a node's answer must show to be believed
    tx_hash: str | None = None  # an `eth_sendRawTransaction`'s: its transaction's hash
    flight_seen: int | None = None  # the seen head its flight's key holds (a read of the head)
    proof: ProofPlan | None = None  # what its answer is checked by before it is served
    verified: Verified | None = None  # how it was, once served
    # The calls its checks made that nodes answered, each billed at its own price, and the
    # credits held for every call they sent (router/proving.py; the ledger settles both).
    check_calls: list[CheckCall] | None = None
    checks_held_nano: int = 0
    # Served by its first route at the first try, with no rate limit in the way: how long the
    # attempt would have waited before another node was tried. None: not (router/fast/).
    decided_within_s: float | None = None
    # What the call's decision depends on (router/epochs.py): whether a stage read its params
    # beyond the block parameter, and the epoch slots read, with their values then.
    params_read: bool = False
    epochs_read: dict[int, int] = field(default_factory=dict)
    # The outcome a bound withheld from the client (`withhold`): still the one the calls that
    # joined this one get, and the one the cache may keep.
    withheld: Withheld | None = None

    @property
    def cost_nano(self) -> int:
        """What the call costs its customer: the price of the route that served it, if any."""
        if self.charged_nano is not None:
            return self.charged_nano
        served_by = self.served_by
        return 0 if served_by is None else served_by.price.cost_nano

    def split_needs(self) -> list[Needs]:
        """What each range of a split call needs, in block order (none: not split)."""
        start, end, size = self.needs.history_from, self.needs.history_to, self.split_size
        if not size or start is None or end is None:
            return []
        return [
            Needs(history_from=first, history_to=min(first + size - 1, end))
            for first in range(start, end + 1, size)
        ]

    def checked(self, verified: Verified) -> None:
        """The answer served was verified so (a proof, or agreement) before it was served, or
        before it was kept when it came from the cache: the request's `X-Verified` counts it
        (router/pipeline.py)."""
        self.verified = verified
        self.request.verified_calls += 1
        if verified is Verified.PROOF:
            self.request.proven_calls += 1

    def read_params(self) -> None:
        """A stage read the call's parameters beyond its block parameter: only the same call
        (but for its id) may share its decision."""
        self.params_read = True

    def read_epoch(self, epochs: Epochs, slot: int) -> None:
        """A stage read something whose epoch slot is `slot` (router/epochs.py)."""
        if slot not in self.epochs_read:
            self.epochs_read[slot] = epochs.read(slot)

    def end(self, scenario: Scenario, status: int, answer: bytes) -> None:
        """End the call with this outcome; no later call stage runs."""
        self.scenario = scenario
        self.status = status
        self.answer = answer

    def withhold(self, status: int, answer: bytes, retry_after_s: float | None = None) -> None:
        """A bound keeps the ended call's answer from its client (stages/bounds.py): the
        client gets `answer` instead, the call is `refused` and costs nothing; the outcome it
        had is kept in `withheld` for the calls that joined it and the cache."""
        scenario = self.scenario
        if scenario is None or self.withheld is not None:
            return
        self.withheld = Withheld(
            scenario, self.status, self.answer, self.retry_after_s, self.served_by
        )
        self.scenario = Scenario.REFUSED
        self.served_by = None  # no plan's quota counts it
        self.status = status
        self.answer = answer
        self.retry_after_s = retry_after_s
        self.charged_nano = 0
        self.ranges_served_by = ()


@dataclass(frozen=True, slots=True)
class CheckCall:
    """One call a check made and a node answered: billed to the customer whose call caused it,
    and earned by the node's plan, under the scenario `verification` (router/ledger.py)."""

    node: NodeInfo
    plan_id: int
    method: str
    cost_nano: int


@dataclass(frozen=True, slots=True)
class Withheld:
    """An ended call's outcome, as it was before a bound withheld it."""

    scenario: Scenario
    status: int
    answer: bytes
    retry_after_s: float | None
    served_by: Route | None
