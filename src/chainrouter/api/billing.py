"""Buying credits (docs/billing.md): a customer's deposit address, deposits and purchases, card
checkout, Stripe's webhook, and the operator's view of money in (`/admin/billing/...`)."""

from __future__ import annotations

import io
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

import segno
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from chainrouter.api.admin import NEXT_BEFORE_ID, LedgerLineOut
from chainrouter.api.common import ChainIdOut, CreditsOut, OutModel, credits_out
from chainrouter.api.deps import Administrator, Caller, Context
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.domain.deposits import DepositAsset, DepositState, format_units, payment_uri
from chainrouter.management import billing
from chainrouter.management.errors import InvalidInputError
from chainrouter.operator_config.model import MAX_ROW_ID, ChainId, Credits
from chainrouter.payments.card import DEFAULT_TERMS, CardPayments, require

router = APIRouter(route_class=ExactJsonRoute)

_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked management token."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}
_NOT_OFFERED: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "The operator offers no such payment."}
}
_PAGED = {
    "headers": {
        NEXT_BEFORE_ID: {
            "description": "Pass as `before_id` for the next (older) page; absent on the last.",
            "schema": {"type": "integer"},
        }
    }
}
Limit = Annotated[int, Query(ge=1, le=1000)]
BeforeId = Annotated[
    int | None,
    Query(ge=1, le=MAX_ROW_ID, description=f"Only older ones: the `{NEXT_BEFORE_ID}` of the page "),
]
RateOut = Annotated[Decimal, Field(json_schema_extra={"type": "number"})]


def card_of(request: Request) -> CardPayments | None:
    found: CardPayments | None = request.app.state.card
    return found


class AssetOut(OutModel):
    chain_id: ChainIdOut
    chain_name: str
    asset: str = Field(description="`native`, or the ERC-20 contract's address.")
    symbol: str
    decimals: int | None = Field(description="null: read from the token contract.")
    credits_per_unit: RateOut = Field(description="Credits one whole unit buys, exact.")
    confirmations: int | None = Field(
        description="Confirmations before it is credited; null: once the block is finalized."
    )
    minimum: RateOut = Field(description="Smallest deposit credited, in whole units.")

    @classmethod
    def of(cls, asset: DepositAsset, chain_name: str) -> AssetOut:
        return cls(
            chain_id=str(asset.chain_id),
            chain_name=chain_name,
            asset=asset.asset,
            symbol=asset.symbol,
            decimals=asset.decimals,
            credits_per_unit=asset.credits_per_unit,
            confirmations=asset.confirmations,
            minimum=asset.minimum,
        )


class CardOut(OutModel):
    enabled: bool
    currency: str = "usd"
    min_credits: CreditsOut
    max_credits: CreditsOut


class OptionsOut(OutModel):
    deposits: list[AssetOut] = Field(description="What may be deposited, per chain.")
    card: CardOut


class DepositAddressOut(OutModel):
    chain_id: int
    address: str = Field(description="Your deposit address (EIP-55), the same on every chain.")
    assets: list[AssetOut]


class DepositOut(OutModel):
    id: int
    customer_id: int
    chain_id: ChainIdOut
    asset: str
    symbol: str
    tx_hash: str
    log_index: int = Field(description="-1 for a native transfer.")
    block_number: int
    sender: str
    recipient: str
    amount: RateOut = Field(description="In whole units of the asset, exact.")
    credits: CreditsOut = Field(description="What it is worth (credited once final).")
    state: DepositState
    confirmations: int | None = Field(
        description="Of its block, as the watcher last saw the chain (pending ones)."
    )
    confirmations_needed: int | None = Field(description="null: until its block is finalized.")
    reference: str = Field(description="The ledger reference of its purchase.")
    seen_at: datetime
    final_at: datetime | None

    @classmethod
    def of(cls, view: billing.DepositView) -> DepositOut:
        d = view.deposit
        return cls(
            id=d.id,
            customer_id=d.customer_id,
            chain_id=str(d.chain_id),
            asset=d.asset,
            symbol=view.symbol,
            tx_hash=d.tx_hash,
            log_index=d.log_index,
            block_number=d.block_number,
            sender=d.sender,
            recipient=d.recipient,
            amount=Decimal(format_units(d.amount, d.decimals)),
            credits=credits_out(d.credits_nano),
            state=d.state,
            confirmations=view.confirmations if d.state is DepositState.PENDING else None,
            confirmations_needed=view.confirmations_needed,
            reference=f"deposit:{d.chain_id}:{d.tx_hash}:{d.log_index}",
            seen_at=d.seen_at,
            final_at=d.final_at,
        )


class CheckoutIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    credits: Annotated[Credits, Field(gt=0)] = Field(
        description="Credits to buy (1 credit = 1 USD), at most 2 decimal places."
    )


class CheckoutOut(OutModel):
    session_id: str
    url: str = Field(description="Stripe's Checkout page: send the customer there.")
    credits: CreditsOut


