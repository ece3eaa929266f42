"""Replays (docs/cache.md, "Replays"): a request every call of which the response cache answered
free of charge is answered again by the native server alone when it comes again, byte for byte
but for the caller's ids and a fresh batch id; the pipeline stays the one place that decides.

The pipeline marks a reply `Replayable` (pipeline.py) when all of its calls were cache hits of
answers that can no longer change, at the cache price 0, for a key without a rate limit of its
own, with the request log off. Everything else the answer depended on (the key, its domains, the
chain, the method's routes and plan standings, the chain's purge generation and finality epoch)
changes only with an installed snapshot or a cache purge, and either clears the memo
(`RpcService.install`, `ResponseCache.purge`). The server keys a replay by every byte the
pipeline read (path, Origin, Referer, Content-Type, the body but for the ids;
`native/src/replay.rs`), so a request that differs in anything else goes to the pipeline.

Each replay is counted in the memo under its entry's token; `drain`, every `DRAIN_INTERVAL_S`
and when the router stops, meters them as the calls they are (usage, scenario `cache`, at no
cost; the cache's hits; the requests), so that usage and metrics read as if the pipeline had
answered them. A process killed without warning loses at most that interval's replays from
usage, all of them free of charge (docs/decisions.md).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chainrouter.domain.enums import Scenario
from chainrouter.router.contract import HttpAnswer, HttpRequest, Wait
from chainrouter.router.metering import UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.response_cache import ResponseCache

log = logging.getLogger(__name__)

DRAIN_INTERVAL_S = 0.02
# Bodies longer than this are never replayed: a key costs a hash of the body, and batches of
# many calls are rare enough to leave to the pipeline.
MAX_BODY_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Replayable:
    """What replaying a request meters: one free cache hit per method, in the request's order."""

    customer_id: int
    key_id: int
    chain_id: int
    methods: tuple[str, ...]


def memo_key(request: HttpRequest) -> dict[str, Any]:
    """What the memo keys an entry by, as its methods take it: every field of the request the
    pipeline read (`native/src/replay.rs`, `Asked`)."""
    return {
        "path": request.path,
        "origin": request.origin,
        "referer": request.referer,
        "content_type": request.content_type,
        "body": request.body,
    }


class Replays:
    """The Python side of a native server's replay memo (`chainrouter._native.ReplayMemo`)."""

    def __init__(
        self,
        memo: Any,
        meter: UsageMeter,
        metrics: RouterMetrics,
        cache: ResponseCache | None,
    ) -> None:
        self._memo = memo
        self._meter = meter
        self._metrics = metrics
        self._cache = cache
        # One token per entry of the memo, replays and repeated forwards alike (forwards.py).
        self.tokens = itertools.count(1)
        # Told the tokens no entry holds any more (the forwards' own are among them), and when
        # every entry was forgotten at once.
        self.on_gone: Callable[[list[int]], None] | None = None
        self.on_clear: Callable[[], None] | None = None
        self._replayable: dict[int, Replayable] = {}  # token -> what its replays meter
        self.replayed: dict[tuple[int, str], int] = {}  # (chain, method) -> calls, for metrics
        # One drain at a time: the last one (at stop) may run on another thread than the rest,
        # and a token must not be forgotten by one drain before another has metered its counts.
        self._draining = threading.Lock()
        self._stopped = False
        if cache is not None:
            cache.on_purge = self._purged

    @staticmethod
    def new_memo(native: Any, max_bytes: int, max_age_s: float) -> Any:
        """A memo of `max_bytes` whose entries are replayed for `max_age_s` each. Its batch ids
        are the worker's (`RpcService` takes them from it too): one sequence, as `BatchIds`'."""
        return native.ReplayMemo(
            max_bytes=max_bytes,
            max_body_bytes=MAX_BODY_BYTES,
            max_age_s=max_age_s,
            batch_prefix=secrets.token_hex(6) + "-",
        )

    def generation(self) -> int:
        """Read before a request is decided: its answer is installed only if no `clear` came
        between (a snapshot installed by the sync's thread while this one decided under the
        one before)."""
        generation: int = self._memo.generation()
        return generation

    def install(
        self,
        request: HttpRequest,
        answer: HttpAnswer,
        replayable: Replayable,
        generation: int,
    ) -> None:
        """Hand the server `answer` to `request`, decided in `generation`, to give again to
        the same request."""
        body = request.body
        if body is None or len(body) > MAX_BODY_BYTES or request.method != "POST":
            return
        token = next(self.tokens)
        headers = [(name, value) for name, value in answer.headers if name != "x-batch-id"]
        self._replayable[token] = replayable
        installed = False
        try:
            installed = self._memo.install(
                token=token,
                generation=generation,
                **memo_key(request),
                status=answer.status,
                headers=headers,
                answer=answer.body,
            )
        except Exception:  # the answer is served all the same, only not replayed
            log.exception("an answer could not be handed to the replay memo")
        finally:
            if not installed:
                del self._replayable[token]

    def clear(self) -> None:
        """Forget every answer handed over: what decided them may have changed."""
        self._memo.clear()
        if self.on_clear is not None:
            self.on_clear()

    def _purged(self, chain_id: int) -> None:
        self.clear()  # every chain's: entries are not kept by chain, and purges are rare

    def drain(self) -> int:
        """Meter the replays counted since the last drain; how many there were."""
        with self._draining:
            counts, gone = self._memo.drain()
            replayed = 0
            try:
                for token, count in counts:
                    replayable = self._replayable.get(token)
                    if replayable is None:  # pragma: no cover - dropped only after its counts
                        log.error("replays of an unknown entry (%d) not metered: %d", token, count)
                        continue
                    try:
                        self._meter_replays(replayable, count)
                    except Exception:  # the other entries' counts are metered all the same
                        log.exception("%d replays could not be metered", count)
                        continue
                    replayed += count
            finally:
                for token in gone:
                    self._replayable.pop(token, None)
                if self.on_gone is not None and gone:
                    self.on_gone(gone)
        return replayed

    def _meter_replays(self, replayable: Replayable, count: int) -> None:
        chain_id = replayable.chain_id
        for method in replayable.methods:
            self._meter.record(
                replayable.customer_id,
                replayable.key_id,
                chain_id,
                method,
                Scenario.CACHE,
                0,
                count=count,
            )
            if self._cache is not None:
                self._cache.memory.count((chain_id, method), hit=True, times=count)
            stat = (chain_id, method)
            self.replayed[stat] = self.replayed.get(stat, 0) + count
        self._metrics.request("keyed", 200, count)

    async def run(self) -> None:
        """The drain, every `DRAIN_INTERVAL_S` until `stop` (a program: the executor runs it on
        the server's thread, where the replays are installed)."""
        while not self._stopped:
            await Wait(DRAIN_INTERVAL_S)
            try:
                self.drain()
            except Exception:  # a bug here must not stop the metering of later replays
                log.exception("metering replays failed")

    def stop(self) -> None:
        self._stopped = True

    def held(self) -> tuple[int, int]:
        """(entries, bytes) the memo holds."""
        entries, size = self._memo.stats()
        return int(entries), int(size)
