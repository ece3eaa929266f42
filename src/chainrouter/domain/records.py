"""Stored records as every layer sees them: plain, typed and immutable.

Money is integer nano-credits (`*_nano`); the web layer renders it as exact decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.enums import LedgerEntryKind, Role, RoutingStrategy, SubmissionStatus


@dataclass(frozen=True, slots=True)
class Customer:
    id: int
    name: str
    email: str  # a self-service sign-up's contact address (unverified), else the account's own
    balance_nano: int
    provider_id: int | None
    created_at: datetime
    updated_at: datetime
    low_balance_alert_nano: int = 0  # warn below this balance; 0: never


@dataclass(frozen=True, slots=True)
class Provider:
    id: int
    slug: str
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ManagementToken:
    id: int
    customer_id: int
    label: str
    role: Role
    token_hint: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a management request acts for: the token's customer, its role and provider link."""

    token_id: int
    customer_id: int
    role: Role
    provider_id: int | None

    @property
    def is_administrator(self) -> bool:
        return self.role is Role.ADMINISTRATOR

    @property
    def skips_submission_limits(self) -> bool:
        return self.role in (Role.AGENT, Role.ADMINISTRATOR)


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: int
    customer_id: int
    name: str
    key_hint: str
    allowed_domains: tuple[str, ...]
    routing_strategy: RoutingStrategy
    active: bool
    bypass_credit_check: bool
    created_at: datetime
    updated_at: datetime
    rate_limit: int = 0  # calls per `rate_limit_interval_sec`; 0: no limit of its own
    rate_limit_interval_sec: int = 1
    spend_alert_nano: int = 0  # spend per UTC day that raises an alert; 0: none
    verified: bool = False  # every provable answer proven (docs/integrity.md)
    max_price_per_call_nano: int = 0  # the most one call may cost; 0: no cap


@dataclass(frozen=True, slots=True)
class LedgerLine:
    id: int
    customer_id: int
    kind: LedgerEntryKind
    amount_nano: int
    balance_after_nano: int
    reference: str | None
    note: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Plan:
    id: int
    provider_id: int
    provider_slug: str
    name: str
    description: str
    price_nano: int
    quota: Decimal | None
    quota_unit: str | None
    overage_price_nano: int | None
    overage_limit: Decimal | None
    rate_limit_req: int | None
    rate_limit_req_interval_sec: int | None
    rate_limit_cr_nano: int | None
    rate_limit_cr_interval_sec: int | None
    billing_fixed_day: int | None
    billing_interval_days: int | None
    billing_anchored_start_date: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PlanMethod:
    id: int
    plan_id: int
    method: str
    vm: str
    node_target_type: str
    cost_nano: int  # what it charges now
    rate_limit: int | None
    rate_limit_interval_sec: int | None
    chain_id: int | None
    # A dearer price set with notice, and when it applies; None: none pending.
    next_cost_nano: int | None = None
    next_cost_from: datetime | None = None


@dataclass(frozen=True, slots=True)
class ChainRequest:
    id: int
    status: SubmissionStatus
    name: str
    chain_id: int
    short_name: str | None
    native_currency_name: str | None
    native_currency_decimals: int | None
    info_url: str | None
    icon_url: str | None
    rpc_urls: tuple[str, ...]
    explorer_urls: tuple[str, ...]
    requestor_email: str | None
    requestor_name: str | None
    screening: list[dict[str, object]]
    review_note: str | None
    reviewed_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class NodeRequest:
    id: int
    status: SubmissionStatus
    name: str
    url: str
    vm: str
    chain_id: int | None
    email: str | None
    privacy_policy_url: str | None
    notes: str | None
    screening: list[dict[str, object]]
    review_note: str | None
    reviewed_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Node:
    """An HTTP node, or a WebSocket node (`ws` True; no rate limits or target type there)."""

    id: int
    plan_id: int
    provider_id: int
    chain_id: int
    url: str
    status: str
    ws: bool
    vm: str
    node_target_type: str
    rate_limit: int
    rate_limit_interval_sec: int
    source: str
    created_at: datetime
    updated_at: datetime
    capabilities: Capabilities = UNKNOWN  # as declared
    verified_capabilities: Capabilities | None = None  # as screening found them
    # Cordoned (router/cordon.py): why and when; its answers disputed, in all; watched until.
    cordon_reason: str | None = None
    cordoned_at: datetime | None = None
    disputed_calls: int = 0
    disputed_nano: int = 0
    watched_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class NodeHealthRecord:
    in_sync: bool
    head_block: int | None
    latency_ms: Decimal | None
    consecutive_failures: int
    checked_at: datetime
    capabilities: Capabilities | None = None  # as the reporting router knows them


@dataclass(frozen=True, slots=True)
class CordonWrite:
    """A router's cordon of a node, for storage (router/cordon.py): why, when (Unix seconds),
    and what of its answers this router disputed. No reason: another router cordoned it, and
    this one adds only what it disputed of it."""

    node_id: int
    reason: str
    at: float
    disputed_calls: int
    disputed_nano: int


@dataclass(frozen=True, slots=True)
class NodeChecksWrite:
    """What one router found of one node's answers since its last flush, for storage
    (router/node_checks.py): counts to add, and when each kind last happened (Unix seconds;
    None: not since the last flush)."""

    node_id: int
    audits_passed: int = 0
    audits_failed: int = 0
    proofs_checked: int = 0
    proofs_failed: int = 0
    last_audit_passed_at: float | None = None
    last_audit_failed_at: float | None = None
    last_proof_checked_at: float | None = None
    last_proof_failed_at: float | None = None


@dataclass(frozen=True, slots=True)
class NodeChecksRecord:
    """What audits and proofs found of a node, in all routers' flushes so far."""

    audits_passed: int = 0
    audits_failed: int = 0
    proofs_checked: int = 0
    proofs_failed: int = 0
    last_audit_passed_at: datetime | None = None
    last_audit_failed_at: datetime | None = None
    last_proof_checked_at: datetime | None = None
    last_proof_failed_at: datetime | None = None


NO_CHECKS = NodeChecksRecord()  # a node never audited nor proven
