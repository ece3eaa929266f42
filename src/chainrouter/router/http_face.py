"""The router's HTTP behaviour, whichever executor's server carries the bytes.

Routes: `POST /rpc/{chainId}/{apiKey}`, `POST /rpc/evm/{chainId}` (free tier), `OPTIONS` on both
(CORS preflight, so browser dApps can call), `GET /health`, and `GET /metrics` for the networks
the operator named (router/prometheus.py). Every response carries `X-Batch-Id`. A server reads
the request (the body within the size limit), runs `respond` as a program, and writes the
`HttpAnswer` it ends with; the pipelines behind it are in `service.py`.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from chainrouter.jsonrpc.errors import RpcCode, RpcError, body_too_large
from chainrouter.net.client_ip import IpNetwork, client_address, client_block, in_networks
from chainrouter.router.contract import HttpAnswer, HttpRequest
from chainrouter.router.fast.decisions import Decider
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.pipeline import CACHE_HEADER, SPLIT_HEADER, Reply
from chainrouter.router.prometheus import CONTENT_TYPE, RouterExposition
from chainrouter.router.readiness import Readiness
from chainrouter.router.request_log import RequestLog
from chainrouter.router.service import RpcService
from chainrouter.router.sync import StorageSync
from chainrouter.router.ws.hub import Hub

log = logging.getLogger(__name__)

Headers = list[tuple[str, str]]

_JSON = "application/json"
_CORS_PREFLIGHT = [
    ("access-control-allow-methods", "POST, OPTIONS"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-max-age", "86400"),
]


@dataclass(frozen=True, slots=True)
class MetricsAccess:
    """What `GET /metrics` serves, and to whom: the socket's peer must be in `networks` (no
    forwarded header counts: a scraper reaches the router directly)."""

    counts: RouterMetrics
    exposition: RouterExposition | None = None  # None: no /metrics route
    networks: tuple[IpNetwork, ...] = ()


class RouterFace:
    def __init__(
        self,
        service: RpcService,
        sync: StorageSync,
        trusted: list[IpNetwork],
        executor: str,
        readiness: Callable[[], Readiness],
        metrics: MetricsAccess | None = None,
        request_log: RequestLog | None = None,  # None or not enabled: no line per request
        hub: Hub | None = None,  # WebSocket clients' feeds; None: upgrades are refused (404)
        decider: Decider | None = None,  # None: the executor applies no decisions
    ) -> None:
        self._service = service
        self._sync = sync
        self._trusted = trusted
        self._executor = executor
        self._readiness = readiness
        self._metrics = metrics or MetricsAccess(RouterMetrics())
        self._count = self._metrics.counts.request
        self._request_log = request_log
        self._hub = hub
        self._decider = decider
        self._draining = False

    def drain(self) -> None:
        """The router is stopping: `/health` answers 503 from now on, whatever else it finds, so
        that load balancers send their new requests elsewhere while it still serves these."""
        self._draining = True

    async def respond(self, request: HttpRequest) -> HttpAnswer:
        """The answer to one request (a program: the executor runs it). One coroutine for the
        whole of it: each more would cost every request its frame."""
        path, method = request.path, request.method
        if not path.startswith("/rpc/"):
            answer = self._other(request)
            self._count("other", answer.status)
            return answer
        route = "free" if path.startswith("/rpc/evm/") else "keyed"
        service = self._service
        origin = request.origin
        if request.websocket_key is not None:
            answer = self._upgrade(request)
            self._count(route, answer.status)
            return answer
        if method == "OPTIONS":
            batch_id = ("x-batch-id", service.new_batch_id())
            self._count(route, 204)
            return HttpAnswer(204, [batch_id, *_cors(origin), *_CORS_PREFLIGHT], b"")
        request_log = self._request_log
        started = time.perf_counter() if request_log is not None and request_log.enabled else 0.0
        try:
            parts = path[5:].split("/")
            body = request.body
            if len(parts) != 2 or not parts[0] or not parts[1]:
                reply = service.refuse(
                    RpcError(
                        404,
                        RpcCode.INVALID_REQUEST,
                        "unknown RPC path; use /rpc/{chainId}/{apiKey} or /rpc/evm/{chainId}",
                    )
                )
            elif method != "POST":
                reply = service.refuse(
                    RpcError(405, RpcCode.INVALID_REQUEST, "JSON-RPC requests must use POST")
                )
            elif body is None:
                reply = service.refuse(body_too_large(service.max_body_bytes))
            elif parts[0] == "evm":
                ip = client_address(request.peer, request.forwarded_for, self._trusted)
                reply = await service.handle_public(parts[1], ip, body, request.content_type)
            else:
                reply = await service.handle_keyed(
                    parts[0],
                    parts[1],
                    body,
                    origin=origin,
                    referer=request.referer,
                    content_type=request.content_type,
                    waited_s=request.waited_s,
                    attempts=request.attempts,
                )
        except Exception:
            # A bug must still get a JSON-RPC answer with a batch id (spec section 7: 500).
            log.exception("unexpected failure serving %s", method)
            reply = service.refuse(RpcError(500, RpcCode.INTERNAL_ERROR, "internal error"))
            origin = None
        self._count(route, reply.status)
        if started and request_log is not None:
            request_log.write(route, reply, time.perf_counter() - started)
        answer = _answer(reply, origin)
        decided = reply.decidable
        if decided is not None and decided.ended and self._decider is not None:
            headers = [(name, value) for name, value in answer.headers if name != "x-batch-id"]
            answer.decisions = self._decider.decide(decided, decided.ended, headers)
        return answer

    def _other(self, request: HttpRequest) -> HttpAnswer:
        path, method = request.path, request.method
        if method in ("GET", "HEAD"):
            if path == "/health":
                return self._health()
            if path == "/metrics" and self._may_scrape(request.peer):
                exposition = self._metrics.exposition
                assert exposition is not None
                headers = [("content-type", CONTENT_TYPE), *self._plain_headers()[1:]]
                return HttpAnswer(200, headers, exposition.render())
        not_found = {"error": {"code": "not_found", "message": f"no route {path}"}}
        return HttpAnswer(404, self._plain_headers(), orjson.dumps(not_found))

    def _upgrade(self, request: HttpRequest) -> HttpAnswer:
        """A WebSocket upgrade (the native server's; uvicorn carries the Python executor's): 101
        when the keyed route's checks pass and the key has room for one more connection from the
        client's address, and its customer for one more (router/ws/hub.py, `WsBounds`), the
        server then handing the connection to the session (docs/websocket.md); else the
        refusal's status and error."""
        service, hub = self._service, self._hub
        parts = request.path[5:].split("/")
        if hub is None or len(parts) != 2 or not all(parts) or parts[0] == "evm":
            message = "WebSocket is served at /rpc/{chainId}/{apiKey}, with a key"
            return _answer(service.refuse(RpcError(404, RpcCode.INVALID_REQUEST, message)), None)
        checked = service.check_upgrade(
            parts[0], parts[1], origin=request.origin, referer=request.referer
        )
        refusal = checked.refusal
        if refusal is None and checked.access is not None:
            address = client_address(request.peer, request.forwarded_for, self._trusted)
            refusal = hub.refusal(checked.access, client_block(address))
        if refusal is not None:
            return _answer(service.refuse(refusal), request.origin)
        key = request.websocket_key or ""
        headers = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-accept", websocket_accept(key)),
            ("x-batch-id", checked.batch_id),
        ]
        return HttpAnswer(101, headers, b"")

    def _may_scrape(self, peer: str) -> bool:
        access = self._metrics
        return access.exposition is not None and in_networks(peer, access.networks)

    def _health(self) -> HttpAnswer:
        """200 when the router can serve, 503 when it cannot (router/readiness.py)."""
        sync, ready = self._sync, self._readiness()
        age = ready.storage_contact_age_s
        serving = ready.ready and not self._draining
        status = "draining" if self._draining else "ok" if ready.ready else "unavailable"
        body: dict[str, object] = {
            "status": status,
            "configuration_version": sync.version,
            "executor": self._executor,
            # Usage metered but not yet in storage: above 1 for long, something is wrong.
            "unwritten_usage_batches": sync.unwritten_batches,
            "storage": "ok" if ready.storage_ok else "unreachable",
            "storage_contact_age_s": None if age is None else round(age, 1),
            "chains": ready.chains,
            "chains_without_healthy_node": ready.chains_without_healthy_node,
        }
        if not serving:
            body["reasons"] = ["the router is stopping"] * self._draining + ready.reasons()
        return HttpAnswer(200 if serving else 503, self._plain_headers(), orjson.dumps(body))

    def _plain_headers(self) -> Headers:
        # Every response of the router carries a batch id (spec section 1), even these.
        return [("content-type", _JSON), ("x-batch-id", self._service.new_batch_id())]


def _answer(reply: Reply, origin: str | None) -> HttpAnswer:
    headers = [("content-type", _JSON), ("x-batch-id", reply.batch_id), *reply.headers]
    if reply.status == 405:
        headers.append(("allow", "POST, OPTIONS"))
    if origin:
        headers += _cors(origin)
    return HttpAnswer(reply.status, headers, reply.body)


def _cors(origin: str | None) -> Headers:
    # Echo the origin: the key's allowed_domains decide, on the request itself.
    if not origin:
        return []
    return [
        ("access-control-allow-origin", origin),
        (
            "access-control-expose-headers",
            f"x-batch-id, {SPLIT_HEADER}, retry-after, {CACHE_HEADER}",
        ),
        ("vary", "origin"),
    ]


_WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, 1.3


def websocket_accept(key: str) -> str:
    """The `Sec-WebSocket-Accept` answering a client's `Sec-WebSocket-Key` (RFC 6455, 4.2.2)."""
    digest = hashlib.sha1((key + _WEBSOCKET_GUID).encode(), usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()
