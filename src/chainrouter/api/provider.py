"""Provider routes (`/provider/...`): a token whose customer is linked to a provider reads its
plans, prices their methods, and manages its nodes. Another provider's plan or node is 404, so
that its existence is never revealed; a token without a provider link is 403
`provider not resolved`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import MethodRows, PlanMethodOut, PlanOut
from chainrouter.api.deps import Context, ProviderId
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.management import admin

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
    return respond([PlanOut.of(plan) for plan in plans])


@router.get(
    "/plans/{plan_id}/methods",
    response_model=list[PlanMethodOut],
    responses=ERRORS,
    summary="The method prices of one of your plans",
)
async def list_plan_methods(plan_id: int, provider_id: ProviderId, ctx: Context) -> Response:
    rows = await run_in_threadpool(admin.list_plan_methods, ctx.engine, plan_id, provider_id)
    return respond([PlanMethodOut.of(row) for row in rows])


@router.post(
    "/plans/{plan_id}/methods",
    response_model=list[PlanMethodOut],
    responses=ERRORS,
    summary="Add or re-price 1 to 500 method rows of your plan; returns all its rows",
)
async def upsert_plan_methods(
    plan_id: int, body: MethodRows, provider_id: ProviderId, ctx: Context
) -> Response:
    rows = await run_in_threadpool(
        admin.upsert_plan_methods,
        ctx.engine,
        plan_id,
        [row.columns() for row in body],
        provider_id,
    )
    return respond([PlanMethodOut.of(row) for row in rows])
