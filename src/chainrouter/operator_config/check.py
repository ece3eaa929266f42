"""What can be wrong with a valid operator file given what the database already holds.

Run inside the apply transaction, before any write: a chain or provider the file names but neither
declares nor finds, a secret that belongs to someone else, a key name the database holds twice, a
credit reference already spent with another amount. All problems are collected and raised at once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, func, select

from chainrouter.domain.credentials import hash_secret
from chainrouter.domain.money import format_credits
from chainrouter.operator_config.load import ConfigFileError
from chainrouter.operator_config.model import CustomerSpec, OperatorConfig
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.ledger import find_by_reference


def check_references(connection: Connection, config: OperatorConfig) -> None:
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

    if config.payments is not None:
        for i, deposit in enumerate(config.payments.deposits):
            need_chain(f"payments.deposits[{i}].chain_id", deposit.chain_id)

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
