"""The caller's own account: who they are, their management tokens (spec section 5, rule 1: made
and revoked in the dashboard, the secret shown once), and sign-up where the operator enables it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import (
    CreditsOut,
    IssuedTokenOut,
    OutModel,
    PathId,
    TokenOut,
    credits_out,
)
from chainrouter.api.deps import Caller, ClientBlock, Context
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.domain.enums import Role
from chainrouter.domain.money import parse_credits
from chainrouter.management import account
from chainrouter.management.errors import NotFoundError, RateLimitedError
from chainrouter.operator_config.model import Email, Name
from chainrouter.ratelimit.window import Bucket

router = APIRouter(tags=["account"], route_class=ExactJsonRoute)

_DAY_S = 86_400.0
_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked management token."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}
_NO_STORE = {"Cache-Control": "no-store"}


class ProviderLinkOut(OutModel):
    id: int
    slug: str
    name: str


class AccountOut(OutModel):
    customer_id: int
    name: str
    email: str
    role: Role = Field(description="The role of the token in use.")
    token_id: int = Field(description="The token in use.")
    balance: CreditsOut
    provider: ProviderLinkOut | None = Field(
        description="The provider this account acts for: the provider routes are open to it."
    )


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: Name


class SignUpIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    email: Email


class SignedUpOut(OutModel):
    customer_id: int
    token: str = Field(description="A management token. Shown in this response only.")
    balance: CreditsOut


@router.get("/account", response_model=AccountOut, responses=_AUTH, summary="Who you are")
async def get_account(caller: Caller, ctx: Context) -> Response:
    found = await run_in_threadpool(account.account, ctx.engine, caller)
    provider = found.provider
    return respond(
        AccountOut(
            customer_id=found.customer.id,
            name=found.customer.name,
            email=found.customer.email,
            role=found.role,
            token_id=found.token_id,
            balance=credits_out(found.customer.balance_nano),
            provider=None
            if provider is None
            else ProviderLinkOut(id=provider.id, slug=provider.slug, name=provider.name),
        )
    )


@router.get(
    "/tokens",
    response_model=list[TokenOut],
    responses=_AUTH,
    summary="Your management tokens (never their secrets), revoked ones included",
)
async def list_tokens(caller: Caller, ctx: Context) -> Response:
    tokens = await run_in_threadpool(account.list_own_tokens, ctx.engine, caller.customer_id)
    return respond([TokenOut.of(token) for token in tokens])


@router.post(
    "/tokens",
    status_code=201,
    response_model=IssuedTokenOut,
    responses={
        **_AUTH,
        409: {
            "model": ErrorBody,
            "description": f"The label is taken, or {account.MAX_LIVE_TOKENS} tokens are live.",
        },
    },
    summary="Create a management token for your account (the secret is returned once)",
)
async def create_token(body: TokenIn, caller: Caller, ctx: Context) -> Response:
    issued = await run_in_threadpool(
        account.issue_own_token, ctx.engine, caller.customer_id, body.label
    )
    out = IssuedTokenOut(**TokenOut.of(issued.token).model_dump(), token=issued.secret)
    return respond(out, 201, headers=_NO_STORE)


@router.post(
    "/tokens/{token_id}/revoke",
    response_model=TokenOut,
    responses={**_AUTH, 404: {"model": ErrorBody, "description": "Not one of your tokens."}},
    summary="Revoke one of your management tokens for good (the one in use signs you out)",
)
async def revoke_token(token_id: PathId, caller: Caller, ctx: Context) -> Response:
    token = await run_in_threadpool(
        account.revoke_own_token, ctx.engine, caller.customer_id, token_id
    )
    return respond(TokenOut.of(token))


@router.post(
    "/signup",
    status_code=201,
    response_model=SignedUpOut,
    responses={
        404: {"model": ErrorBody, "description": "Sign-up is not enabled here."},
        422: {"model": ErrorBody, "description": "Invalid input."},
        409: {"model": ErrorBody, "description": "The e-mail address has an account."},
        429: {"model": ErrorBody, "description": "Too many sign-ups from this IP address."},
    },
    summary="Create an account with free credits and a first management token (when enabled)",
)
async def sign_up(body: SignUpIn, client: ClientBlock, ctx: Context) -> Response:
    settings = ctx.settings
    if not settings.signup_enabled:
        raise NotFoundError("sign-up is not enabled on this service; ask its operator for access")
    limit = settings.signups_per_ip_per_day
    wait = await ctx.limiter.acquire([Bucket(f"signup:{client}", limit, _DAY_S)])
    if wait > 0:
        raise RateLimitedError(f"at most {limit} sign-ups per IP address in 24 hours", wait)
    done = await run_in_threadpool(
        account.sign_up,
        ctx.engine,
        name=body.name,
        email=body.email,
        free_credits_nano=parse_credits(settings.signup_free_credits),
    )
    out = SignedUpOut(
        customer_id=done.customer.id,
        token=done.issued.secret,
        balance=credits_out(done.customer.balance_nano),
    )
    return respond(out, 201, headers=_NO_STORE)
