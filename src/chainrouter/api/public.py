"""Public routes, no authentication: health, supported chains, prices, submissions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import ChainIdOut, Created, CreditsOut, OutModel, credits_out
from chainrouter.api.deps import ApiContext, ClientBlock, Context, OptionalCaller
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.records import Principal
from chainrouter.domain.urls import normalise_url, refuse_userinfo
from chainrouter.management import submissions
from chainrouter.management.errors import RateLimitedError
from chainrouter.operator_config.model import (
    ChainId,
    Email,
    HttpUrl,
    Name,
    NoControls,
    NoControlsButLayout,
    UrlLength,
)
from chainrouter.ratelimit.window import Bucket

router = APIRouter(route_class=ExactJsonRoute, tags=["public"])

_LIMITED: dict[int | str, dict[str, Any]] = {
    429: {"model": ErrorBody, "description": "Too many requests from this IP; see Retry-After."}
}


class HealthOut(OutModel):
    status: Literal["ok", "unavailable"]
    database: Literal["ok", "unreachable"]


def _database_reachable(ctx: ApiContext) -> bool:
    try:
        with ctx.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return False
    return True


@router.get(
    "/health",
    response_model=HealthOut,
    responses={503: {"model": HealthOut, "description": "The database cannot be reached."}},
    summary="Whether this API process can serve (checks the database)",
)
async def health(ctx: Context) -> Response:
    if await run_in_threadpool(_database_reachable, ctx):
        return respond(HealthOut(status="ok", database="ok"))
    return respond(HealthOut(status="unavailable", database="unreachable"), 503)


class NativeCurrencyOut(OutModel):
    name: str
    symbol: str
    decimals: int


class ChainOut(OutModel):
    chain_id: ChainIdOut
    name: str
    short_name: str
    network: str | None
    native_currency: NativeCurrencyOut
    info_url: str | None

    @classmethod
    def of(cls, chain: Chain) -> ChainOut:
        return cls(
            chain_id=str(chain.chain_id),
            name=chain.name,
            short_name=chain.short_name,
            network=chain.network,
            native_currency=NativeCurrencyOut(
                name=chain.native_currency_name,
                symbol=chain.native_currency_symbol,
                decimals=chain.native_currency_decimals,
            ),
            info_url=chain.info_url,
        )


class RoutePriceOut(OutModel):
    vm: str
    chain_id: ChainIdOut
    method: str
    strategy: RoutingStrategy
    cost: CreditsOut = Field(description="Credits per call on the strategy's first-choice route.")
    requires: str | None = Field(
        default=None,
        description='null: the price of any call of the method. "archive": the price of a '
        "call that reads state only archive nodes keep, where it differs.",
    )
    next_cost: CreditsOut | None = Field(
        default=None,
        description="What this entry will cost from next_cost_from, where a provider made a "
        "route dearer with notice and that changes the first choice's price (the first such "
        "change); null: no change scheduled.",
    )
    next_cost_from: datetime | None = Field(
        default=None, description="When next_cost applies; null: no change scheduled."
    )


class NotificationPriceOut(OutModel):
    chain_id: ChainIdOut
    subscription_type: str = Field(description="eth_subscribe type, e.g. newHeads or logs.")
    strategy: RoutingStrategy
    cost: CreditsOut = Field(
        description="Credits per notification on the strategy's first-choice WebSocket node."
    )
    next_cost: CreditsOut | None = Field(
        default=None,
        description="What this entry will cost from next_cost_from, where a provider made a "
        "notification dearer with notice and that changes this price (the first such change); "
        "null: no change scheduled.",
    )
    next_cost_from: datetime | None = Field(
        default=None, description="When next_cost applies; null: no change scheduled."
    )


@router.get(
    "/chains",
    response_model=list[ChainOut],
    summary="EVM chains served over HTTP JSON-RPC, by chain ID",
)
async def list_chains(ctx: Context) -> Response:
    lists = await run_in_threadpool(ctx.catalog.current)
    return respond([ChainOut.of(chain) for chain in lists.http_chains])


@router.get(
    "/chains/ws",
    response_model=list[ChainOut],
    summary="EVM chains with WebSocket nodes, by chain ID",
)
async def list_ws_chains(ctx: Context) -> Response:
    lists = await run_in_threadpool(ctx.catalog.current)
    return respond([ChainOut.of(chain) for chain in lists.ws_chains])


async def _price_list_admission(ctx: Context, client: str) -> None:
    settings = ctx.settings
    bucket = Bucket(
        f"prices:{client}", settings.price_list_requests, settings.price_list_interval_s
    )
    wait = await ctx.limiter.acquire([bucket])
    if wait > 0:
        raise RateLimitedError(
            f"at most {settings.price_list_requests} price-list requests per "
            f"{settings.price_list_interval_s:g} s per IP address",
            wait,
        )


@router.get(
    "/prices",
    response_model=list[RoutePriceOut],
    responses=_LIMITED,
    summary="What an RPC call costs now, and as scheduled, per (vm, chain, method, strategy)",
)
async def list_prices(ctx: Context, client: ClientBlock) -> Response:
    await _price_list_admission(ctx, client)
    lists = await run_in_threadpool(ctx.catalog.current)
    return respond(
        [
            RoutePriceOut(
                vm=p.vm,
                chain_id=str(p.chain_id),
                method=p.method,
                strategy=p.strategy,
                cost=credits_out(p.cost_nano),
                requires=p.requires,
                next_cost=None if p.next_cost_nano is None else credits_out(p.next_cost_nano),
                next_cost_from=p.next_cost_from,
            )
            for p in lists.route_prices
        ]
    )


@router.get(
    "/prices/ws",
    response_model=list[NotificationPriceOut],
    responses=_LIMITED,
    summary="What a WebSocket notification costs, per (chain, subscription type)",
)
async def list_ws_prices(ctx: Context, client: ClientBlock) -> Response:
    await _price_list_admission(ctx, client)
    lists = await run_in_threadpool(ctx.catalog.current)
    return respond(
        [
            NotificationPriceOut(
                chain_id=str(p.chain_id),
                subscription_type=p.subscription_type,
                strategy=p.strategy,
                cost=credits_out(p.cost_nano),
                next_cost=None if p.next_cost_nano is None else credits_out(p.next_cost_nano),
                next_cost_from=p.next_cost_from,
            )
            for p in lists.ws_prices
        ]
    )


class HoldingPriceOut(OutModel):
    cost_per_hour: CreditsOut = Field(
        description="What holding one WebSocket subscription open costs per hour, charged pro "
        "rata for the time held beside its notifications; 0: holding is free."
    )
    step_s: float = Field(description="How often the time held is charged, seconds.")


@router.get(
    "/prices/ws/holding",
    response_model=HoldingPriceOut,
    responses=_LIMITED,
    summary="What holding a WebSocket subscription open costs",
    description="The operator's holding price (docs/websocket.md#billing), the same on every "
    "chain; no provider earns it.",
)
async def ws_holding_price(ctx: Context, client: ClientBlock) -> Response:
    await _price_list_admission(ctx, client)
    settings = ctx.settings
    return respond(
        HoldingPriceOut(
            cost_per_hour=credits_out(settings.ws_subscription_holding_nano_per_hour()),
            step_s=settings.ws_subscription_holding_step_s,
        )
    )


class CachePriceOut(OutModel):
    chain_id: str = Field(description='A chain ID, or "*": every chain without its own price.')
    method: str = Field(description='A method, or "*": every method without its own price.')
    cost: CreditsOut


@router.get(
    "/prices/cache",
    response_model=list[CachePriceOut],
    responses=_LIMITED,
    summary="What a call answered from the response cache costs",
    description="A call answered from the cache, or by joining an identical call in flight, "
    "costs the most specific price here instead of its route's (docs/cache.md); a call that "
    "matches none is free. No provider earns it.",
)
async def list_cache_prices(ctx: Context, client: ClientBlock) -> Response:
    await _price_list_admission(ctx, client)
    prices = []
    for key, nano in CachePrices(ctx.settings.cache_prices_nano()).items():
        chain, _, method = key.partition(":")
        prices.append(CachePriceOut(chain_id=chain, method=method or "*", cost=credits_out(nano)))
    return respond(prices)


# Submissions -------------------------------------------------------------------------------

HttpsUrl = Annotated[
    StrictStr,
    Field(max_length=2048, pattern=r"^[hH][tT][tT][pP][sS]://", description="An https:// URL."),
    NoControls,
]
ShortText = Annotated[StrictStr, Field(max_length=200), NoControls]


class ChainRequestIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    chain_id: ChainId
    short_name: Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls] | None = None
    native_currency_name: (
        Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls] | None
    ) = None
    native_currency_decimals: Annotated[int, Field(ge=0, le=255)] | None = None
    info_url: HttpUrl | None = None
    icon_url: HttpUrl | None = None
    rpc_urls: Annotated[
        list[HttpsUrl],
        Field(
            min_length=1,
            max_length=5,
            description="1 to 5 https:// RPC URLs; each is screened and at least one must "
            "answer with the declared chain ID.",
        ),
    ]
    explorer_urls: Annotated[list[HttpUrl], Field(max_length=10)] = []
    requestor_email: Email | None = None
    requestor_name: ShortText | None = None


class NodeRequestIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    # Checked again once normalised: percent-encoding can make it longer than the column.
    url: Annotated[
        HttpsUrl, AfterValidator(refuse_userinfo), AfterValidator(normalise_url), UrlLength
    ] = Field(description="The node's https:// URL; it must pass EVM screening.")
    vm: Literal["evm"] = "evm"
    email: Email | None = None
    privacy_policy_url: HttpUrl | None = None
    notes: Annotated[StrictStr, Field(max_length=2000), NoControlsButLayout] | None = None


_SUBMISSION_ERRORS: dict[int | str, dict[str, Any]] = {
    **_LIMITED,
    400: {"model": ErrorBody, "description": "Screening failed; `details` says why, per URL."},
    401: {"model": ErrorBody, "description": "An X-Api-Key was given but is not valid."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}


def _submitter(client: str, caller: Principal | None, daily_limit: int) -> submissions.Submitter:
    exempt = caller is not None and caller.skips_submission_limits
    return submissions.Submitter(client=client, exempt=exempt, daily_limit=daily_limit)


@router.post(
    "/chains/requests",
    status_code=201,
    response_model=Created,
    responses=_SUBMISSION_ERRORS,
    summary="Ask for a new chain to be listed",
)
async def submit_chain_request(
    body: ChainRequestIn, ctx: Context, client: ClientBlock, caller: OptionalCaller
) -> Response:
    submitter = _submitter(client, caller, ctx.settings.chain_requests_per_ip_per_day)
    values = body.model_dump()
    request_id = await submissions.submit_chain_request(
        ctx.engine, ctx.submission_guard, ctx.submission_gate, submitter, values
    )
    return respond(Created(id=request_id), 201)


@router.post(
    "/nodes/requests",
    status_code=201,
    response_model=Created,
    responses=_SUBMISSION_ERRORS,
    summary="Offer a node to be added",
)
async def submit_node_request(
    body: NodeRequestIn, ctx: Context, client: ClientBlock, caller: OptionalCaller
) -> Response:
    submitter = _submitter(client, caller, ctx.settings.node_requests_per_ip_per_day)
    request_id = await submissions.submit_node_request(
        ctx.engine, ctx.submission_guard, ctx.submission_gate, submitter, body.model_dump()
    )
    return respond(Created(id=request_id), 201)
