"""Response models shared by several route modules, and the conversions into them."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from chainrouter.domain.chains import MAX_CHAIN_ID
from chainrouter.domain.enums import Role
from chainrouter.domain.money import NANO_PER_CREDIT, credits_decimal
from chainrouter.domain.plan_cycle import CycleReport, Standing
from chainrouter.domain.records import ManagementToken, NodeChecksRecord, Plan, PlanMethod
from chainrouter.management.admin import MAX_METHOD_ROWS
from chainrouter.operator_config.model import MAX_ROW_ID, MethodPriceSpec

# A record's id in a path: beyond 64 bits no record has it (422, never a failed query).
PathId = Annotated[int, Path(ge=1, le=MAX_ROW_ID)]
PathChainId = Annotated[int, Path(ge=1, le=MAX_CHAIN_ID)]

# Credits in responses: a JSON number written with exactly its decimal digits.
CreditsOut = Annotated[
    Decimal,
    WithJsonSchema({"type": "number", "description": "Credits (1 credit = 1 USD), exact."}),
]
NumberOut = Annotated[Decimal, WithJsonSchema({"type": "number"})]
ChainIdOut = Annotated[
    str, WithJsonSchema({"type": "string", "pattern": "^[0-9]+$", "description": "Decimal."})
]


def credits_out(nano: int) -> Decimal:
    return credits_decimal(nano)


def optional_credits(nano: int | None) -> Decimal | None:
    return None if nano is None else credits_decimal(nano)


class OutModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeChecksOut(OutModel):
    """What audits and proofs found of a node, added up over every router (docs/integrity.md,
    "What is visible where"); up to one flush interval behind the routers."""

    audits_passed: int = Field(
        default=0,
        description="Its answers asked again of another provider's node and agreed with (or "
        "in the majority when referees disagreed).",
    )
    audits_failed: int = Field(
        default=0, description="Its answers outvoted by nodes of two or more providers."
    )
    proofs_checked: int = Field(
        default=0, description="Its answers proven before they were served (X-Verified: proof)."
    )
    proofs_failed: int = Field(
        default=0,
        description="Its answers a proof refuted while another provider's answer to the same "
        "call held the same proof (not served; the node is cordoned).",
    )
    last_audit_passed_at: datetime | None = Field(default=None, description="null: never.")
    last_audit_failed_at: datetime | None = Field(default=None, description="null: never.")
    last_proof_checked_at: datetime | None = Field(default=None, description="null: never.")
    last_proof_failed_at: datetime | None = Field(default=None, description="null: never.")

    @classmethod
    def of(cls, checks: NodeChecksRecord) -> NodeChecksOut:
        return cls(
            audits_passed=checks.audits_passed,
            audits_failed=checks.audits_failed,
            proofs_checked=checks.proofs_checked,
            proofs_failed=checks.proofs_failed,
            last_audit_passed_at=checks.last_audit_passed_at,
            last_audit_failed_at=checks.last_audit_failed_at,
            last_proof_checked_at=checks.last_proof_checked_at,
            last_proof_failed_at=checks.last_proof_failed_at,
        )


class Created(OutModel):
    id: int = Field(description="ID of the created record.")


class TokenOut(OutModel):
    """A management token without its secret."""

    id: int
    customer_id: int
    label: str
    role: Role
    token_hint: str = Field(description="Identifies the token: its prefix and last characters.")
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, token: ManagementToken) -> TokenOut:
        return cls(
            id=token.id,
            customer_id=token.customer_id,
            label=token.label,
            role=token.role,
            token_hint=token.token_hint,
            created_at=token.created_at,
            revoked_at=token.revoked_at,
        )


class IssuedTokenOut(TokenOut):
    token: str = Field(description="The secret. Shown in this response only.")


class PlanCycleOut(OutModel):
    """The plan's current billing cycle, as the routers have flushed it (5 s behind at most)."""

    start: datetime
    end: datetime
    requests: int = Field(description="Calls the plan's nodes answered in this cycle.")
    credits: CreditsOut = Field(description="The method prices of those calls.")
    standing: Standing = Field(
        description="unmetered (no quota), within_quota, overage, or exhausted (at the overage "
        "limit: routes nothing until the cycle ends)."
    )

    @classmethod
    def of(cls, report: CycleReport) -> PlanCycleOut:
        return cls(
            start=report.start,
            end=report.end,
            requests=report.use.requests,
            credits=credits_out(report.use.credits_nano),
            standing=report.standing,
        )


