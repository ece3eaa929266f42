"""Administrator routes (`/admin/...`): customers, credits, management tokens, providers and
their customers, plans and prices, and the review of chain and node requests."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import (
    ChainIdOut,
    CreditsOut,
    IssuedTokenOut,
    MethodRows,
    NodeChecksOut,
    OutModel,
    PathChainId,
    PathId,
    PlanMethodOut,
    PlanOut,
    TokenOut,
    credits_out,
)
from chainrouter.api.deps import Administrator, Context
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.api.provider import NodeStatusOut, status_out
from chainrouter.domain.enums import LedgerEntryKind, Role, SubmissionStatus
from chainrouter.domain.records import (
    ChainRequest,
    Customer,
    LedgerLine,
    Node,
    NodeChecksRecord,
    NodeRequest,
    Provider,
)
from chainrouter.management import admin, nodes, submissions
from chainrouter.operator_config.model import (
    MAX_ROW_ID,
    Credits,
    Email,
    Name,
    NoControls,
    PlanTerms,
    RowId,
    Slug,
    Text,
)

router = APIRouter(prefix="/admin", route_class=ExactJsonRoute, tags=["admin"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked management token."},
    403: {"model": ErrorBody, "description": "The token is not an administrator's."},
    404: {"model": ErrorBody, "description": "No such record."},
    409: {"model": ErrorBody, "description": "Conflicts with a record that exists."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_ROW_ID)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Customers ---------------------------------------------------------------------------------


class CustomerIn(_In):
    name: Name
    email: Email


class CustomerOut(OutModel):
    id: int
    name: str
    email: str
    balance: CreditsOut
    provider_id: int | None = Field(description="The provider this customer acts for, if any.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, customer: Customer) -> CustomerOut:
        return cls(
            id=customer.id,
            name=customer.name,
            email=customer.email,
            balance=credits_out(customer.balance_nano),
            provider_id=customer.provider_id,
            created_at=customer.created_at,
            updated_at=customer.updated_at,
        )


class ProviderLinkIn(_In):
    provider_id: RowId | None = Field(description="null removes the link.")


@router.post("/customers", status_code=201, response_model=CustomerOut, responses=_ERRORS)
async def create_customer(body: CustomerIn, _: Administrator, ctx: Context) -> Response:
    customer = await run_in_threadpool(
        admin.create_customer, ctx.engine, name=body.name, email=body.email
    )
    return respond(CustomerOut.of(customer), 201)


@router.get("/customers", response_model=list[CustomerOut], responses=_ERRORS)
async def list_customers(
    _: Administrator, ctx: Context, limit: Limit = 100, offset: Offset = 0
) -> Response:
    found = await run_in_threadpool(admin.list_customers, ctx.engine, limit=limit, offset=offset)
    return respond([CustomerOut.of(c) for c in found])


@router.get("/customers/{customer_id}", response_model=CustomerOut, responses=_ERRORS)
async def get_customer(customer_id: PathId, _: Administrator, ctx: Context) -> Response:
    customer = await run_in_threadpool(admin.get_customer, ctx.engine, customer_id)
    return respond(CustomerOut.of(customer))


@router.put(
    "/customers/{customer_id}/provider",
    response_model=CustomerOut,
    responses=_ERRORS,
    summary="Link a customer to a provider (its tokens then reach /provider routes)",
)
async def link_provider(
    customer_id: PathId, body: ProviderLinkIn, _: Administrator, ctx: Context
) -> Response:
    customer = await run_in_threadpool(
        admin.link_customer_to_provider, ctx.engine, customer_id, body.provider_id
    )
    return respond(CustomerOut.of(customer))


# Credits -----------------------------------------------------------------------------------


class CreditIn(_In):
    kind: Literal[LedgerEntryKind.PURCHASE, LedgerEntryKind.GRANT]
    amount: Annotated[Credits, Field(gt=0)] = Field(
        description="Credits to add, exact to 9 decimal places (a string or a number)."
    )
    reference: Annotated[StrictStr, Field(min_length=1, max_length=200), NoControls] | None = Field(
        default=None,
        description="An idempotency reference (e.g. the payment ID): repeating a call with the "
        "same reference records the credit once.",
    )
    note: Text = ""


class LedgerLineOut(OutModel):
    id: int
    customer_id: int
    kind: LedgerEntryKind
    amount: CreditsOut
    balance_after: CreditsOut
    reference: str | None
    note: str
    created_at: datetime

    @classmethod
    def of(cls, line: LedgerLine) -> LedgerLineOut:
        return cls(
            id=line.id,
            customer_id=line.customer_id,
            kind=line.kind,
            amount=credits_out(line.amount_nano),
            balance_after=credits_out(line.balance_after_nano),
            reference=line.reference,
            note=line.note,
            created_at=line.created_at,
        )


@router.post(
    "/customers/{customer_id}/credits",
    status_code=201,
    response_model=LedgerLineOut,
    responses={**_ERRORS, 200: {"model": LedgerLineOut, "description": "Already recorded."}},
    summary="Record a purchase or grant; applies at once, never expires",
)
async def add_credits(
    customer_id: PathId, body: CreditIn, _: Administrator, ctx: Context
) -> Response:
    outcome = await run_in_threadpool(
        admin.add_credits,
        ctx.engine,
        customer_id,
        kind=LedgerEntryKind(body.kind),
        amount_nano=body.amount,
        reference=body.reference,
        note=body.note,
    )
    return respond(LedgerLineOut.of(outcome.entry), 201 if outcome.created else 200)


NEXT_BEFORE_ID = "X-Next-Before-Id"


@router.get(
    "/customers/{customer_id}/credits",
    response_model=list[LedgerLineOut],
    responses={
        **_ERRORS,
        200: {
            "description": "Up to `limit` entries, newest first.",
            "headers": {
                NEXT_BEFORE_ID: {
                    "description": "Pass as `before_id` for the next (older) page; absent on "
                    "the last page.",
                    "schema": {"type": "integer"},
                }
            },
        },
    },
    summary="The customer's ledger, newest first",
    description="Page with `before_id`: usage flushes add entries every few seconds, which "
    "shift `offset` (kept for compatibility) so that pages repeat entries; `before_id` does not.",
)
async def list_credits(
    customer_id: PathId,
    _: Administrator,
    ctx: Context,
    limit: Limit = 100,
    offset: Offset = 0,
    before_id: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_ROW_ID,
            description=f"Only entries older than this id: the `{NEXT_BEFORE_ID}` of the page "
            "before.",
        ),
    ] = None,
) -> Response:
    page = await run_in_threadpool(
        admin.list_ledger, ctx.engine, customer_id, limit=limit, offset=offset, before_id=before_id
    )
    headers = None if page.next_before_id is None else {NEXT_BEFORE_ID: str(page.next_before_id)}
    return respond([LedgerLineOut.of(line) for line in page.lines], headers=headers)


# Management tokens -------------------------------------------------------------------------


class TokenIn(_In):
    label: Name
    role: Role = Role.CUSTOMER


@router.post(
    "/customers/{customer_id}/tokens",
    status_code=201,
    response_model=IssuedTokenOut,
    responses=_ERRORS,
    summary="Issue a management token (the secret is returned once)",
)
async def issue_token(
    customer_id: PathId, body: TokenIn, _: Administrator, ctx: Context
) -> Response:
    issued = await run_in_threadpool(
        admin.issue_token, ctx.engine, customer_id, label=body.label, role=body.role
    )
    out = IssuedTokenOut(**TokenOut.of(issued.token).model_dump(), token=issued.secret)
    return respond(out, 201, headers={"Cache-Control": "no-store"})


@router.get("/customers/{customer_id}/tokens", response_model=list[TokenOut], responses=_ERRORS)
async def list_tokens(customer_id: PathId, _: Administrator, ctx: Context) -> Response:
    tokens = await run_in_threadpool(admin.list_tokens, ctx.engine, customer_id)
    return respond([TokenOut.of(token) for token in tokens])


@router.post(
    "/tokens/{token_id}/revoke",
    response_model=TokenOut,
    responses=_ERRORS,
    summary="Revoke a management token for good",
)
async def revoke_token(token_id: PathId, _: Administrator, ctx: Context) -> Response:
    token = await run_in_threadpool(admin.revoke_token, ctx.engine, token_id)
    return respond(TokenOut.of(token))


# Providers, plans and prices ---------------------------------------------------------------


class ProviderIn(_In):
    slug: Slug
    name: Name


class ProviderOut(OutModel):
    id: int
    slug: str
    name: str
    created_at: datetime

    @classmethod
    def of(cls, provider: Provider) -> ProviderOut:
        return cls(
            id=provider.id, slug=provider.slug, name=provider.name, created_at=provider.created_at
        )


@router.post("/providers", status_code=201, response_model=ProviderOut, responses=_ERRORS)
async def create_provider(body: ProviderIn, _: Administrator, ctx: Context) -> Response:
    provider = await run_in_threadpool(
        admin.create_provider, ctx.engine, slug=body.slug, name=body.name
    )
    return respond(ProviderOut.of(provider), 201)


@router.get("/providers", response_model=list[ProviderOut], responses=_ERRORS)
async def list_providers(_: Administrator, ctx: Context) -> Response:
    found = await run_in_threadpool(admin.list_providers, ctx.engine)
    return respond([ProviderOut.of(p) for p in found])


class PlanIn(PlanTerms):
    name: Name

    def columns(self) -> dict[str, Any]:
        return {**self.term_columns(), "name": self.name}


class PlanPatch(PlanTerms):
    """Fields left out keep their stored value."""

    name: Name | None = None

    def columns(self) -> dict[str, Any]:
        given = self.term_columns(only_given=True)
        return given if self.name is None else {**given, "name": self.name}


@router.post(
    "/providers/{provider_id}/plans", status_code=201, response_model=PlanOut, responses=_ERRORS
)
async def create_plan(
    provider_id: PathId, body: PlanIn, _: Administrator, ctx: Context
) -> Response:
    plan = await run_in_threadpool(admin.create_plan, ctx.engine, provider_id, body.columns())
    return respond(PlanOut.of(plan), 201)


@router.get("/providers/{provider_id}/plans", response_model=list[PlanOut], responses=_ERRORS)
async def list_plans(provider_id: PathId, _: Administrator, ctx: Context) -> Response:
    found = await run_in_threadpool(admin.list_plans, ctx.engine, provider_id)
    cycles = await run_in_threadpool(admin.current_cycles, ctx.engine, found)
    return respond([PlanOut.of(plan, cycles.get(plan.id)) for plan in found])


@router.patch("/plans/{plan_id}", response_model=PlanOut, responses=_ERRORS)
async def update_plan(plan_id: PathId, body: PlanPatch, _: Administrator, ctx: Context) -> Response:
    plan = await run_in_threadpool(admin.update_plan, ctx.engine, plan_id, body.columns())
    return respond(PlanOut.of(plan))


@router.get("/plans/{plan_id}/methods", response_model=list[PlanMethodOut], responses=_ERRORS)
async def list_plan_methods(plan_id: PathId, _: Administrator, ctx: Context) -> Response:
    rows = await run_in_threadpool(admin.list_plan_methods, ctx.engine, plan_id)
    return respond([PlanMethodOut.of(row) for row in rows])


@router.post(
    "/plans/{plan_id}/methods",
    response_model=list[PlanMethodOut],
    responses=_ERRORS,
    summary="Create or re-price 1 to 500 method rows; returns all the plan's rows",
)
async def upsert_plan_methods(
    plan_id: PathId, body: MethodRows, _: Administrator, ctx: Context
) -> Response:
    rows = await run_in_threadpool(
        admin.upsert_plan_methods, ctx.engine, plan_id, [row.columns() for row in body]
    )
    return respond([PlanMethodOut.of(row) for row in rows])


@router.delete("/plans/{plan_id}/methods/{method_id}", status_code=204, responses=_ERRORS)
async def delete_plan_method(
    plan_id: PathId, method_id: PathId, _: Administrator, ctx: Context
) -> Response:
    await run_in_threadpool(admin.delete_plan_method, ctx.engine, plan_id, method_id)
    return Response(status_code=204)


# Review of submissions ---------------------------------------------------------------------


class ScreeningCheckOut(OutModel):
    check: str
    passed: bool
    detail: str


class ScreeningOut(OutModel):
    url: str
    passed: bool
    chain_id: ChainIdOut | None
    checks: list[ScreeningCheckOut]


class ChainRequestOut(OutModel):
    id: int
    status: SubmissionStatus
    name: str
    chain_id: ChainIdOut
    short_name: str | None
    native_currency_name: str | None
    native_currency_decimals: int | None
    info_url: str | None
    icon_url: str | None
    rpc_urls: list[str]
    explorer_urls: list[str]
    requestor_email: str | None
    requestor_name: str | None
    screening: list[ScreeningOut]
    review_note: str | None
    reviewed_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, request: ChainRequest) -> ChainRequestOut:
        fields = {name: getattr(request, name) for name in cls.model_fields}
        fields["chain_id"] = str(request.chain_id)
        fields["rpc_urls"] = list(request.rpc_urls)
        fields["explorer_urls"] = list(request.explorer_urls)
        return cls(**fields)


class NodeRequestOut(OutModel):
    id: int
    status: SubmissionStatus
    name: str
    url: str
    vm: str
    chain_id: ChainIdOut | None = Field(description="As the node reported it when screened.")
    email: str | None
    privacy_policy_url: str | None
    notes: str | None
    screening: list[ScreeningOut]
    review_note: str | None
    reviewed_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, request: NodeRequest) -> NodeRequestOut:
        fields = {name: getattr(request, name) for name in cls.model_fields}
        fields["chain_id"] = None if request.chain_id is None else str(request.chain_id)
        return cls(**fields)


class ApproveChainIn(_In):
    native_currency_symbol: Annotated[StrictStr, Field(min_length=1, max_length=40), NoControls]
    note: Text = ""


class ApproveNodeIn(_In):
    plan_id: RowId = Field(description="The plan the node joins (it serves the screened chain).")
    note: Text = ""


class RejectIn(_In):
    note: Text = ""


# The response cache ------------------------------------------------------------------------


class CachePurgeOut(OutModel):
    chain_id: ChainIdOut
    cache_generation: int = Field(
        description="Purges of this chain so far. Routers drop its cached answers when they "
        "next reload their configuration (within CHAINROUTER_SYNC_INTERVAL_S)."
    )


@router.post(
    "/chains/{chain_id}/cache/purge",
    response_model=CachePurgeOut,
    responses=_ERRORS,
    summary="Drop every router's cached answers of one chain",
)
async def purge_chain_cache(chain_id: PathChainId, _: Administrator, ctx: Context) -> Response:
    generation = await run_in_threadpool(admin.purge_chain_cache, ctx.engine, chain_id)
    return respond(CachePurgeOut(chain_id=str(chain_id), cache_generation=generation))


StatusFilter = Annotated[SubmissionStatus | None, Query(description="Only this status.")]


@router.get("/chain-requests", response_model=list[ChainRequestOut], responses=_ERRORS)
async def list_chain_requests(
    _: Administrator,
    ctx: Context,
    status: StatusFilter = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    found = await run_in_threadpool(
        submissions.list_chain_requests, ctx.engine, status, limit=limit, offset=offset
    )
    return respond([ChainRequestOut.of(r) for r in found])


@router.post(
    "/chain-requests/{request_id}/approve",
    response_model=ChainRequestOut,
    responses=_ERRORS,
    summary="Approve: the chain joins the catalog",
)
async def approve_chain_request(
    request_id: PathId, body: ApproveChainIn, _: Administrator, ctx: Context
) -> Response:
    reviewed = await run_in_threadpool(
        lambda: submissions.approve_chain_request(
            ctx.engine,
            request_id,
            native_currency_symbol=body.native_currency_symbol,
            note=body.note,
        )
    )
    return respond(ChainRequestOut.of(reviewed))


@router.post("/chain-requests/{request_id}/reject", status_code=204, responses=_ERRORS)
async def reject_chain_request(
    request_id: PathId, body: RejectIn, _: Administrator, ctx: Context
) -> Response:
    await run_in_threadpool(submissions.reject_request, ctx.engine, "chain", request_id, body.note)
    return Response(status_code=204)


@router.get("/node-requests", response_model=list[NodeRequestOut], responses=_ERRORS)
async def list_node_requests(
    _: Administrator,
    ctx: Context,
    status: StatusFilter = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    found = await run_in_threadpool(
        submissions.list_node_requests, ctx.engine, status, limit=limit, offset=offset
    )
    return respond([NodeRequestOut.of(r) for r in found])


@router.post(
    "/node-requests/{request_id}/approve",
    response_model=NodeRequestOut,
    responses=_ERRORS,
    summary="Approve: the node joins a plan and starts receiving traffic",
)
async def approve_node_request(
    request_id: PathId, body: ApproveNodeIn, _: Administrator, ctx: Context
) -> Response:
    reviewed = await submissions.screen_and_approve_node_request(
        ctx.engine, ctx.guard, request_id, plan_id=body.plan_id, note=body.note
    )
    return respond(NodeRequestOut.of(reviewed))


@router.post("/node-requests/{request_id}/reject", status_code=204, responses=_ERRORS)
async def reject_node_request(
    request_id: PathId, body: RejectIn, _: Administrator, ctx: Context
) -> Response:
    await run_in_threadpool(submissions.reject_request, ctx.engine, "node", request_id, body.note)
    return Response(status_code=204)


# Cordons --------------------------------------------------------------------------------------


class CordonOut(OutModel):
    node_id: int
    provider_id: int
    plan_id: int
    chain_id: ChainIdOut
    url: str
    status: str = Field(description="cordoned, or what it is since the cordon was lifted.")
    reason: str | None = Field(description="Why it is cordoned; null once lifted.")
    cordoned_at: datetime | None = Field(description="When it was last cordoned.")
    disputed_answers: int = Field(
        description="Its answers disputed by its cordons (those since its last clean audit), "
        "in all: refunded to the customers, not paid to its provider."
    )
    disputed_credits: CreditsOut
    watched_until: datetime | None = Field(
        description="Until when its answers are audited at the higher rate, once lifted."
    )
    checks: NodeChecksOut = Field(description="What audits and proofs found of it, in all.")

    @classmethod
    def of(cls, node: Node, checks: NodeChecksRecord) -> CordonOut:
        return cls(
            node_id=node.id,
            provider_id=node.provider_id,
            plan_id=node.plan_id,
            chain_id=str(node.chain_id),
            url=node.url,
            status=node.status,
            reason=node.cordon_reason,
            cordoned_at=node.cordoned_at,
            disputed_answers=node.disputed_calls,
            disputed_credits=credits_out(node.disputed_nano),
            watched_until=node.watched_until,
            checks=NodeChecksOut.of(checks),
        )


@router.get(
    "/cordons",
    response_model=list[CordonOut],
    responses=_ERRORS,
    summary="Nodes cordoned now, or whose answers were ever disputed, latest cordon first",
)
async def list_cordons(
    _: Administrator, ctx: Context, limit: Limit = 100, offset: Offset = 0
) -> Response:
    found = await run_in_threadpool(nodes.cordoned_nodes, ctx.engine, limit=limit, offset=offset)
    return respond([CordonOut.of(node, checks) for node, checks in found])


@router.post(
    "/nodes/{node_id}/lift-cordon",
    response_model=CordonOut,
    responses=_ERRORS,
    summary="Lift a node's cordon: it serves again, audited at the higher rate for a day",
)
async def lift_cordon(node_id: PathId, _: Administrator, ctx: Context) -> Response:
    node = await run_in_threadpool(nodes.lift_cordon, ctx.engine, node_id)
    checks = await run_in_threadpool(nodes.checks_of, ctx.engine, node_id)
    return respond(CordonOut.of(node, checks))


@router.get(
    "/nodes/{node_id}/status",
    response_model=NodeStatusOut,
    responses=_ERRORS,
    summary="Any HTTP node's status as its provider sees it: health, head lag, cordon, checks",
)
async def get_node_status(node_id: PathId, _: Administrator, ctx: Context) -> Response:
    report = await run_in_threadpool(nodes.any_node_status, ctx.engine, node_id)
    return respond(status_out(report))
