"""The router's entry: a request in, a `Reply` out, through the keyed or the free-tier pipeline.

Everything the pipelines read is in memory (the snapshot, health, balances, limits); storage is
only touched by the background sync (`router/sync.py`), which installs each new snapshot here.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.net.correlation import BatchIds
from chainrouter.router import stages
from chainrouter.router.context import RequestContext
from chainrouter.router.metering import CreditView
from chainrouter.router.pipeline import Pipeline, Reply
from chainrouter.router.replay import Replays
from chainrouter.router.stages.domain import page_header

JSON = "application/json"


class RpcService:
    def __init__(
        self, snapshot: RouterSnapshot, deps: stages.StageDeps, *, keep_requests: bool = False
    ) -> None:
        self.snapshot = snapshot
        self.deps = deps
        calls = stages.calls(deps)
        # For the request log (router/request_log.py), and the cache's header.
        kept = {"keep_requests": keep_requests, "cache_header": deps.caching}
        self.keyed = Pipeline(stages.keyed(deps), calls, stages.closing(deps), **kept)
        self.public = Pipeline(stages.public(deps), calls, stages.free_closing(deps), **kept)
        self.upgrade_stages = tuple(stages.websocket(deps))
        # The next batch id; a native worker's comes from its replay memo (one sequence).
        self.batch_ids: Callable[[], str] = BatchIds().next
        self.replays: Replays | None = None  # the native server's, once it serves

    @property
    def credits(self) -> CreditView:
        """What each customer may still spend, as this router sees it."""
        return self.deps.credits

    @property
    def max_body_bytes(self) -> int:
        return self.deps.limits.max_body_bytes

    def install(self, snapshot: RouterSnapshot) -> None:
        """Serve from `snapshot` from now on; requests in flight finish on the one they began.
        A chain an administrator purged since has its cached answers dropped (its new purge
        generation already keeps them from being read)."""
        before, self.snapshot = self.snapshot.cache_generations, snapshot
        if self.replays is not None:
            # Replays were decided under the snapshot before: keys, domains, routes, standings.
            self.replays.clear()
        cache = self.deps.cache
        if cache is not None and snapshot.cache_generations != before:
            after = snapshot.cache_generations
            for chain_id in set(before) | set(after):
                if before.get(chain_id, 0) != after.get(chain_id, 0):
                    cache.purge(chain_id)

    def new_batch_id(self) -> str:
        return self.batch_ids()

    def refuse(self, failure: RpcError) -> Reply:
        return Reply(failure.http_status, error_response(failure), self.batch_ids())

    def check_upgrade(
        self, chain_segment: str, api_key: str, *, origin: str | None, referer: str | None
    ) -> RequestContext:
        """The access checks of a WebSocket upgrade (`stages.websocket`; none does I/O): the
        request with its key and chain, or with the refusal that answers it."""
        request = RequestContext(
            self.snapshot,
            self.batch_ids(),
            b"",
            chain_segment,
            api_key,
            page_header(origin, referer),
            None,
            None,
        )
        for stage in self.upgrade_stages:
            stage.run(request)
            if request.refusal is not None:
                break
        return request

    # Not coroutines themselves: each hands back its pipeline's program, so that a request runs
    # through one coroutine frame less.
    def handle_keyed(
        self,
        chain_segment: str,
        api_key: str,
        body: bytes,
        *,
        origin: str | None = None,
        referer: str | None = None,
        content_type: str | None = JSON,
        waited_s: float = 0.0,
    ) -> Coroutine[Any, Any, Reply]:
        """The program that serves a request to `/rpc/{chain_segment}/{api_key}`, `waited_s`
        of whose deadline the server has spent already (HttpRequest.waited_s)."""
        request = RequestContext(
            self.snapshot,
            self.batch_ids(),
            body,
            chain_segment,
            api_key,
            page_header(origin, referer),
            None,
            content_type,
            waited_s=waited_s,
        )
        return self.keyed.serve(request)

    def handle_public(
        self, chain_segment: str, client_ip: str, body: bytes, content_type: str | None = JSON
    ) -> Coroutine[Any, Any, Reply]:
        """The program that serves a request to the free tier's `/rpc/evm/{chain_segment}`."""
        request = RequestContext(
            self.snapshot,
            self.batch_ids(),
            body,
            chain_segment,
            None,
            None,
            client_ip,
            content_type,
        )
        return self.public.serve(request)
