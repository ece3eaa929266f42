"""What administrators manage: customers, credits, management tokens, providers, plans, prices.

Writes to anything routers cache (credits, plans, prices) bump the configuration version in the
same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import LedgerEntryKind, Role
from chainrouter.domain.money import BalanceOutOfRangeError
from chainrouter.domain.plan_cycle import CycleReport
from chainrouter.domain.records import (
    Customer,
    LedgerLine,
    ManagementToken,
    Plan,
    PlanMethod,
    Provider,
)
from chainrouter.management.errors import ConflictError, InvalidInputError, NotFoundError
from chainrouter.stores.sql import accounts, chains, plan_usage, plans
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change

MAX_METHOD_ROWS = 500


def _customer_or_404(connection: Connection, customer_id: int) -> Customer:
    customer = accounts.get_customer(connection, customer_id)
    if customer is None:
        raise NotFoundError(f"no customer {customer_id}")
    return customer


def _provider_or_404(connection: Connection, provider_id: int) -> Provider:
    provider = accounts.get_provider(connection, provider_id)
    if provider is None:
        raise NotFoundError(f"no provider {provider_id}")
    return provider


def _plan_or_404(connection: Connection, plan_id: int, provider_id: int | None = None) -> Plan:
    plan = plans.get_plan(connection, plan_id)
    if plan is None or (provider_id is not None and plan.provider_id != provider_id):
        raise NotFoundError(f"no plan {plan_id}")
    return plan


# Customers ---------------------------------------------------------------------------------


def create_customer(engine: Engine, *, name: str, email: str) -> Customer:
    with engine.begin() as connection:
        if accounts.customer_email_taken(connection, email):
            raise ConflictError(f"a customer with e-mail {email} exists")
        customer_id = accounts.insert_customer(connection, name=name, email=email)
        return _customer_or_404(connection, customer_id)


def find_customer(engine: Engine, id_or_email: str) -> Customer:
    """A customer by numeric id or by e-mail (for the command line)."""
    with engine.connect() as connection:
        if id_or_email.isdigit():
            return _customer_or_404(connection, int(id_or_email))
        customer_id = accounts.customer_id_by_email(connection, id_or_email)
        if customer_id is None:
            raise NotFoundError(f"no customer with e-mail {id_or_email}")
        return _customer_or_404(connection, customer_id)


def get_customer(engine: Engine, customer_id: int) -> Customer:
    with engine.connect() as connection:
        return _customer_or_404(connection, customer_id)


def list_customers(engine: Engine, *, limit: int, offset: int) -> list[Customer]:
    with engine.connect() as connection:
        return accounts.list_customers(connection, limit=limit, offset=offset)


def link_customer_to_provider(
    engine: Engine, customer_id: int, provider_id: int | None
) -> Customer:
    """Let the customer's tokens act for the provider (None: for no provider)."""
    with engine.begin() as connection:
        _customer_or_404(connection, customer_id)
        if provider_id is not None:
            _provider_or_404(connection, provider_id)
        accounts.set_provider_link(connection, customer_id, provider_id)
        return _customer_or_404(connection, customer_id)


# Credits -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreditOutcome:
    entry: LedgerLine
    created: bool  # False: the reference was already recorded; nothing changed


def add_credits(
    engine: Engine,
    customer_id: int,
    *,
    kind: LedgerEntryKind,
    amount_nano: int,
    reference: str | None,
    note: str,
) -> CreditOutcome:
    """Record a purchase or grant; it applies at once and never expires.

    A `reference` makes the call idempotent: repeating it returns the first entry unchanged, and
    the same reference with a different amount or kind is a conflict rather than a silent no-op.
    """
    if kind not in (LedgerEntryKind.PURCHASE, LedgerEntryKind.GRANT):
        raise InvalidInputError("kind must be purchase or grant")
    if amount_nano <= 0:
        raise InvalidInputError("amount must be greater than 0")
    try:
        with engine.begin() as connection:
            _customer_or_404(connection, customer_id)
            existing = _existing_credit(connection, customer_id, reference, kind, amount_nano)
            if existing is not None:
                return CreditOutcome(existing, created=False)
            try:
                entry = record_credit_change(
                    connection,
                    customer_id=customer_id,
                    kind=kind,
                    amount_nano=amount_nano,
                    reference=reference,
                    note=note,
                )
            except BalanceOutOfRangeError as exc:
                raise InvalidInputError(f"amount {exc}") from None
            bump_config_version(connection)  # routers re-read the balance at once
    except IntegrityError:
        # Two requests with one reference raced; the other one won. Report its entry.
        with engine.connect() as connection:
            existing = _existing_credit(connection, customer_id, reference, kind, amount_nano)
        if existing is None:
            raise
        return CreditOutcome(existing, created=False)
    return CreditOutcome(entry, created=True)


