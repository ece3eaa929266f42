"""Building the management API application: FastAPI, OpenAPI 3.1 at /openapi.json, interactive
docs at /docs (Swagger UI) and /redoc, served from local files so they work offline."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline
from sqlalchemy import Engine

from chainrouter.api import account, admin, billing, customer, dashboard, provider, public
from chainrouter.api.body_guard import BodyGuard
from chainrouter.api.deps import READS_BY_POST, WRITES, ApiContext
from chainrouter.api.errors import install_error_handlers
from chainrouter.api.metrics import ApiMetrics
from chainrouter.api.money_metrics import MoneyInCollector
from chainrouter.management.catalog import CatalogLists
from chainrouter.management.submissions import SubmissionGate
from chainrouter.net.client_ip import parse_networks
from chainrouter.net.correlation import BatchIdMiddleware
from chainrouter.payments.card import card_payments
from chainrouter.ratelimit import create_limiter
from chainrouter.screening.guard import OutboundGuard, OutboundPolicy
from chainrouter.settings import Settings

log = logging.getLogger(__name__)

API_VERSION = "1.0.0"
DESCRIPTION = """\
Manage API keys and read usage (customer tokens), administer customers, credits, providers and
plans (administrator tokens), and read the public lists and submit chains and nodes (no token).

Authenticate with a management token in the `X-Api-Key` header. Every error has the shape
`{"error": {"code": "...", "message": "...", "details": [...]}}`. Credits are exact decimal
numbers (1 credit = 1 USD).
"""


def build_api_app(engine: Engine, settings: Settings) -> FastAPI:
    if settings.outbound_allow_private:
        log.warning(
            "outbound_allow_private is ON: screening may dial loopback and private addresses. "
            "This is for tests and development only."
        )
    limiter = create_limiter(
        settings.redis_url, redis_timeout_s=settings.redis_timeout_s, role="api"
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await limiter.close()

    app = FastAPIOffline(
        title="chainrouter management API",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.context = ApiContext(
        settings=settings,
        engine=engine,
        limiter=limiter,
        guard=_guard(settings, trusted=True),
        submission_guard=_guard(settings, trusted=False),
        submission_gate=SubmissionGate(),
        catalog=CatalogLists(engine),
        trusted_proxies=parse_networks(settings.trusted_proxies),
    )
    app.state.card = card_payments(
        settings.stripe_secret_key, settings.stripe_webhook_secret, settings.stripe_api_base
    )
    install_error_handlers(app)
    app.include_router(public.router)
    app.include_router(account.router)
    app.include_router(customer.router)
    app.include_router(provider.router)
    app.include_router(admin.router)
    app.include_router(billing.router)
    app.include_router(dashboard.router)
    app.add_middleware(BodyGuard, engine=engine, max_body_bytes=settings.api_max_body_bytes)
    # A browser page of another origin may call the API only when the operator named that
    # origin; a preflight from any other gets no CORS grant (400, no Access-Control headers).
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.api_cors_origins,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=["X-Api-Key", "Content-Type"],
        expose_headers=["X-Batch-Id", "Retry-After", "X-Next-Before-Id"],
        max_age=86_400,
    )
    app.add_middleware(BatchIdMiddleware)
    _document_write_limit(app)
    if settings.metrics_networks:
        app.add_middleware(
            ApiMetrics,
            networks=parse_networks(settings.metrics_networks),
            collectors=(MoneyInCollector(engine),),
        )
    return app


def _document_write_limit(app: FastAPI) -> None:
    """Every write through a management token may meet the token's write budget
    (`api/deps.py`), whichever route it is: the description says so for each such operation
    once, as it is first generated, rather than each route repeating it."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        description = generate()  # kept by the app as its description: changed in place
        for path, operations in description["paths"].items():
            for method, operation in operations.items():
                token = any("ManagementToken" in need for need in operation.get("security", []))
                if method.upper() in WRITES and token and path not in READS_BY_POST:
                    operation["responses"].setdefault("429", _WRITES_LIMITED)
        return description

    app.openapi = openapi  # type: ignore[method-assign]


_WRITES_LIMITED = {
    "description": "Too many writes with this management token "
    "(CHAINROUTER_API_WRITES_PER_TOKEN per interval); see Retry-After.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def _guard(settings: Settings, *, trusted: bool) -> OutboundGuard:
    """What screening may dial: for providers and administrators, public addresses and the
    operator's trusted networks; for submissions, which anyone may send, public ones only (the
    answers would map the operator's private network for them)."""
    networks = parse_networks(settings.outbound_trusted_networks) if trusted else []
    return OutboundGuard(
        OutboundPolicy(
            timeout_s=settings.outbound_timeout_s,
            max_response_bytes=settings.outbound_max_response_bytes,
            allow_private=settings.outbound_allow_private,
            ca_file=settings.outbound_ca_file,
            trusted_networks=tuple(networks),
        )
    )
