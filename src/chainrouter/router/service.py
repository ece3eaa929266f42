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
from chainrouter.router.contract import Attempted
from chainrouter.router.epochs import SNAPSHOT
from chainrouter.router.metering import CreditView
from chainrouter.router.pipeline import Pipeline, Reply
from chainrouter.router.stages.domain import page_header

JSON = "application/json"


class RpcService:
    def __init__(
        self,
        snapshot: RouterSnapshot,
        deps: stages.StageDeps,
        *,
        keep_requests: bool = False,
        batch_ids: Callable[[], str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.deps = deps
        calls = stages.calls(deps)
        # For the request log (router/request_log.py), and the cache's header.
        kept = {"keep_requests": keep_requests, "cache_header": deps.caching}
        # Keyed calls' decisions, for an executor that applies them (router/fast/).
        decided = {"hand_decisions": deps.grants is not None}
        self.keyed = Pipeline(
            stages.keyed(deps),
            calls,
            stages.closing(deps),
            stages.answered(deps),
            **kept,
            **decided,
        )
        # No `X-Cache` on the free tier: it would tell an anonymous caller what others asked.
        self.public = Pipeline(
            stages.public(deps),
            calls,
            stages.free_closing(deps),
            stages.free_answered(deps),
            keep_requests=keep_requests,
        )
        self.upgrade_stages = tuple(stages.websocket(deps))
        # The next batch id; a native worker's comes from its memo (one sequence with its own).
        self.batch_ids: Callable[[], str] = batch_ids or BatchIds().next

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
        # After the snapshot it counts (router/epochs.py): decisions made under the one before
        # (keys, domains, routes, prices, standings) stand no more.
        self.deps.epochs.bump(SNAPSHOT)
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
        epoch = self.deps.epochs.read(SNAPSHOT)  # before the snapshot it counts
        request = RequestContext(
            self.snapshot,
            epoch,
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
        attempts: list[Attempted] | None = None,
    ) -> Coroutine[Any, Any, Reply]:
        """The program that serves a request to `/rpc/{chain_segment}/{api_key}`, `waited_s`
        of whose deadline the server has spent already, with the `attempts` it made meanwhile
        (HttpRequest)."""
        epoch = self.deps.epochs.read(SNAPSHOT)  # before the snapshot it counts
        request = RequestContext(
            self.snapshot,
            epoch,
            self.batch_ids(),
            body,
            chain_segment,
            api_key,
            page_header(origin, referer),
            None,
            content_type,
            waited_s=waited_s,
            attempts=attempts or [],
        )
        return self.keyed.serve(request)

    def handle_public(
        self, chain_segment: str, client_ip: str, body: bytes, content_type: str | None = JSON
    ) -> Coroutine[Any, Any, Reply]:
        """The program that serves a request to the free tier's `/rpc/evm/{chain_segment}`."""
        epoch = self.deps.epochs.read(SNAPSHOT)
        request = RequestContext(
            self.snapshot,
            epoch,
            self.batch_ids(),
            body,
            chain_segment,
            None,
            None,
            client_ip,
            content_type,
        )
        return self.public.serve(request)