def _existing_credit(
    connection: Connection,
    customer_id: int,
    reference: str | None,
    kind: LedgerEntryKind,
    amount_nano: int,
) -> LedgerLine | None:
    if reference is None:
        return None
    found = find_by_reference(connection, customer_id, reference)
    if found is None:
        return None
    if found.kind is not kind or found.amount_nano != amount_nano:
        raise ConflictError(
            f"reference {reference!r} was already used for a different {found.kind.value} "
            "of this customer"
        )
    return found


@dataclass(frozen=True, slots=True)
class LedgerPage:
    lines: list[LedgerLine]
    next_before_id: int | None  # `before_id` of the next (older) page; None: this is the last


def list_ledger(
    engine: Engine, customer_id: int, *, limit: int, offset: int = 0, before_id: int | None = None
) -> LedgerPage:
    with engine.connect() as connection:
        _customer_or_404(connection, customer_id)
        # One row more than asked says whether an older page exists, so that the last page
        # does not point to an empty one.
        lines = accounts.ledger_lines(
            connection, customer_id, limit=limit + 1, offset=offset, before_id=before_id
        )
    page = lines[:limit]
    return LedgerPage(page, page[-1].id if len(lines) > limit else None)


# Management tokens -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: ManagementToken
    secret: str  # shown once, never stored


def issue_token(engine: Engine, customer_id: int, *, label: str, role: Role) -> IssuedToken:
    secret = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    with engine.begin() as connection:
        _customer_or_404(connection, customer_id)
        if accounts.token_label_taken(connection, customer_id, label):
            raise ConflictError(f"this customer already has a token labelled {label!r}")
        token = accounts.insert_token(
            connection,
            customer_id=customer_id,
            label=label,
            role=role,
            digest=hash_secret(secret),
            hint=secret_hint(secret),
        )
    return IssuedToken(token, secret)


def list_tokens(engine: Engine, customer_id: int) -> list[ManagementToken]:
    with engine.connect() as connection:
        _customer_or_404(connection, customer_id)
        return accounts.list_tokens(connection, customer_id)


def revoke_token(engine: Engine, token_id: int) -> ManagementToken:
    """Revoke for good (a revoked token is never restored); revoking twice changes nothing."""
    with engine.begin() as connection:
        if accounts.get_token(connection, token_id) is None:
            raise NotFoundError(f"no management token {token_id}")
        accounts.mark_token_revoked(connection, token_id)
        token = accounts.get_token(connection, token_id)
    assert token is not None
    return token


# Providers and plans -----------------------------------------------------------------------


def create_provider(engine: Engine, *, slug: str, name: str) -> Provider:
    with engine.begin() as connection:
        if accounts.provider_slug_taken(connection, slug):
            raise ConflictError(f"a provider with slug {slug!r} exists")
        provider_id = accounts.insert_provider(connection, slug=slug, name=name)
        return _provider_or_404(connection, provider_id)


def list_providers(engine: Engine) -> list[Provider]:
    with engine.connect() as connection:
        return accounts.list_providers(connection)


def list_plans(engine: Engine, provider_id: int) -> list[Plan]:
    with engine.connect() as connection:
        _provider_or_404(connection, provider_id)
        return plans.list_plans(connection, provider_id)


def current_cycles(engine: Engine, found: list[Plan]) -> dict[int, CycleReport]:
    """Each plan's current billing cycle and what its nodes answered in it so far (as the
    routers have flushed it: up to `usage_flush_interval_s` behind)."""
    with engine.connect() as connection:
        return plan_usage.current_cycles(
            connection, {plan.id: plan_usage.terms_of(plan) for plan in found}
        )