class WebhookOut(OutModel):
    received: bool
    outcome: str


def _page_headers(next_before_id: int | None) -> dict[str, str] | None:
    return None if next_before_id is None else {NEXT_BEFORE_ID: str(next_before_id)}


@router.get(
    "/billing/options",
    response_model=OptionsOut,
    responses=_AUTH,
    tags=["billing"],
    summary="How credits can be bought here: assets per chain, and card payment",
)
async def options(caller: Caller, ctx: Context, request: Request) -> Response:
    del caller
    config = await run_in_threadpool(billing.offered_assets, ctx.engine)
    terms = config.card or DEFAULT_TERMS
    offered = config.deposit_xpub is not None
    return respond(
        OptionsOut(
            deposits=[
                AssetOut.of(asset, config.chain_names.get(asset.chain_id, ""))
                for asset in (config.assets if offered else ())
            ],
            card=CardOut(
                enabled=card_of(request) is not None,
                min_credits=credits_out(terms.min_credits_nano),
                max_credits=credits_out(terms.max_credits_nano),
            ),
        )
    )


@router.get(
    "/billing/deposit-address",
    response_model=DepositAddressOut,
    responses=_AUTH | _NOT_OFFERED,
    tags=["billing"],
    summary="Your address for deposits on a chain, and what may be deposited there",
)
async def deposit_address(
    caller: Caller,
    ctx: Context,
    chain_id: Annotated[ChainId, Query(description="Decimal or 0x hex.")],
) -> Response:
    found = await run_in_threadpool(
        billing.deposit_address, ctx.engine, caller.customer_id, chain_id
    )
    config = await run_in_threadpool(billing.offered_assets, ctx.engine)
    name = config.chain_names.get(chain_id, "")
    return respond(
        DepositAddressOut(
            chain_id=found.chain_id,
            address=found.address,
            assets=[AssetOut.of(asset, name) for asset in found.assets],
        )
    )


@router.get(
    "/billing/deposit-qr",
    responses=_AUTH
    | _NOT_OFFERED
    | {200: {"content": {"image/svg+xml": {}}, "description": "A QR code (SVG)."}},
    tags=["billing"],
    summary="A QR code of an EIP-681 payment request to your deposit address",
)
async def deposit_qr(
    caller: Caller,
    ctx: Context,
    chain_id: Annotated[ChainId, Query(description="Decimal or 0x hex.")],
    asset: Annotated[str, Query(max_length=42, description="`native` or the token's address.")],
) -> Response:
    found = await run_in_threadpool(
        billing.deposit_address, ctx.engine, caller.customer_id, chain_id
    )
    wanted = asset.strip().lower()
    if wanted not in {a.asset for a in found.assets}:
        raise InvalidInputError(
            f"asset: {asset[:42]!r} is not accepted on chain {chain_id}",
            details=[{"field": "asset", "message": "not accepted on this chain"}],
        )
    svg = io.BytesIO()
    segno.make(payment_uri(wanted, chain_id, found.address), error="m").save(
        svg, kind="svg", scale=4, border=2, xmldecl=False
    )
    return Response(
        svg.getvalue(), media_type="image/svg+xml", headers={"Cache-Control": "no-store"}
    )


@router.get(
    "/billing/deposits",
    response_model=list[DepositOut],
    responses={**_AUTH, 200: _PAGED},
    tags=["billing"],
    summary="Your deposits, pending and final, newest first",
)
async def my_deposits(
    caller: Caller, ctx: Context, limit: Limit = 100, before_id: BeforeId = None
) -> Response:
    page = await run_in_threadpool(
        lambda: billing.list_deposits(
            ctx.engine, customer_id=caller.customer_id, limit=limit, before_id=before_id
        )
    )
    return respond(
        [DepositOut.of(view) for view in page.deposits],
        headers=_page_headers(page.next_before_id),
    )


@router.get(
    "/billing/purchases",
    response_model=list[LedgerLineOut],
    responses={**_AUTH, 200: _PAGED},
    tags=["billing"],
    summary="Your ledger's purchases, grants and adjustments (not usage), newest first",
)
async def my_purchases(
    caller: Caller, ctx: Context, limit: Limit = 100, before_id: BeforeId = None
) -> Response:
    page = await run_in_threadpool(
        lambda: billing.purchases(ctx.engine, caller.customer_id, limit=limit, before_id=before_id)
    )
    return respond(
        [LedgerLineOut.of(line) for line in page.lines], headers=_page_headers(page.next_before_id)
    )


