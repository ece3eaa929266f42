"""Applying a validated operator file to the database, all or nothing.

First every reference the file makes is checked against the file and the database (chains,
providers, secrets already in use, credit references already spent); any problem stops the apply
before a single write. Then everything is written in one transaction. Applying the same file twice
changes nothing the second time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, Table, select

from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.money import BalanceOutOfRangeError, format_credits
from chainrouter.operator_config.check import check_references
from chainrouter.operator_config.load import ConfigFileError
from chainrouter.operator_config.model import (
    ApiKeySpec,
    CustomerSpec,
    ManagementTokenSpec,
    OperatorConfig,
    PaymentsSpec,
    PlanSpec,
)
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change
from chainrouter.stores.sql.nodes import capabilities_column
from chainrouter.stores.sql.schema import utcnow


@dataclass(frozen=True, slots=True)
class GeneratedSecret:
    """A secret made during apply; it is shown once and only its hash is kept."""

    path: str
    kind: SecretKind
    owner_email: str
    name: str
    secret: str


@dataclass(slots=True)
class ApplyReport:
    changes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (what, outcome) -> n
    generated: list[GeneratedSecret] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def count(self, what: str, outcome: str) -> int:
        return self.changes[(what, outcome)]

    @property
    def changed(self) -> bool:
        return any(n for (_, outcome), n in self.changes.items() if outcome != "unchanged")

    def summary_lines(self) -> list[str]:
        kinds = sorted({what for what, _ in self.changes})
        return [
            f"{what}: "
            + ", ".join(
                f"{self.changes[(what, outcome)]} {outcome}"
                for outcome in ("created", "updated", "unchanged")
                if self.changes[(what, outcome)]
            )
            for what in kinds
        ]


def apply_config(engine: Engine, config: OperatorConfig, *, dry_run: bool = False) -> ApplyReport:
    """Apply `config`; raise `ConfigFileError` listing every problem, having written nothing."""
    report = ApplyReport()
    with engine.connect() as connection, connection.begin() as transaction:
        check_references(connection, config)
        _Writer(connection, report).write(config)
        if report.changed:
            bump_config_version(connection)
        if dry_run:
            transaction.rollback()
            report.generated.clear()  # never shown: they were not stored
    return report


class _Writer:
    def __init__(self, connection: Connection, report: ApplyReport) -> None:
        self.connection = connection
        self.report = report
        self.now = utcnow()
        self._existing: dict[str, dict[tuple[Any, ...], Any]] = {}

    def write(self, config: OperatorConfig) -> None:
        counts = upsert_chains(self.connection, [c.to_chain() for c in config.chains])
        for outcome in ("created", "updated", "unchanged"):
            self.report.changes[("chains", outcome)] += getattr(counts, outcome)
        for provider in config.providers:
            provider_id = self._upsert(
                "providers", t.providers, {"slug": provider.slug}, {"name": provider.name}
            )
            for plan in provider.plans:
                self._write_plan(provider.slug, provider_id, plan)
        for i, customer in enumerate(config.customers):
            self._write_customer(f"customers[{i}]", customer)
        if config.payments is not None:
            self._write_payments(config.payments)

    def _write_payments(self, payments: PaymentsSpec) -> None:
        """The `payments` section: its settings row as the file says it (a field left out is
        unset), and the deposit assets created or updated (never deleted: `enabled: false`)."""
        card = payments.card
        self._upsert(
            "payment settings",
            t.payment_settings,
            {"id": 1},
            {
                "deposit_xpub": payments.deposit_xpub,
                "card_min_credits_nano": None if card is None else card.min_credits,
                "card_max_credits_nano": None if card is None else card.max_credits,
                "card_success_url": None if card is None else card.success_url,
                "card_cancel_url": None if card is None else card.cancel_url,
            },
        )
        self._sync_rows(
            "deposit assets",
            t.deposit_assets,
            ("chain_id", "asset"),
            [
                {
                    "chain_id": deposit.chain_id,
                    "asset": deposit.asset,
                    "symbol": deposit.symbol,
                    "credits_per_unit": format(deposit.credits_per_unit, "f"),
                    "decimals": deposit.decimals,
                    "confirmations": deposit.confirmations,
                    "minimum": format(deposit.minimum, "f"),
                    "start_block": deposit.start_block,
                    "enabled": deposit.enabled,
                }
                for deposit in payments.deposits
            ],
        )

    def _upsert(
        self,
        what: str,
        table: Table,
        key: dict[str, Any],
        values: dict[str, Any] | Callable[[RowMapping | None], dict[str, Any]],
    ) -> int:
        """Create the row identified by `key`, or update the columns that differ; return its id.

        `values` may be a function of the row as stored (None when there is none yet), for
        columns whose new value depends on the old one, such as a secret kept unless replaced.
        """
        query = select(table)
        for column, value in key.items():
            query = query.where(table.c[column] == value)
        row = self.connection.execute(query).first()
        if callable(values):
            values = values(None if row is None else row._mapping)
        if row is None:
            stamps = {c: self.now for c in ("created_at", "updated_at") if c in table.c}
            result = self.connection.execute(table.insert().values(**key, **values, **stamps))
            assert result.inserted_primary_key is not None
            self.report.changes[(what, "created")] += 1
            return int(result.inserted_primary_key[0])
        current = row._mapping
        changed = {c: v for c, v in values.items() if current[c] != v}
        primary_key = next(iter(table.primary_key.columns))
        if changed:
            if "updated_at" in table.c:
                changed["updated_at"] = self.now
            self.connection.execute(
                table.update().where(primary_key == current[primary_key.name]).values(**changed)
            )
        self.report.changes[(what, "updated" if changed else "unchanged")] += 1
        return int(current[primary_key.name])

    def _write_plan(self, slug: str, provider_id: int, plan: PlanSpec) -> None:
        def repriced(current: RowMapping, changed: dict[str, Any]) -> dict[str, Any]:
            """A row the file prices otherwise than before: the file's word holds from now, so
            a price its provider set with notice (pending, or applied since) is dropped, and
            said so. A row priced as before keeps it: applying the same file again changes
            nothing (docs/operator-config.md, "Prices")."""
            if "cost_nano" not in changed or current["next_cost_nano"] is None:
                return {}
            due = current["next_cost_from"]
            due = due if due.tzinfo is not None else due.replace(tzinfo=UTC)
            self.report.warnings.append(
                f"provider {slug!r}, plan {plan.name!r}: {current['method']} "
                f"({current['node_target_type']}, chain {current['chain_id'] or 'any'}): the "
                f"price its provider set, {format_credits(current['next_cost_nano'])} "
                f"{'from' if due > self.now else 'since'} {due.isoformat(timespec='seconds')}, "
                f"is dropped; the file's {format_credits(changed['cost_nano'])} applies now"
            )
            return {"next_cost_nano": None, "next_cost_from": None}

        plan_id = self._upsert(
            "plans",
            t.plans,
            {"provider_id": provider_id, "name": plan.name},
            plan.term_columns(),
        )
        self._sync_rows(
            "plan methods",
            t.plan_methods,
            ("plan_id", "vm", "method", "node_target_type", "chain_id"),
            [
                {
                    "plan_id": plan_id,
                    "vm": method.vm,
                    "method": method.method,
                    "node_target_type": method.node_target_type,
                    "chain_id": method.chain_id,
                    "cost_nano": method.cost,
                    "rate_limit": method.rate_limit,
                    "rate_limit_interval_sec": method.rate_limit_interval_sec,
                }
                for method in plan.methods
            ],
            also=repriced,
        )
        self._sync_rows(
            "nodes",
            t.nodes,
            ("url",),
            [
                {
                    "url": node.url,
                    "plan_id": plan_id,
                    "chain_id": node.chain_id,
                    "vm": node.vm,
                    "node_target_type": node.node_target_type,
                    "rate_limit": node.rate_limit,
                    "rate_limit_interval_sec": node.rate_limit_interval_sec,
                    "source": node.source.value,
                    "status": node.status.value,
                    "capabilities": capabilities_column(
                        None if node.capabilities is None else node.capabilities.capabilities()
                    ),
                }
                for node in plan.nodes
            ],
        )
        self._sync_rows(
            "websocket nodes",
            t.ws_nodes,
            ("url",),
            [
                {
                    "url": ws_node.url,
                    "plan_id": plan_id,
                    "chain_id": ws_node.chain_id,
                    "status": ws_node.status.value,
                }
                for ws_node in plan.ws_nodes
            ],
        )

    def _sync_rows(
        self,
        what: str,
        table: Table,
        key: tuple[str, ...],
        rows: list[dict[str, Any]],
        also: Callable[[RowMapping, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """Create or update many rows whose ids the caller does not need, in bulk; `also`, given
        a stored row and the columns the file changes in it, names more columns to write.

        The table's existing rows are read once per apply; new rows go in one executemany.
        Node and price tables are operator-sized (thousands of rows), so reading them whole is
        cheaper than a query per row.
        """
        if not rows:
            return
        existing = self._existing.get(table.name)
        if existing is None:
            existing = {
                tuple(row._mapping[c] for c in key): row._mapping
                for row in self.connection.execute(select(table))
            }
            self._existing[table.name] = existing
        to_insert = []
        for values in rows:
            identity = tuple(values[c] for c in key)
            current = existing.get(identity)
            if current is None:
                to_insert.append({**values, "created_at": self.now, "updated_at": self.now})
                continue
            changed = {c: v for c, v in values.items() if current[c] != v}
            if changed:
                more = {} if also is None else also(current, changed)
                self.connection.execute(
                    table.update()
                    .where(table.c.id == current["id"])
                    .values(**changed, **more, updated_at=self.now)
                )
            self.report.changes[(what, "updated" if changed else "unchanged")] += 1
        if to_insert:
            self.connection.execute(table.insert(), to_insert)
            self.report.changes[(what, "created")] += len(to_insert)
            # Later plans of the same file may not claim these keys again (checked on load),
            # so the cache needs no update: it only answers for rows that existed before.

    def _write_customer(self, base: str, customer: CustomerSpec) -> None:
        customer_id = self._upsert(
            "customers", t.customers, {"email": customer.email}, {"name": customer.name}
        )
        if customer.provider is not None:
            provider_id = self.connection.execute(
                select(t.providers.c.id).where(t.providers.c.slug == customer.provider)
            ).scalar_one()
            self._upsert(
                "provider links",
                t.provider_customers,
                {"customer_id": customer_id},
                {"provider_id": provider_id},
            )
        for k, credit in enumerate(customer.credits):
            if find_by_reference(self.connection, customer_id, credit.reference) is None:
                try:
                    record_credit_change(
                        self.connection,
                        customer_id=customer_id,
                        kind=LedgerEntryKind(credit.kind),
                        amount_nano=credit.amount,
                        reference=credit.reference,
                        note=credit.note,
                    )
                except BalanceOutOfRangeError as exc:
                    raise ConfigFileError([f"{base}.credits[{k}].amount: {exc}"]) from None
                self.report.changes[("credit entries", "created")] += 1
            else:
                self.report.changes[("credit entries", "unchanged")] += 1
        for k, key in enumerate(customer.api_keys):
            self._write_api_key(f"{base}.api_keys[{k}]", customer_id, customer.email, key)
        for k, token in enumerate(customer.management_tokens):
            path = f"{base}.management_tokens[{k}]"
            self._write_token(path, customer_id, customer.email, token)

    def _secret_values(
        self, path: str, kind: SecretKind, given: str | None, exists: bool, owner: str, name: str
    ) -> dict[str, str]:
        """Hash and hint columns for a secret: the given one, a new one, or none (keep stored)."""
        secret = given
        if secret is None:
            if exists:
                return {}
            secret = generate_secret(kind)
            self.report.generated.append(GeneratedSecret(path, kind, owner, name, secret))
        prefix = "key" if kind is SecretKind.API_KEY else "token"
        return {f"{prefix}_hash": hash_secret(secret), f"{prefix}_hint": secret_hint(secret)}

    def _write_api_key(self, path: str, customer_id: int, owner: str, key: ApiKeySpec) -> None:
        def values(current: RowMapping | None) -> dict[str, Any]:
            exists = current is not None
            return {
                **self._secret_values(
                    path, SecretKind.API_KEY, key.secret, exists, owner, key.name
                ),
                "allowed_domains": list(key.allowed_domains),
                "routing_strategy": key.routing_strategy.value,
                "active": key.active,
                "bypass_credit_check": key.bypass_credit_check,
                "rate_limit": key.rate_limit,
                "rate_limit_interval_sec": key.rate_limit_interval_sec,
                "verified": key.verified,
            }

        self._upsert("api keys", t.api_keys, {"customer_id": customer_id, "name": key.name}, values)

    def _write_token(
        self, path: str, customer_id: int, owner: str, token: ManagementTokenSpec
    ) -> None:
        def values(current: RowMapping | None) -> dict[str, Any]:
            already_revoked = current is not None and current["revoked_at"] is not None
            if already_revoked and not token.revoked:
                self.report.warnings.append(
                    f"{path}: token {token.label!r} of {owner} is revoked and stays revoked; "
                    "give a new label to issue a new token"
                )
            exists = current is not None
            result: dict[str, Any] = {
                "role": token.role.value,
                **self._secret_values(
                    path, SecretKind.MANAGEMENT_TOKEN, token.secret, exists, owner, token.label
                ),
            }
            if token.revoked and not already_revoked:
                result["revoked_at"] = self.now
            return result

        self._upsert(
            "management tokens",
            t.management_tokens,
            {"customer_id": customer_id, "label": token.label},
            values,
        )
