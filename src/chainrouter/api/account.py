"""The caller's own account: who they are, their management tokens (spec section 5, rule 1: made
and revoked in the dashboard, the secret shown once), and sign-up where the operator enables it.
"""

from __future__ import annotations

from typing import Annotated, Any

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
from chainrouter.operator_config.model import Credits, Email, Name
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


class AlertOut(OutModel):
    kind: str = Field(description="low_balance, or key_spend (with api_key_id).")
    message: str
    api_key_id: int | None = None


class AccountOut(OutModel):
    customer_id: int
    name: str
    email: str = Field(description="The account's address (a sign-up's, as given: unverified).")
    role: Role = Field(description="The role of the token in use.")
    token_id: int = Field(description="The token in use.")
    token_label: str = Field(description="The label of the token in use.")
    balance: CreditsOut
    low_balance_alert: CreditsOut = Field(
        description="A balance below this raises the low_balance alert; 0: never."
    )
    alerts: list[AlertOut] = Field(
        description="The alerts set on the account and its keys that hold now."
    )
    provider: ProviderLinkOut | None = Field(
        description="The provider this account acts for: the provider routes are open to it."
    )


class AccountIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    low_balance_alert: Annotated[
        Credits, Field(ge=0, description="Warn below this balance, in credits; 0: never.")
    ]


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
    return respond(_account_out(found))


@router.patch(
    "/account",
    response_model=AccountOut,
    responses=_AUTH,
    summary="Change your account's settings: the low-balance alert",
)
async def update_account(body: AccountIn, caller: Caller, ctx: Context) -> Response:
    await run_in_threadpool(
        account.set_low_balance_alert, ctx.engine, caller.customer_id, body.low_balance_alert
    )
    found = await run_in_threadpool(account.account, ctx.engine, caller)
    return respond(_account_out(found))


def _account_out(found: account.Account) -> AccountOut:
    provider = found.provider
    return AccountOut(
        customer_id=found.customer.id,
        name=found.customer.name,
        email=found.customer.email,
        role=found.role,
        token_id=found.token_id,
        token_label=found.token_label,
        balance=credits_out(found.customer.balance_nano),
        low_balance_alert=credits_out(found.customer.low_balance_alert_nano),
        alerts=[
            AlertOut(kind=a.kind, message=a.message, api_key_id=a.api_key_id) for a in found.alerts
        ],
        provider=None
        if provider is None
        else ProviderLinkOut(id=provider.id, slug=provider.slug, name=provider.name),
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
