"""`GET /metrics` on the management API, and the counts behind it: requests by route template
(never a raw path: ids would make the labels unbounded), method and status, and their duration.
Readable from the networks in `CHAINROUTER_METRICS_NETWORKS` (the socket's peer; no forwarded
header counts); 404 for anyone else, as if the route were not there."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chainrouter.api.errors import error_response
from chainrouter.net.client_ip import IpNetwork, in_networks

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_DURATION_BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ApiMetrics:
    """ASGI middleware: counts every request, and answers `/metrics` itself."""

    def __init__(
        self, app: ASGIApp, *, networks: list[IpNetwork], collectors: tuple[Collector, ...] = ()
    ) -> None:
        self._app = app
        self._networks = networks
        self._registry = CollectorRegistry()
        ProcessCollector(registry=self._registry)
        for collector in collectors:  # read at each scrape: money in (api/money_metrics.py)
            self._registry.register(collector)
        self._requests = Counter(
            "chainrouter_api_requests",
            "Management API requests, by route template, method and status.",
            ["route", "method", "status"],
            registry=self._registry,
        )
        self._duration = Histogram(
            "chainrouter_api_request_duration_seconds",
            "Time the management API took to answer, by route template.",
            ["route"],
            buckets=_DURATION_BOUNDS_S,
            registry=self._registry,
        )

    @property
    def registry(self) -> CollectorRegistry:
        """What `/metrics` renders."""
        return self._registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            await self._scrape(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def counted_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, counted_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "other"
            self._requests.labels(template, scope["method"], str(status)).inc()
            self._duration.labels(template).observe(time.perf_counter() - started)

    async def _scrape(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if client is None or not in_networks(client[0], self._networks):
            response = error_response(404, "not_found", "Not Found")
            await response(scope, receive, send)
            return
        body = generate_latest(self._registry)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE.encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