def create_plan(engine: Engine, provider_id: int, values: dict[str, Any]) -> Plan:
    with engine.begin() as connection:
        _provider_or_404(connection, provider_id)
        if plans.plan_name_taken(connection, provider_id, values["name"]):
            raise ConflictError(f"this provider already has a plan named {values['name']!r}")
        plan_id = plans.insert_plan(connection, provider_id, values)
        bump_config_version(connection)
        return _plan_or_404(connection, plan_id)


def update_plan(engine: Engine, plan_id: int, values: dict[str, Any]) -> Plan:
    with engine.begin() as connection:
        plan = _plan_or_404(connection, plan_id)
        name = values.get("name")
        if name is not None and plans.plan_name_taken(
            connection, plan.provider_id, name, other_than=plan_id
        ):
            raise ConflictError(f"this provider already has a plan named {name!r}")
        if values:
            plans.update_plan(connection, plan_id, values)
            bump_config_version(connection)
        return _plan_or_404(connection, plan_id)


def get_plan(engine: Engine, plan_id: int, provider_id: int | None = None) -> Plan:
    with engine.connect() as connection:
        return _plan_or_404(connection, plan_id, provider_id)


def list_plan_methods(
    engine: Engine, plan_id: int, provider_id: int | None = None
) -> list[PlanMethod]:
    """The plan's price rows; with `provider_id`, a plan of another provider is 404."""
    with engine.connect() as connection:
        _plan_or_404(connection, plan_id, provider_id)
        return plans.list_methods(connection, plan_id)


def upsert_plan_methods(
    engine: Engine,
    plan_id: int,
    rows: list[dict[str, Any]],
    provider_id: int | None = None,
    notice_s: float = 0.0,
) -> list[PlanMethod]:
    """Create or re-price 1 to 500 method rows of a plan, all or none; returns the plan's rows.

    Rows are identified by (vm, method, node target type, chain); a row for a chain wins over the
    all-chains row when routing. Every `chain_id` must be a chain the catalog knows. With
    `notice_s` (a provider's own prices), a dearer price applies only that long after it is set
    (stores/sql/plans.py, `upsert_methods`).
    """
    if not 1 <= len(rows) <= MAX_METHOD_ROWS:
        raise InvalidInputError(f"send 1 to {MAX_METHOD_ROWS} method rows per call")
    identities: dict[tuple[Any, ...], int] = {}
    for index, row in enumerate(rows):
        identity = (row["vm"], row["method"], row["node_target_type"], row["chain_id"])
        if identity in identities:
            raise InvalidInputError(
                f"rows[{index}] prices the same (vm, method, node_target_type, chain_id) as "
                f"rows[{identities[identity]}]"
            )
        identities[identity] = index
    with engine.begin() as connection:
        _plan_or_404(connection, plan_id, provider_id)
        wanted = {row["chain_id"] for row in rows if row["chain_id"] is not None}
        unknown = sorted(wanted - plans.known_chain_ids(connection, wanted))
        if unknown:
            raise InvalidInputError(
                "unknown chain_id: " + ", ".join(str(c) for c in unknown[:10]),
                details=[{"field": "chain_id", "message": f"no chain {c}"} for c in unknown[:10]],
            )
        plans.upsert_methods(
            connection, [{**row, "plan_id": plan_id} for row in rows], notice_s=notice_s
        )
        bump_config_version(connection)
        return plans.list_methods(connection, plan_id)


def delete_plan_method(engine: Engine, plan_id: int, method_id: int) -> None:
    with engine.begin() as connection:
        _plan_or_404(connection, plan_id)
        if not plans.delete_method(connection, plan_id, method_id):
            raise NotFoundError(f"plan {plan_id} has no method row {method_id}")
        bump_config_version(connection)


def purge_chain_cache(engine: Engine, chain_id: int) -> int:
    """Have every router drop the answers it cached for the chain (as soon as it reloads its
    configuration, within its sync interval); the chain's new purge generation."""
    with engine.begin() as connection:
        generation = chains.purge_cache(connection, chain_id)
        if generation is None:
            raise NotFoundError(f"no chain {chain_id}")
        bump_config_version(connection)
    return generation
