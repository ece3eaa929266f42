"""The router's HTTP behaviour, whichever server carries the bytes (granian or the native one).

Routes: `POST /rpc/{chainId}/{apiKey}`, `POST /rpc/evm/{chainId}` (free tier), `OPTIONS` on both
(CORS preflight, so browser dApps can call), and `GET /health`. Every `/rpc` response carries
`X-Batch-Id`. A server reads the request (the body within the size limit), calls `respond`, and
writes the answer it returns; the pipeline behind it is `RpcService`.
"""

from __future__ import annotations

import logging

import orjson

from chainrouter import hot_path
from chainrouter.jsonrpc.errors import RpcCode, RpcError, body_too_large
from chainrouter.net.client_ip import IpNetwork, client_address
from chainrouter.router.runtime import RouterRuntime
from chainrouter.router.service import Reply

log = logging.getLogger(__name__)

Headers = list[tuple[str, str]]
Answer = tuple[int, Headers, bytes]  # status, headers, body

_JSON = "application/json"
_CORS_PREFLIGHT = [
    ("access-control-allow-methods", "POST, OPTIONS"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-max-age", "86400"),
]


class RouterFace:
    def __init__(self, runtime: RouterRuntime, trusted: list[IpNetwork]) -> None:
        self.runtime = runtime
        self._service = runtime.service
        self._trusted = trusted
        self.max_body_bytes = runtime.service.max_body_bytes

    async def respond(
        self,
        method: str,
        path: str,
        origin: str | None,
        referer: str | None,
        forwarded_for: str | None,
        peer: str,
        body: bytes | None,
    ) -> Answer:
        """The answer to one request; `body` is None when it was over the size limit."""
        if not path.startswith("/rpc/"):
            if path == "/health" and method in ("GET", "HEAD"):
                return self._health()
            not_found = {"error": {"code": "not_found", "message": f"no route {path}"}}
            return 404, self._plain_headers(), orjson.dumps(not_found)
        service = self._service
        if method == "OPTIONS":
            batch_id = ("x-batch-id", service.new_batch_id())
            return 204, [batch_id, *self._cors(origin), *_CORS_PREFLIGHT], b""
        try:
            parts = path[5:].split("/")
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
                reply = service.refuse(body_too_large(self.max_body_bytes))
            elif parts[0] == "evm":
                ip = client_address(peer, forwarded_for, self._trusted)
                reply = await service.handle_public(parts[1], ip, body)
            else:
                reply = await service.handle_keyed(
                    parts[0], parts[1], body, origin=origin, referer=referer
                )
        except Exception:
            # A bug must still get a JSON-RPC answer with a batch id (spec section 7: 500).
            log.exception("unexpected failure serving %s", method)
            failure = RpcError(500, RpcCode.INTERNAL_ERROR, "internal error")
            return self._answer(service.refuse(failure), None)
        return self._answer(reply, origin)

    def _health(self) -> Answer:
        sync = self.runtime.sync
        body = orjson.dumps(
            {
                "status": "ok",
                "configuration_version": sync.version,
                "hot_path": hot_path.state.value,
                # Usage metered but not yet in storage: above 1 for long, something is wrong.
                "unwritten_usage_batches": sync.unwritten_batches,
            }
        )
        return 200, self._plain_headers(), body

    def _answer(self, reply: Reply, origin: str | None) -> Answer:
        headers = [("content-type", _JSON), ("x-batch-id", reply.batch_id)]
        if reply.status == 405:
            headers.append(("allow", "POST, OPTIONS"))
        if origin:
            headers += self._cors(origin)
        return reply.status, headers, reply.body

    def _plain_headers(self) -> Headers:
        # Every response of the router carries a batch id (spec section 1), even these.
        return [("content-type", _JSON), ("x-batch-id", self._service.new_batch_id())]

    @staticmethod
    def _cors(origin: str | None) -> Headers:
        # Echo the origin: the key's allowed_domains decide, on the request itself.
        if not origin:
            return []
        return [
            ("access-control-allow-origin", origin),
            ("access-control-expose-headers", "x-batch-id"),
            ("vary", "origin"),
        ]
