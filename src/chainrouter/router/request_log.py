"""The router's one log line per request (`CHAINROUTER_REQUEST_LOG_LEVEL`; docs/operations.md):
its batch id, route, key id (never the key), chain, methods, the nodes that answered, attempts,
status and duration. Written by the HTTP face after the answer is made, from the request the
pipeline hands back with its reply (`Pipeline.keep_requests`); nothing is kept or written when
the level is off."""

from __future__ import annotations

import logging

from chainrouter.jsonrpc.envelope import RpcCall
from chainrouter.logs import FIELDS
from chainrouter.router.pipeline import Reply

log = logging.getLogger("chainrouter.requests")

MAX_METHODS = 10  # a batch's first methods are named; the rest are counted
_METHOD_CHARS = 64


class RequestLog:
    def __init__(self, level: int) -> None:
        self.level = level
        self.enabled = log.isEnabledFor(level)

    def write(self, route: str, reply: Reply, seconds: float) -> None:
        request = reply.request
        fields: dict[str, object] = {
            "batch_id": reply.batch_id,
            "route": route,
            "status": reply.status,
            "duration_ms": round(seconds * 1000, 3),
        }
        if request is not None:
            calls = request.ended or []
            access = request.access
            fields |= {
                "key_id": None if access is None else access.key_id,
                "chain": request.chain_id or None,
                "calls": len(request.calls),
                "methods": [  # in the batch's order; an invalid item has none
                    c.method[:_METHOD_CHARS]
                    for c in request.calls[:MAX_METHODS]
                    if isinstance(c, RpcCall)
                ],
                "scenarios": sorted({str(c.scenario) for c in calls if c.scenario is not None}),
                "nodes": [c.served_by.node.node_id for c in calls if c.served_by is not None],
                "attempts": sum(c.attempts for c in calls),
            }
        log.log(self.level, "rpc request", extra={FIELDS: fields})
