"""Applying a validated operator file to the database, all or nothing.

First every reference the file makes is checked against the file and the database (chains,
providers, secrets already in use, credit references already spent); any problem stops the apply
before a single write. Then everything is written in one transaction. Applying the same file twice
changes nothing the second time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, select

from chainrouter.domain.chains import Chain, Explorer
from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.money import format_credits
from chainrouter.operator_config.load import ConfigFileError
from chainrouter.operator_config.model import (
    ApiKeySpec,
    ChainSpec,
    CustomerSpec,
    ManagementTokenSpec,
    OperatorConfig,
    PlanSpec,
)
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change
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
        _check_references(connection, config)
        _Writer(connection, report).write(config)
        if dry_run:
            transaction.rollback()
            report.generated.clear()  # never shown: they were not stored
    return report


# ---------------------------------------------------------------------------------------------
# Checks: everything that can be wrong with the file given what the database already holds.


def _check_references(connection: Connection, config: OperatorConfig) -> None:
    known_chains = {c.chain_id for c in config.chains} | set(
        connection.execute(select(t.chains.c.chain_id)).scalars()
    )
    known_providers = {p.slug for p in config.providers} | set(
        connection.execute(select(t.providers.c.slug)).scalars()
    )
    problems: list[str] = []

    def need_chain(path: str, chain_id: int | None) -> None:
        if chain_id is not None and chain_id not in known_chains:
            problems.append(
                f"{path}: chain {chain_id} is not in the catalog; declare it under `chains` or "
                "run `chainrouter chains import`"
            )

    for i, provider in enumerate(config.providers):
        for j, plan in enumerate(provider.plans):
            base = f"providers[{i}].plans[{j}]"
            for k, method in enumerate(plan.methods):
                need_chain(f"{base}.methods[{k}].chain_id", method.chain_id)
            for k, node in enumerate(plan.nodes):
                need_chain(f"{base}.nodes[{k}].chain_id", node.chain_id)
            for k, ws_node in enumerate(plan.ws_nodes):
                need_chain(f"{base}.ws_nodes[{k}].chain_id", ws_node.chain_id)

    for i, customer in enumerate(config.customers):
        base = f"customers[{i}]"
        if customer.provider is not None and customer.provider not in known_providers:
            problems.append(f"{base}.provider: no provider with slug {customer.provider!r}")
        customer_id = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == customer.email)
        ).scalar()
        problems += _check_customer_against_database(connection, base, customer, customer_id)

    if problems:
        raise ConfigFileError(problems)


def _check_customer_against_database(
    connection: Connection, base: str, customer: CustomerSpec, customer_id: int | None
) -> list[str]:
    problems: list[str] = []
    for k, key in enumerate(customer.api_keys):
        path = f"{base}.api_keys[{k}]"
        if customer_id is not None:
            same_name = _count(
                connection,
                t.api_keys,
                customer_id=customer_id,
                name=key.name,
            )
            if same_name > 1:
                problems.append(
                    f"{path}.name: {same_name} keys of this customer are named {key.name!r}; "
                    "rename all but one through the API first"
                )
        if key.secret and _secret_owned_elsewhere(
            connection, t.api_keys, "key_hash", key.secret, customer_id, "name", key.name
        ):
            problems.append(f"{path}.secret: already in use by another API key")
    for k, token in enumerate(customer.management_tokens):
        path = f"{base}.management_tokens[{k}]"
        if customer_id is not None:
            same_label = _count(
                connection, t.management_tokens, customer_id=customer_id, label=token.label
            )
            if same_label > 1:
                problems.append(
                    f"{path}.label: {same_label} tokens of this customer are labelled "
                    f"{token.label!r}; revoke and relabel all but one first"
                )
        if token.secret and _secret_owned_elsewhere(
            connection,
            t.management_tokens,
            "token_hash",
            token.secret,
            customer_id,
            "label",
            token.label,
        ):
            problems.append(f"{path}.secret: already in use by another management token")
    if customer_id is not None:
        for k, credit in enumerate(customer.credits):
            entry = find_by_reference(connection, customer_id, credit.reference)
            if entry is not None and (entry.amount_nano, entry.kind) != (
                credit.amount,
                credit.kind,
            ):
                problems.append(
                    f"{base}.credits[{k}]: reference {credit.reference!r} was already applied as "
                    f"a {entry.kind.value} of {format_credits(entry.amount_nano)} credits; ledger "
                    "entries never change, use a new reference for a new entry"
                )
    return problems


def _count(connection: Connection, table: Table, **where: Any) -> int:
    query = select(func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    return int(connection.execute(query).scalar_one())


def _secret_owned_elsewhere(
    connection: Connection,
    table: Table,
    hash_column: str,
    secret: str,
    customer_id: int | None,
    name_column: str,
    name: str,
) -> bool:
    row = connection.execute(
        select(table.c.customer_id, table.c[name_column]).where(
            table.c[hash_column] == hash_secret(secret)
        )
    ).first()
    return row is not None and (row[0], row[1]) != (customer_id, name)


# ---------------------------------------------------------------------------------------------
# Writes.


def chain_from_spec(spec: ChainSpec) -> Chain:
    return Chain(
        chain_id=spec.chain_id,
        name=spec.name,
        short_name=spec.short_name,
        network=spec.network,
        native_currency_name=spec.native_currency.name,
        native_currency_symbol=spec.native_currency.symbol,
        native_currency_decimals=spec.native_currency.decimals,
        info_url=spec.info_url,
        icon=spec.icon,
        status=spec.status,
        explorers=tuple(Explorer(e.name, e.url, e.standard) for e in spec.explorers),
    )


class _Writer:
    def __init__(self, connection: Connection, report: ApplyReport) -> None:
        self.connection = connection
        self.report = report
        self.now = utcnow()
        self._existing: dict[str, dict[tuple[Any, ...], Any]] = {}

    def write(self, config: OperatorConfig) -> None:
        counts = upsert_chains(self.connection, [chain_from_spec(c) for c in config.chains])
        for outcome in ("created", "updated", "unchanged"):
            self.report.changes[("chains", outcome)] += getattr(counts, outcome)
        for provider in config.providers:
            provider_id = self._upsert(
                "providers", t.providers, {"slug": provider.slug}, {"name": provider.name}
            )
            for plan in provider.plans:
                self._write_plan(provider_id, plan)
        for i, customer in enumerate(config.customers):
            self._write_customer(f"customers[{i}]", customer)

    def _upsert(self, what: str, table: Table, key: dict[str, Any], values: dict[str, Any]) -> int:
        """Create the row identified by `key`, or update the columns that differ; return its id."""
        query = select(table)
        for column, value in key.items():
            query = query.where(table.c[column] == value)
        row = self.connection.execute(query).first()
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

    def _write_plan(self, provider_id: int, plan: PlanSpec) -> None:
        plan_id = self._upsert(
            "plans",
            t.plans,
            {"provider_id": provider_id, "name": plan.name},
            {
                "description": plan.description,
                "price_nano": plan.price,
                "quota": plan.quota,
                "quota_unit": plan.quota_unit,
                "overage_price_nano": plan.overage_price,
                "overage_limit": plan.overage_limit,
                "rate_limit_req": plan.rate_limit_req,
                "rate_limit_req_interval_sec": plan.rate_limit_req_interval_sec,
                "rate_limit_cr_nano": plan.rate_limit_cr,
                "rate_limit_cr_interval_sec": plan.rate_limit_cr_interval_sec,
                "billing_fixed_day": plan.billing_fixed_day,
                "billing_interval_days": plan.billing_interval_days,
                "billing_anchored_start_date": plan.billing_anchored_start_date,
            },
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
        self, what: str, table: Table, key: tuple[str, ...], rows: list[dict[str, Any]]
    ) -> None:
        """Create or update many rows whose ids the caller does not need, in bulk.

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
                self.connection.execute(
                    table.update()
                    .where(table.c.id == current["id"])
                    .values(**changed, updated_at=self.now)
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
        for credit in customer.credits:
            if find_by_reference(self.connection, customer_id, credit.reference) is None:
                record_credit_change(
                    self.connection,
                    customer_id=customer_id,
                    kind=LedgerEntryKind(credit.kind),
                    amount_nano=credit.amount,
                    reference=credit.reference,
                    note=credit.note,
                )
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
        exists = _count(self.connection, t.api_keys, customer_id=customer_id, name=key.name) > 0
        self._upsert(
            "api keys",
            t.api_keys,
            {"customer_id": customer_id, "name": key.name},
            {
                **self._secret_values(
                    path, SecretKind.API_KEY, key.secret, exists, owner, key.name
                ),
                "allowed_domains": list(key.allowed_domains),
                "routing_strategy": key.routing_strategy.value,
                "active": key.active,
                "bypass_credit_check": key.bypass_credit_check,
            },
        )

    def _write_token(
        self, path: str, customer_id: int, owner: str, token: ManagementTokenSpec
    ) -> None:
        current = self.connection.execute(
            select(t.management_tokens.c.revoked_at).where(
                t.management_tokens.c.customer_id == customer_id,
                t.management_tokens.c.label == token.label,
            )
        ).first()
        exists = current is not None
        already_revoked = current is not None and current.revoked_at is not None
        if already_revoked and not token.revoked:
            self.report.warnings.append(
                f"{path}: token {token.label!r} of {owner} is revoked and stays revoked; "
                "give a new label to issue a new token"
            )
        values: dict[str, Any] = {
            "role": token.role.value,
            **self._secret_values(
                path, SecretKind.MANAGEMENT_TOKEN, token.secret, exists, owner, token.label
            ),
        }
        if token.revoked and not already_revoked:
            values["revoked_at"] = self.now
        self._upsert(
            "management tokens",
            t.management_tokens,
            {"customer_id": customer_id, "label": token.label},
            values,
        )
