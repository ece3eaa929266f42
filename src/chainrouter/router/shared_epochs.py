"""The chains' finality epochs, shared by the routers whose response caches share a Redis
(docs/cache.md, "Finality").

A chain's epoch is part of every key its answers are kept under, and moves on when its finality
goes backwards (router/finality.py). Each router sees a regress through its own health checks,
which may come a minute apart when it checks thousands of nodes; meanwhile, without this, the
routers that have not seen it would go on reading what they kept of the chain, and a router
started after it would read, under the old epoch, what they wrote to Redis.

So Redis holds every chain's epoch (`response_cache.EPOCHS_KEY`), and this program, every
`interval_s`:
- reads them, and has the finality adopt each one above its own: the chain's answers held in
  process (and the native server's replays) are dropped, and it is judged afresh from the next
  check (Redis's answers were deleted by the router that saw the regress);
- raises the shared epoch past the others' for each regress seen here since (an epoch no router
  has kept answers under: until then the chain's answers stay out of Redis here), and to this
  router's own where the shared one is lower (Redis lost the hash: restarted without
  persistence, or evicted it). A raise that finds the epoch moved past this router's is another
  router's regress, adopted as if read.

Until the first read, the process neither reads nor writes answers in Redis. A failed read or
raise is tried again at the next round; meanwhile each router goes by its own checks, as
without a Redis. The program runs where the health checks report finality (the executor's
thread): the finality is only changed on that thread.
"""

from __future__ import annotations

import logging

from chainrouter.router.contract import Join, Wait
from chainrouter.router.finality import Finality
from chainrouter.router.response_cache import RedisTier, ResponseCache

log = logging.getLogger(__name__)


class SharedEpochs:
    def __init__(self, finality: Finality, cache: ResponseCache, *, interval_s: float) -> None:
        if cache.redis is None:
            raise ValueError("the epochs are shared through the cache's Redis: it has none")
        self._finality = finality
        self._cache = cache
        self._tier: RedisTier = cache.redis
        self._interval_s = interval_s
        self._stopped = False
        # Chain -> regresses of other routers adopted here, and regresses seen here and
        # published: for the metrics.
        self.adopted: dict[int, int] = {}
        self.published: dict[int, int] = {}

    async def run(self) -> None:
        """Share the epochs every `interval_s` until `stop` (a program)."""
        while not self._stopped:
            try:
                await self.share()
            except Exception:  # a bug here must not end the sharing for good
                log.exception("sharing the chains' finality epochs failed")
            await Wait(self._interval_s)

    def stop(self) -> None:
        self._stopped = True

    async def first(self) -> None:
        """The first read, on the event loop, before the server serves and the checks run (so
        nothing else changes the finality meanwhile): Redis's answers are used from then on. A
        Redis that fails it is left to the rounds of `run`."""
        shared = await self._tier.epochs()
        if shared is not None:
            for chain_id, epoch in shared.items():
                self._finality.adopt(chain_id, epoch)  # nothing held yet: nothing to drop
            self._tier.epochs_known = True

    async def share(self) -> None:
        """One round: read, adopt, publish."""
        reading = self._tier.read_epochs()
        shared = None if reading is None else await Join(reading)
        if shared is None:
            return
        for chain_id, epoch in shared.items():
            self._adopt(chain_id, epoch)
        self._tier.epochs_known = True
        published = self._finality.unpublished()
        for chain_id, epoch in published.items():
            await self._raise(chain_id, epoch, past=True)
        for chain_id, epoch in self._finality.epochs().items():
            # `shared` read afresh: a check between two raises may have seen a regress, which
            # only a raise past the others' publishes.
            lower = shared.get(chain_id, 0) < epoch and chain_id not in published
            if lower and self._finality.shared(chain_id):
                await self._raise(chain_id, epoch, past=False)

    async def _raise(self, chain_id: int, floor: int, *, past: bool) -> None:
        raising = self._tier.raise_epoch(chain_id, floor, past=past)
        raised = None if raising is None else await Join(raising)
        if raised is None:
            return
        if past:
            self._finality.published(chain_id, floor)
            self.published[chain_id] = self.published.get(chain_id, 0) + 1
        # Above `floor`: another router had moved it to this one's epoch or past it since the
        # read, for a regress this one did not see.
        self._adopt(chain_id, raised)

    def counts(self) -> dict[tuple[str, int], int]:
        """For the metrics (`RouterMetrics.epochs`)."""
        counts = {("read", 0): int(self._tier.epochs_known)}
        for series, by_chain in (("adopted", self.adopted), ("published", self.published)):
            for chain_id, n in list(by_chain.items()):
                counts[(series, chain_id)] = n
        return counts

    def _adopt(self, chain_id: int, epoch: int) -> None:
        if not self._finality.adopt(chain_id, epoch):
            return
        self.adopted[chain_id] = self.adopted.get(chain_id, 0) + 1
        dropped = self._cache.forget(chain_id)
        log.warning(
            "chain %d's finality went backwards on another router: its epoch is now %d; "
            "%d answers held here dropped",
            chain_id,
            epoch,
            dropped,
        )