@router.post(
    "/billing/checkout",
    status_code=201,
    response_model=CheckoutOut,
    responses=_AUTH
    | _NOT_OFFERED
    | {502: {"model": ErrorBody, "description": "Stripe did not make the checkout."}},
    tags=["billing"],
    summary="Start a card payment: the Stripe Checkout page to send the customer to",
)
async def checkout(body: CheckoutIn, caller: Caller, ctx: Context, request: Request) -> Response:
    card = require(card_of(request))
    return_url = str(request.base_url).rstrip("/") + "/dashboard"
    made = await run_in_threadpool(
        card.checkout, ctx.engine, caller.customer_id, body.credits, return_url
    )
    out = CheckoutOut(session_id=made.session_id, url=made.url, credits=credits_out(body.credits))
    return respond(out, 201, headers={"Cache-Control": "no-store"})


@router.post(
    "/webhooks/stripe",
    response_model=WebhookOut,
    responses={
        400: {"model": ErrorBody, "description": "The signature does not verify."},
        404: _NOT_OFFERED[404],
    },
    tags=["billing"],
    summary="Stripe's events (signed): paid sessions, refunds, disputes",
)
async def stripe_webhook(request: Request, ctx: Context) -> Response:
    card = require(card_of(request))
    payload = await request.body()
    outcome = await run_in_threadpool(
        card.receive, ctx.engine, payload, request.headers.get("stripe-signature")
    )
    return respond(WebhookOut(received=True, outcome=outcome))


# Administrators --------------------------------------------------------------------------


class StateTotalsOut(OutModel):
    deposits: int
    amount: RateOut = Field(description="In whole units of the asset.")
    credits: CreditsOut


class AssetMoneyOut(OutModel):
    chain_id: ChainIdOut
    asset: str
    symbol: str
    seen: StateTotalsOut = Field(description="Every deposit found, whatever its state.")
    pending: StateTotalsOut
    credited: StateTotalsOut
    below_minimum: StateTotalsOut
    reorged: StateTotalsOut
    next_block: int | None = Field(description="The first block not yet read for crediting.")
    head_block: int | None
    final_block: int | None
    checked_at: datetime | None


class CardMoneyOut(OutModel):
    state: str = Field(description="open (not paid yet), paid, or mismatch (not credited).")
    sessions: int
    credits: CreditsOut


class MoneyInOut(OutModel):
    deposits: list[AssetMoneyOut]
    card: list[CardMoneyOut]


def _totals(summary: billing.AssetSummary, states: list[DepositState]) -> StateTotalsOut:
    count = sum(summary.counts.get(s, (0, 0, 0))[0] for s in states)
    amount = sum(summary.counts.get(s, (0, 0, 0))[1] for s in states)
    nano = sum(summary.counts.get(s, (0, 0, 0))[2] for s in states)
    units = Decimal(format_units(amount, summary.decimals)) if summary.decimals is not None else 0
    return StateTotalsOut(deposits=count, amount=Decimal(units), credits=credits_out(nano))


@router.get(
    "/admin/billing/summary",
    response_model=MoneyInOut,
    responses=_AUTH | {403: {"model": ErrorBody, "description": "Not an administrator."}},
    tags=["admin"],
    summary="Money in: deposits per chain and asset by state, the watchers' progress, card",
)
async def money_in(_: Administrator, ctx: Context) -> Response:
    found = await run_in_threadpool(billing.money_in, ctx.engine)
    out = MoneyInOut(
        deposits=[
            AssetMoneyOut(
                chain_id=str(s.chain_id),
                asset=s.asset,
                symbol=s.symbol,
                seen=_totals(s, list(DepositState)),
                pending=_totals(s, [DepositState.PENDING]),
                credited=_totals(s, [DepositState.CREDITED]),
                below_minimum=_totals(s, [DepositState.BELOW_MINIMUM]),
                reorged=_totals(s, [DepositState.REORGED]),
                next_block=s.next_block,
                head_block=s.head_block,
                final_block=s.final_block,
                checked_at=s.checked_at,
            )
            for s in found.assets
        ],
        card=[
            CardMoneyOut(state=state, sessions=sessions, credits=credits_out(nano))
            for state, (sessions, nano) in sorted(found.card.items())
        ],
    )
    return respond(out)


@router.get(
    "/admin/billing/deposits",
    response_model=list[DepositOut],
    responses={
        **_AUTH,
        403: {"model": ErrorBody, "description": "Not an administrator."},
        200: _PAGED,
    },
    tags=["admin"],
    summary="Every customer's deposits, newest first",
)
async def all_deposits(
    _: Administrator,
    ctx: Context,
    customer_id: Annotated[int | None, Query(ge=1, le=MAX_ROW_ID)] = None,
    chain_id: Annotated[ChainId | None, Query()] = None,
    state: Annotated[DepositState | None, Query()] = None,
    limit: Limit = 100,
    before_id: BeforeId = None,
) -> Response:
    page = await run_in_threadpool(
        lambda: billing.list_deposits(
            ctx.engine,
            customer_id=customer_id,
            chain_id=chain_id,
            state=state,
            limit=limit,
            before_id=before_id,
        )
    )
    return respond(
        [DepositOut.of(view) for view in page.deposits],
        headers=_page_headers(page.next_before_id),
    )
