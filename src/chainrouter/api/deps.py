"""What route handlers receive: the wiring (`ApiContext`), the caller, and the client's IP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from chainrouter.api.body_guard import PRINCIPAL_STATE
from chainrouter.domain.records import Principal
from chainrouter.management.access import (
    HEADER,
    authenticate,
    require_administrator,
    require_provider,
)
from chainrouter.management.catalog import CatalogLists
from chainrouter.management.errors import RateLimitedError
from chainrouter.management.submissions import SubmissionGate
from chainrouter.net.client_ip import IpNetwork, client_address, client_block
from chainrouter.ratelimit.window import Bucket, Limiter
from chainrouter.screening.guard import OutboundGuard
from chainrouter.settings import Settings


@dataclass(frozen=True, slots=True)
class ApiContext:
    settings: Settings
    engine: Engine
    limiter: Limiter
    guard: OutboundGuard  # screening for providers and administrators
    submission_guard: OutboundGuard  # screening of public submissions: no trusted networks
    submission_gate: SubmissionGate
    catalog: CatalogLists
    trusted_proxies: list[IpNetwork]


def context(request: Request) -> ApiContext:
    found: ApiContext = request.app.state.context
    return found


Context = Annotated[ApiContext, Depends(context)]

_token_header = APIKeyHeader(
    name=HEADER,
    auto_error=False,
    scheme_name="ManagementToken",
    description="A management token (crm_...). Administrators create them.",
)


async def _principal(
    request: Request, ctx: Context, token: Annotated[str | None, Security(_token_header)]
) -> Principal:
    # The body guard authenticated it already, before reading the body (api/body_guard.py).
    found: Principal | None = getattr(request.state, PRINCIPAL_STATE, None)
    principal = found if found is not None else await _authenticate(ctx, token)
    await _write_admitted(request, ctx, principal)
    return principal


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Routes that take a POST to read: a secret goes in the body, never in the URL.
READS_BY_POST = frozenset({"/api-keys/lookup"})


async def _write_admitted(request: Request, ctx: ApiContext, principal: Principal) -> None:
    """Every write through a management token, whatever its role and route, counts against the
    token's budget (`api_writes_per_token` per `api_writes_interval_s`), in the limits shared
    by the API processes when Redis is configured; past it, 429 with Retry-After. Each route's
    own checks come after it. A route's principal is resolved once per request (FastAPI keeps
    a dependency's result for the request), so a write counts once."""
    if request.method not in WRITES:
        return
    route = request.scope.get("route")
    if getattr(route, "path", None) in READS_BY_POST:
        return
    settings = ctx.settings
    limit, interval_s = settings.api_writes_per_token, settings.api_writes_interval_s
    wait = await ctx.limiter.acquire(
        [Bucket(f"mgmt-writes:{principal.token_id}", limit, interval_s)]
    )
    if wait > 0:
        raise RateLimitedError(
            f"at most {limit} writes per {interval_s:g} s per management token", wait
        )


async def _authenticate(ctx: ApiContext, token: str | None) -> Principal:
    return await run_in_threadpool(authenticate, ctx.engine, token)


async def _optional_principal(
    request: Request, ctx: Context, token: Annotated[str | None, Security(_token_header)]
) -> Principal | None:
    """No token: anonymous. A token that is given must be valid (401 otherwise), and its
    writes count as on any other route."""
    if token is None:
        return None
    principal = await _authenticate(ctx, token)
    await _write_admitted(request, ctx, principal)
    return principal


async def _administrator(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
    require_administrator(principal)
    return principal


async def _provider_id(principal: Annotated[Principal, Depends(_principal)]) -> int:
    return require_provider(principal)


Caller = Annotated[Principal, Depends(_principal)]
OptionalCaller = Annotated[Principal | None, Depends(_optional_principal)]
Administrator = Annotated[Principal, Depends(_administrator)]
ProviderId = Annotated[int, Depends(_provider_id)]


def _client_block(request: Request, ctx: Context) -> str:
    peer = request.client.host if request.client else "unknown"
    address = client_address(peer, request.headers.get("x-forwarded-for"), ctx.trusted_proxies)
    return client_block(address)


ClientBlock = Annotated[str, Depends(_client_block)]
"""What the per-IP limits count by: the client's IPv4 address, or its IPv6 address's /64."""
