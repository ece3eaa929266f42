"""Each chain's finalized block, for the response cache: what the nodes answer for the
`finalized` tag where they do, else a configured depth behind the chain head.

Health checks ask each node for its `finalized` block (router/health.py) and report it here. A
chain's finalized block is the lowest half's highest report (the median, rounded down), so one
node that runs ahead, or lies, cannot make the cache keep what is not final yet. Where no node of
a chain answers the tag, the chain's block `head - depth` is taken as final (`depth` per chain,
a setting).

When a chain's finality goes backwards (a chain that broke its own finality, or a development
chain rewound), `on_regress` is told, and the cache drops what it holds of it, in Redis too. With
the tag, that is a node answering a lower finalized block than it answered before, taking the
median below where it was. Nodes coming and going move the median as well, and are not a
regress: what was final stays final. A node whose check fails keeps its last answer (no news is
not a lower block; an older answer only makes the cache keep less). With the depth, any step
back of `head - depth` counts, as nothing tells a rewound chain from a head that moved.

Routers that share answers through Redis share the epochs too (router/shared_epochs.py): a
regress one router sees is `unpublished` until that program has raised the chain's shared epoch
(meanwhile the chain's answers stay out of Redis: `shared`), and another router `adopt`s a shared
epoch above its own. Adopting one is a regress this router did not see: its reports of the chain
are dropped and the chain has no finalized block until every node that had reported has been
checked again (`unsettled`), so that it never keeps, under the new epoch, an answer its old
reports, or its nodes' old heads, took for final.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping

from chainrouter.router import epochs
from chainrouter.router.epochs import Epochs


class Finality:
    def __init__(
        self,
        chain_head: Callable[[int], int | None],
        *,
        depth: int,
        depths: Mapping[int, int] | None = None,
        on_regress: Callable[[int], object] | None = None,
        epoch_store: Epochs | None = None,
    ) -> None:
        self._chain_head = chain_head
        # The router's epochs (router/epochs.py), apart from the finality epochs below.
        self._epoch_store = epoch_store if epoch_store is not None else Epochs()
        self._depth = depth
        self._depths = dict(depths or {})
        self._on_regress = on_regress
        self._reports: dict[int, dict[int, int]] = {}  # chain -> node -> finalized block
        self._by_tag: dict[int, int] = {}  # chain -> finalized block from the reports
        self._highest: dict[int, int] = {}  # chain -> the highest it has been
        self._epochs: dict[int, int] = {}  # chain -> times its finality went backwards
        self._unpublished: set[int] = set()  # chains whose last bump the others are not told of
        self._reporters: dict[int, set[int]] = {}  # chain -> nodes that reported, tag or not
        # Chains adopted at a new epoch -> the nodes still to report since (none: any one).
        self._unsettled: dict[int, set[int]] = {}

    def report(self, chain_id: int, node_id: int, finalized: int | None) -> None:
        """A node's `finalized` block (None: it did not answer the tag, this time or ever)."""
        self._reporters.setdefault(chain_id, set()).add(node_id)
        self._heard(chain_id, node_id)
        reports = self._reports.setdefault(chain_id, {})
        before = reports.get(node_id)
        if finalized is not None:
            reports[node_id] = finalized
        self._aggregate(chain_id, reports)
        went_back = before is not None and finalized is not None and finalized < before
        self._note(chain_id, went_back=went_back)

    def forget(self, chain_id: int, node_id: int) -> None:
        """A node that left the chain (removed, or moved to another)."""
        self._reporters.get(chain_id, set()).discard(node_id)
        self._heard(chain_id, node_id)
        reports = self._reports.get(chain_id)
        if reports is not None and reports.pop(node_id, None) is not None:
            self._aggregate(chain_id, reports)
            self._note(chain_id, went_back=False)

    def _heard(self, chain_id: int, node_id: int) -> None:
        """An adopted chain is settled once every node it waited for reported (or left): its
        reports and its nodes' heads are all from checks after the adoption."""
        waiting = self._unsettled.get(chain_id)
        if waiting is not None:
            waiting.discard(node_id)
            if not waiting:
                del self._unsettled[chain_id]

    def _aggregate(self, chain_id: int, reports: dict[int, int]) -> None:
        if reports:
            self._by_tag[chain_id] = statistics.median_low(reports.values())
        else:
            self._by_tag.pop(chain_id, None)

    def distrust(self, chain_id: int, node_id: int) -> None:
        """The node was found serving another chain: what its answers had kept under this
        chain's keys is dropped, as for a regress, and its report with them; the chain's
        finality is judged afresh from here."""
        reports = self._reports.get(chain_id, {})
        reports.pop(node_id, None)
        self._aggregate(chain_id, reports)
        self._highest.pop(chain_id, None)
        self._bump(chain_id)

    def epoch(self, chain_id: int) -> int:
        """How often the chain's finality went backwards: part of its cache keys, so that what
        was kept before (in Redis too) is never read again."""
        return self._epochs.get(chain_id, 0)

    def finalized(self, chain_id: int) -> int | None:
        """The chain's newest block known final; None while nothing is known."""
        if chain_id in self._unsettled:
            return None
        by_tag = self._by_tag.get(chain_id)
        if by_tag is not None:
            return by_tag
        head = self._chain_head(chain_id)
        if head is None:
            return None
        final = head - self._depths.get(chain_id, self._depth)
        return final if final >= 0 else None

    def _note(self, chain_id: int, *, went_back: bool) -> None:
        now = self.finalized(chain_id)
        if now is None:
            return
        highest = self._highest.get(chain_id)
        by_depth = chain_id not in self._by_tag
        if highest is not None and now < highest and (went_back or by_depth):
            self._bump(chain_id)
        if now != highest:  # a block not final before may be now (router/epochs.py)
            self._epoch_store.bump(epochs.chain_final(chain_id))
        self._highest[chain_id] = now

    def epochs(self) -> dict[int, int]:
        """Every chain's epoch that is not 0."""
        return dict(self._epochs)

    def unpublished(self) -> dict[int, int]:
        """The chains whose finality went backwards here since the shared epochs last heard of
        it, and their epochs now."""
        return {chain_id: self._epochs[chain_id] for chain_id in self._unpublished}

    def shared(self, chain_id: int) -> bool:
        """Whether the chain's answers may be read from and written to Redis: not while a
        regress seen here is unpublished (the others still keep answers under the epoch this
        router has now, or will take it for a regress of their own)."""
        return chain_id not in self._unpublished

    def published(self, chain_id: int, floor: int) -> None:
        """The chain's shared epoch was raised past the others' and to `floor` at least (its
        epoch here when it was sent). A bump since (the epoch here above `floor`) is still to
        publish."""
        if self._epochs.get(chain_id, 0) == floor:
            self._unpublished.discard(chain_id)

    def adopt(self, chain_id: int, epoch: int) -> bool:
        """Another router's regress: the chain's shared epoch is `epoch`. True if it is past
        this router's; the chain is then judged afresh, once its nodes have reported again."""
        if epoch <= self._epochs.get(chain_id, 0):
            return False
        self._epochs[chain_id] = epoch
        self._reports.pop(chain_id, None)
        self._by_tag.pop(chain_id, None)
        self._highest.pop(chain_id, None)
        self._unsettled[chain_id] = set(self._reporters.get(chain_id, ()))
        return True

    def _bump(self, chain_id: int) -> None:
        self._epochs[chain_id] = self._epochs.get(chain_id, 0) + 1
        self._unpublished.add(chain_id)
        if self._on_regress is not None:
            self._on_regress(chain_id)
