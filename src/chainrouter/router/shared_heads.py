"""The keys' seen heads, shared by the routers of one limits' Redis (docs/deployment.md,
"Agreement across routers"), so that a key whose calls a balancer spreads over several routers
is not told an older head by one than another told it.

Each router keeps its own `SeenHeads`. When a key sees a newer block on a router (an answer it
was served), that router appends (key, chain, block, router) to a Redis stream (`STREAM_KEY`
and its database's fingerprint: key ids are a database's own, so routers of another database
on the same Redis, a staging beside production, share nothing with these; trimmed to about
`STREAM_MAX` entries), without waiting for it. Every router follows the stream
with a blocking read on its event loop and adopts the others' entries: the key's seen block is
raised (never lowered), and its decisions dropped (`epochs.seen`). Another router's block thus
reaches this one within about Redis's round trip; a key that moves to another router faster
than that can still see an older head once, as when Redis is away, when each router keeps its
keys consistent on its own. A router starting reads the last minute of the stream first.

The stream is state the limits' Redis keeps (`noeviction`): its entries hold ids only, never a
secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from chainrouter.router.seen_heads import SeenHeads

log = logging.getLogger(__name__)

STREAM_KEY = "chainrouter:seen-heads"
STREAM_MAX = 100_000  # entries kept, about: a minute of raises at well over 1,000 a second
CATCH_UP_S = 60  # a starting router adopts this much of the stream's past
_BLOCK_MS = 1000  # one blocking read waits this long for new entries
_BATCH = 1000  # entries one read takes at most
_MAX_PENDING = 1000  # appends in flight at once; more are dropped (Redis slow or away)
_RETRY_S = 1.0
_WARN_EVERY_S = 60.0


class SharedHeads:
    def __init__(
        self, seen: SeenHeads, url: str, *, timeout_s: float, name: str, scope: str
    ) -> None:
        self._seen = seen
        self._name = name
        self.stream = f"{STREAM_KEY}:{scope}"
        self._timeout_s = timeout_s
        # Appends are bounded by `timeout_s`; the follower's blocking read waits longer.
        self._writer: Redis = Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._reader: Redis = Redis.from_url(
            url, socket_timeout=_BLOCK_MS / 1000 + 5, socket_connect_timeout=timeout_s
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = 0
        self._pending_lock = threading.Lock()  # up on the server's thread, down on the loop's
        self._stopped = False
        self._warned_at = float("-inf")
        self.published = 0
        self.adopted = 0
        self.failures = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Share from now on: this router's raises go to Redis (from any thread), and `follow`
        is to run on `loop`."""
        self._loop = loop
        self._seen.share = self.publish

    def publish(self, key_id: int, chain_id: int, block: int) -> None:
        """A key saw a newer block here: tell the others, without waiting."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopped:
            return
        with self._pending_lock:
            if self._pending >= _MAX_PENDING:
                return
            self._pending += 1
        asyncio.run_coroutine_threadsafe(self._append(key_id, chain_id, block), loop)

    async def _append(self, key_id: int, chain_id: int, block: int) -> None:
        fields = {"r": self._name, "k": key_id, "c": chain_id, "b": block}
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._writer.xadd(self.stream, fields, maxlen=STREAM_MAX, approximate=True)  # type: ignore[arg-type]
            self.published += 1
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
        finally:
            with self._pending_lock:
                self._pending -= 1

    async def follow(self) -> None:
        """Adopt the other routers' entries until `stop` (on the event loop)."""
        last = f"{int(time.time() * 1000) - CATCH_UP_S * 1000}-0"
        while not self._stopped:
            try:
                found = await self._reader.xread({self.stream: last}, count=_BATCH, block=_BLOCK_MS)
            except (RedisError, OSError, TimeoutError) as exc:
                self._failed(exc)
                await asyncio.sleep(_RETRY_S)
                continue
            for _stream, entries in found or ():
                for entry_id, fields in entries:
                    last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    self._adopt(fields)

    def _adopt(self, fields: dict[bytes, bytes]) -> None:
        if fields.get(b"r", b"").decode() == self._name:
            return
        try:
            key_id, chain_id, block = (int(fields[name]) for name in (b"k", b"c", b"b"))
        except (KeyError, ValueError):
            return  # not a router's entry
        if self._seen.adopt(key_id, chain_id, block):
            self.adopted += 1

    def counts(self) -> dict[str, int]:
        """For the metrics (`RouterMetrics.seen_heads`)."""
        return {"published": self.published, "adopted": self.adopted, "failures": self.failures}

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "Redis unavailable, the keys' seen heads are this router's own for now: %s",
                str(exc) or type(exc).__name__,
            )

    def stop(self) -> None:
        self._stopped = True
        self._seen.share = None

    async def close(self) -> None:
        self.stop()
        for client in (self._writer, self._reader):
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()
