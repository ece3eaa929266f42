"""Provider routes (`/provider/...`): a token whose customer is linked to a provider reads its
plans, prices their methods, and manages its nodes. Another provider's plan or node is 404, so
that its existence is never revealed; a token without a provider link is 403
`provider not resolved`."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import AwareDatetime, Field
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import (
    ChainIdOut,
    CreditsOut,
    MethodRows,
    NodeChecksOut,
    NumberOut,
    OutModel,
    PathId,
    PlanMethodOut,
    PlanOut,
    credits_out,
)
from chainrouter.api.deps import Context, ProviderId
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.api.usage_out import Period
from chainrouter.contracts.provider import HttpNodeIn, NodeKind, NodeStatusIn, WsNodeIn
from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.enums import NodeStatus
from chainrouter.domain.records import Node
from chainrouter.management import admin, earnings, nodes
from chainrouter.management.usage import Granularity, window_of
from chainrouter.operator_config.model import MAX_ROW_ID

router = APIRouter(prefix="/provider", route_class=ExactJsonRoute, tags=["provider"])

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked management token."},
    403: {
        "model": ErrorBody,
        "description": "The token's customer is not linked to a provider (provider not resolved).",
    },
    404: {"model": ErrorBody, "description": "Not one of your provider's plans or nodes."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}


@router.get(
    "/plans",
    response_model=list[PlanOut],
    responses=ERRORS,
    summary="Your provider's plans (read only; administrators create and price plans)",
)
async def list_plans(provider_id: ProviderId, ctx: Context) -> Response:
    plans = await run_in_threadpool(admin.list_plans, ctx.engine, provider_id)
    cycles = await run_in_threadpool(admin.current_cycles, ctx.engine, plans)
    return respond([PlanOut.of(plan, cycles.get(plan.id)) for plan in plans])


@router.get(
    "/plans/{plan_id}/methods",
    response_model=list[PlanMethodOut],
    responses=ERRORS,
    summary="The method prices of one of your plans",
)
async def list_plan_methods(plan_id: PathId, provider_id: ProviderId, ctx: Context) -> Response:
    rows = await run_in_threadpool(admin.list_plan_methods, ctx.engine, plan_id, provider_id)
    return respond([PlanMethodOut.of(row) for row in rows])


@router.post(
    "/plans/{plan_id}/methods",
    response_model=list[PlanMethodOut],
    responses=ERRORS,
    summary="Add or re-price 1 to 500 method rows of your plan; returns all its rows",
)
async def upsert_plan_methods(
    plan_id: PathId, body: MethodRows, provider_id: ProviderId, ctx: Context
) -> Response:
    rows = await run_in_threadpool(
        admin.upsert_plan_methods,
        ctx.engine,
        plan_id,
        [row.columns() for row in body],
        provider_id,
        ctx.settings.price_notice_s,
    )
    return respond([PlanMethodOut.of(row) for row in rows])


# Earnings ----------------------------------------------------------------------------------


class EarnedOut(OutModel):
    plan_id: int
    name: str = Field(description="The plan's name.")
    credits: CreditsOut = Field(description="What customers paid for the calls served.")
    request_count: int


class EarnedBucketOut(EarnedOut):
    bucket: datetime = Field(description="Start of the hour or UTC day.")


class EarnedTotalOut(OutModel):
    credits: CreditsOut
    request_count: int


class DisputedOut(OutModel):
    answers: int = Field(
        description="Your nodes' answers disputed when they were cordoned (those since each "
        "one's last clean audit): refunded to the customers, not paid to you."
    )
    credits: CreditsOut = Field(description="What those answers would have earned.")


class EarningsOut(OutModel):
    period: Period
    total: EarnedTotalOut
    disputed: DisputedOut = Field(
        description="In all, since your nodes were registered (not only in this period); "
        "the period's earnings already leave them out."
    )
    by_plan: list[EarnedOut] = Field(description="Plans with earnings, by credits.")
    time_series: list[EarnedBucketOut] = Field(
        description="Per bucket and plan with earnings, oldest first."
    )


@router.get(
    "/earnings",
    response_model=EarningsOut,
    responses=ERRORS,
    summary="What your nodes earned, per plan and over time (at most 90 days)",
)
async def get_earnings(
    provider_id: ProviderId,
    ctx: Context,
    start: Annotated[
        AwareDatetime | None,
        Query(alias="from", description="RFC 3339 start; default 30 days before `to`."),
    ] = None,
    end: Annotated[
        AwareDatetime | None, Query(alias="to", description="RFC 3339 end; default now.")
    ] = None,
    granularity: Annotated[
        Granularity, Query(description="Buckets of time_series.")
    ] = Granularity.DAY,
) -> Response:
    """The prices of the calls and notifications your plans' nodes served (cache hits,
    failures and refusals earn nothing); per plan, as usage is not stored per node."""
    first, last = window_of(start, end)
    found = await run_in_threadpool(
        earnings.provider_earnings, ctx.engine, provider_id, first, last, granularity
    )
    disputed_calls, disputed_nano = await run_in_threadpool(
        nodes.provider_disputed, ctx.engine, provider_id
    )

    def out(row: earnings.Earned) -> dict[str, Any]:
        return {
            "plan_id": row.plan_id,
            "name": row.plan_name,
            "credits": credits_out(row.credits_nano),
            "request_count": row.request_count,
        }

    return respond(
        EarningsOut(
            period=Period(start=found.start, end=found.end),
            total=EarnedTotalOut(
                credits=credits_out(sum(e.credits_nano for e in found.by_plan)),
                request_count=sum(e.request_count for e in found.by_plan),
            ),
            disputed=DisputedOut(answers=disputed_calls, credits=credits_out(disputed_nano)),
            by_plan=[EarnedOut(**out(e)) for e in found.by_plan],
            time_series=[
                EarnedBucketOut(**out(e), bucket=e.bucket)
                for e in found.time_series
                if e.bucket is not None
            ],
        )
    )


# Nodes -------------------------------------------------------------------------------------

Kind = Annotated[
    NodeKind,
    Query(description="http (default) for nodes of PUT /provider/nodes, ws for WebSocket nodes."),
]


class CapabilitiesOut(OutModel):
    state_history: int | str | None = Field(
        description='"archive", blocks of state kept behind the head, or null: unknown.'
    )
    blocks_from: int | None = Field(description="Oldest block served; null: unknown.")
    trace: bool | None
    debug: bool | None
    logs_max_block_range: int | None
    max_batch_size: int | None

    @classmethod
    def of(cls, capabilities: Capabilities | None) -> CapabilitiesOut | None:
        if capabilities is None or capabilities == UNKNOWN:
            return None
        return cls(**capabilities.as_json())


class NodeOut(OutModel):
    id: int
    plan_id: int
    chain_id: ChainIdOut
    url: str
    vm: str
    node_target_type: str
    rate_limit: int
    rate_limit_interval_sec: int
    source: str
    status: str
    capabilities: CapabilitiesOut | None = Field(description="As declared; null: none.")
    verified_capabilities: CapabilitiesOut | None = Field(
        description="As screening's probes found them."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, node: Node) -> NodeOut:
        return cls(
            id=node.id,
            plan_id=node.plan_id,
            chain_id=str(node.chain_id),
            url=node.url,
            vm=node.vm,
            node_target_type=node.node_target_type,
            rate_limit=node.rate_limit,
            rate_limit_interval_sec=node.rate_limit_interval_sec,
            source=node.source,
            status=node.status,
            capabilities=CapabilitiesOut.of(node.capabilities),
            verified_capabilities=CapabilitiesOut.of(node.verified_capabilities),
            created_at=node.created_at,
            updated_at=node.updated_at,
        )


class WsNodeOut(OutModel):
    id: int
    plan_id: int
    chain_id: ChainIdOut
    url: str
    status: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, node: Node) -> WsNodeOut:
        return cls(
            id=node.id,
            plan_id=node.plan_id,
            chain_id=str(node.chain_id),
            url=node.url,
            status=node.status,
            created_at=node.created_at,
            updated_at=node.updated_at,
        )


class RegisteredNodeOut(OutModel):
    message: str
    node: NodeOut
    status: str


class RegisteredWsNodeOut(OutModel):
    message: str
    node_ws: WsNodeOut
    status: str


_NODE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": ErrorBody, "description": "A mandatory screening test failed; says which."},
    404: {"model": ErrorBody, "description": "Not your plan, or a URL another provider owns."},
    409: {"model": ErrorBody, "description": "The URL is on another of your plans."},
}


def _message(registered: nodes.Registered) -> str:
    verb = "registered" if registered.created else "updated"
    return f"node {registered.node.id} {verb}; screening passed ({registered.screening.url})"


@router.put(
    "/nodes",
    response_model=RegisteredNodeOut,
    responses=_NODE_ERRORS,
    summary="Register or update an HTTP node (by URL), after mandatory screening",
)
async def put_node(body: HttpNodeIn, provider_id: ProviderId, ctx: Context) -> Response:
    spec = nodes.HttpNodeSpec(
        plan_id=body.plan_id,
        url=body.url,
        vm=body.vm,
        rate_limit=body.rate_limit,
        rate_limit_interval_sec=body.rate_limit_interval_sec,
        source=body.source,
        node_target_type=body.node_target_type,
        capabilities=None if body.capabilities is None else body.capabilities.capabilities(),
    )
    registered = await nodes.register_http_node(
        ctx.engine, ctx.guard, provider_id, spec, max_lag=ctx.settings.max_block_lag
    )
    out = RegisteredNodeOut(
        message=_message(registered),
        node=NodeOut.of(registered.node),
        status=registered.node.status,
    )
    return respond(out)


@router.put(
    "/nodes/ws",
    response_model=RegisteredWsNodeOut,
    responses=_NODE_ERRORS,
    summary="Register or update a WebSocket node (by URL), after a newHeads subscription test",
)
async def put_ws_node(body: WsNodeIn, provider_id: ProviderId, ctx: Context) -> Response:
    registered = await nodes.register_ws_node(
        ctx.engine,
        ctx.guard,
        provider_id,
        plan_id=body.plan_id,
        chain_id=body.chain_id,
        url=body.url,
    )
    out = RegisteredWsNodeOut(
        message=_message(registered),
        node_ws=WsNodeOut.of(registered.node),
        status=registered.node.status,
    )
    return respond(out)


class NodeStatusOut(OutModel):
    node_id: int
    in_sync: bool
    status: str = Field(
        description="healthy, disabled by provider, pending check, failing, out of sync or "
        "cordoned (see docs/provider-api.md)."
    )
    cordon_reason: str | None = Field(
        default=None,
        description="Why the node is cordoned (an audit outvoted it, or a proof failed); null "
        "when it is not.",
    )
    disputed_answers: int = Field(
        default=0,
        description="Its answers disputed when it was cordoned (those since its last clean "
        "audit), in all: refunded to the customers, not paid to you.",
    )
    disputed_credits: CreditsOut = Field(
        default=Decimal(0), description="What those answers would have earned, in credits."
    )
    capabilities: CapabilitiesOut | None = Field(
        default=None,
        description="What routers know the node can answer now (declared, probed and learned "
        "from its errors); null for WebSocket nodes and when nothing is known.",
    )
    head_block: int | None = Field(
        default=None, description="The node's head at the routers' last report; null: none yet."
    )
    chain_head: int | None = Field(
        default=None,
        description="The highest head an in-sync node of the chain last reported (any provider).",
    )
    head_lag: int | None = Field(
        default=None, description="Blocks the node was behind chain_head; null: unknown."
    )
    latency_ms: NumberOut | None = Field(
        default=None,
        description="Its latency as routers measure it, smoothed over recent quick calls and "
        "health checks, milliseconds.",
    )
    consecutive_failures: int | None = Field(
        default=None, description="Health checks failed in a row at the last report."
    )
    checked_at: datetime | None = Field(default=None, description="The routers' last report.")
    checks: NodeChecksOut = Field(
        default=NodeChecksOut(),
        description="What audits and proofs found of its answers, in all (zeros for WebSocket "
        "nodes, which answer no audited call).",
    )


class ListedNodeOut(OutModel):
    kind: NodeKind = Field(description="http: PUT /provider/nodes; ws: PUT /provider/nodes/ws.")
    node: NodeOut | WsNodeOut
    status: NodeStatusOut


@router.get(
    "/nodes",
    response_model=list[ListedNodeOut],
    responses=ERRORS,
    summary="Your nodes (HTTP first, then WebSocket; not those you deleted), with their status",
)
async def list_nodes(
    provider_id: ProviderId,
    ctx: Context,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_ROW_ID)] = 0,
) -> Response:
    """`limit` and `offset` apply to each kind: up to `limit` HTTP and `limit` WebSocket nodes."""
    listed = []
    for kind in ("http", "ws"):
        found = await run_in_threadpool(
            nodes.list_nodes, ctx.engine, provider_id, kind, limit=limit, offset=offset
        )
        for node, report in found:
            shown = WsNodeOut.of(node) if node.ws else NodeOut.of(node)
            listed.append(ListedNodeOut(kind=kind, node=shown, status=status_out(report)))
    return respond(listed)


@router.get(
    "/nodes/{node_id}/status",
    response_model=NodeStatusOut,
    responses=ERRORS,
    summary="Whether your node is in sync and what its status is now",
)
async def get_node_status(
    node_id: PathId, provider_id: ProviderId, ctx: Context, kind: Kind = "http"
) -> Response:
    report = await run_in_threadpool(nodes.node_status, ctx.engine, provider_id, node_id, kind)
    return respond(status_out(report))


@router.post(
    "/nodes/status",
    response_model=NodeStatusOut,
    responses=ERRORS,
    summary="Enable, disable or delete one of your nodes",
)
async def set_node_status(body: NodeStatusIn, provider_id: ProviderId, ctx: Context) -> Response:
    await run_in_threadpool(
        nodes.set_node_status, ctx.engine, provider_id, body.node_id, body.status, body.kind
    )
    if body.status is NodeStatus.PROVIDER_DELETED:
        return respond(NodeStatusOut(node_id=body.node_id, in_sync=False, status=body.status.value))
    report = await run_in_threadpool(
        nodes.node_status, ctx.engine, provider_id, body.node_id, body.kind
    )
    return respond(status_out(report))


def status_out(report: nodes.NodeStatusReport) -> NodeStatusOut:
    """The node's status as its provider sees it (and an administrator: api/admin.py)."""
    health = report.health
    return NodeStatusOut(
        node_id=report.node_id,
        in_sync=report.in_sync,
        status=report.status,
        capabilities=CapabilitiesOut.of(report.capabilities),
        head_block=None if health is None else health.head_block,
        chain_head=report.chain_head,
        head_lag=report.head_lag,
        latency_ms=None if health is None or health.latency_ms is None else health.latency_ms,
        consecutive_failures=None if health is None else health.consecutive_failures,
        checked_at=None if health is None else health.checked_at,
        cordon_reason=report.cordon_reason,
        disputed_answers=report.disputed_calls,
        disputed_credits=credits_out(report.disputed_nano),
        checks=NodeChecksOut.of(report.checks),
    )