class PlanOut(OutModel):
    id: int
    created_at: datetime
    provider: str = Field(description="The provider's identifier (slug).")
    provider_id: int
    name: str
    price: CreditsOut
    quota: NumberOut | None
    quota_unit: str | None
    description: str
    overage_price: CreditsOut | None
    overage_limit: NumberOut | None
    rate_limit_req: int | None
    rate_limit_req_interval_sec: int | None
    rate_limit_cr: int | None = Field(
        description="Whole credits per rate_limit_cr_interval_sec (an integer, spec section 2)."
    )
    rate_limit_cr_interval_sec: int | None
    billing_fixed_day: int | None
    billing_interval_days: int | None
    billing_anchored_start_date: datetime | None
    cycle: PlanCycleOut | None = Field(
        default=None, description="The current billing cycle and the plan's use in it."
    )

    @classmethod
    def of(cls, plan: Plan, cycle: CycleReport | None = None) -> PlanOut:
        return cls(
            id=plan.id,
            created_at=plan.created_at,
            provider=plan.provider_slug,
            provider_id=plan.provider_id,
            name=plan.name,
            price=credits_out(plan.price_nano),
            quota=plan.quota,
            quota_unit=plan.quota_unit,
            description=plan.description,
            overage_price=optional_credits(plan.overage_price_nano),
            overage_limit=plan.overage_limit,
            rate_limit_req=plan.rate_limit_req,
            rate_limit_req_interval_sec=plan.rate_limit_req_interval_sec,
            rate_limit_cr=None
            if plan.rate_limit_cr_nano is None
            else plan.rate_limit_cr_nano // NANO_PER_CREDIT,
            rate_limit_cr_interval_sec=plan.rate_limit_cr_interval_sec,
            billing_fixed_day=plan.billing_fixed_day,
            billing_interval_days=plan.billing_interval_days,
            billing_anchored_start_date=plan.billing_anchored_start_date,
            cycle=None if cycle is None else PlanCycleOut.of(cycle),
        )


class PlanMethodOut(OutModel):
    id: int
    plan_id: int
    method: str
    vm: str
    node_target_type: str
    cost: CreditsOut = Field(description="Credits per call; 0 means free.")
    rate_limit: int | None
    rate_limit_interval_sec: int | None
    chain_id: ChainIdOut | None = Field(description="null: the price applies on every chain.")
    next_cost: CreditsOut | None = Field(
        description="A dearer price a provider set, charged from next_cost_from (the price "
        "notice after it was set); null: none pending."
    )
    next_cost_from: datetime | None = Field(description="When next_cost applies; null: none.")

    @classmethod
    def of(cls, row: PlanMethod) -> PlanMethodOut:
        return cls(
            id=row.id,
            plan_id=row.plan_id,
            method=row.method,
            vm=row.vm,
            node_target_type=row.node_target_type,
            cost=credits_out(row.cost_nano),
            rate_limit=row.rate_limit,
            rate_limit_interval_sec=row.rate_limit_interval_sec,
            chain_id=None if row.chain_id is None else str(row.chain_id),
            next_cost=None if row.next_cost_nano is None else credits_out(row.next_cost_nano),
            next_cost_from=row.next_cost_from,
        )


class MethodRowIn(MethodPriceSpec):
    """One method price row, as the admin and provider routes take it."""

    def columns(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "vm": self.vm,
            "node_target_type": self.node_target_type,
            "cost_nano": self.cost,
            "rate_limit": self.rate_limit,
            "rate_limit_interval_sec": self.rate_limit_interval_sec,
            "chain_id": self.chain_id,
        }


MethodRows = Annotated[list[MethodRowIn], Field(min_length=1, max_length=MAX_METHOD_ROWS)]
