"""Chain and node requests submitted by the public, and their review."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Table, select

from chainrouter.domain.enums import SubmissionStatus
from chainrouter.domain.records import ChainRequest, NodeRequest
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow


def submissions_since(
    connection: Connection, table: Table, ip: str, since: datetime
) -> list[datetime]:
    """Creation times of the submissions from `ip` since `since` that count against its limit
    (not those sent with an agent or administrator token), oldest first."""
    query = (
        select(table.c.created_at)
        .where(
            table.c.submitter_ip == ip,
            table.c.created_at >= since,
            table.c.limit_exempt.is_(False),
        )
        .order_by(table.c.created_at)
    )
    return list(connection.execute(query).scalars())


def insert_submission(connection: Connection, table: Table, values: dict[str, Any]) -> int:
    now = utcnow()
    key = connection.execute(
        table.insert().values(**values, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert key is not None
    return int(key[0])


def _chain_request(row: Row[Any]) -> ChainRequest:
    return ChainRequest(
        id=row.id,
        status=SubmissionStatus(row.status),
        name=row.name,
        chain_id=row.chain_id,
        short_name=row.short_name,
        native_currency_name=row.native_currency_name,
        native_currency_decimals=row.native_currency_decimals,
        info_url=row.info_url,
        icon_url=row.icon_url,
        rpc_urls=tuple(row.rpc_urls),
        explorer_urls=tuple(row.explorer_urls),
        requestor_email=row.requestor_email,
        requestor_name=row.requestor_name,
        screening=list(row.screening or []),
        review_note=row.review_note,
        reviewed_at=row.reviewed_at,
        created_at=row.created_at,
    )


def _node_request(row: Row[Any]) -> NodeRequest:
    return NodeRequest(
        id=row.id,
        status=SubmissionStatus(row.status),
        name=row.name,
        url=row.url,
        vm=row.vm,
        chain_id=row.chain_id,
        email=row.email,
        privacy_policy_url=row.privacy_policy_url,
        notes=row.notes,
        screening=list(row.screening or []),
        review_note=row.review_note,
        reviewed_at=row.reviewed_at,
        created_at=row.created_at,
    )


def get_chain_request(connection: Connection, request_id: int) -> ChainRequest | None:
    row = connection.execute(
        select(t.chain_requests).where(t.chain_requests.c.id == request_id)
    ).first()
    return None if row is None else _chain_request(row)


def get_node_request(connection: Connection, request_id: int) -> NodeRequest | None:
    row = connection.execute(
        select(t.node_requests).where(t.node_requests.c.id == request_id)
    ).first()
    return None if row is None else _node_request(row)


def _listing(table: Table, status: SubmissionStatus | None, limit: int, offset: int) -> Any:
    query = select(table).order_by(table.c.id.desc()).limit(limit).offset(offset)
    return query if status is None else query.where(table.c.status == status.value)


def list_chain_requests(
    connection: Connection, status: SubmissionStatus | None, *, limit: int, offset: int
) -> list[ChainRequest]:
    rows = connection.execute(_listing(t.chain_requests, status, limit, offset))
    return [_chain_request(row) for row in rows]


def list_node_requests(
    connection: Connection, status: SubmissionStatus | None, *, limit: int, offset: int
) -> list[NodeRequest]:
    rows = connection.execute(_listing(t.node_requests, status, limit, offset))
    return [_node_request(row) for row in rows]


def mark_reviewed(
    connection: Connection, table: Table, request_id: int, status: SubmissionStatus, note: str
) -> bool:
    """Move a pending request to `status`; False when it was no longer pending."""
    now = utcnow()
    result = connection.execute(
        table.update()
        .where(table.c.id == request_id, table.c.status == SubmissionStatus.PENDING.value)
        .values(status=status.value, review_note=note, reviewed_at=now, updated_at=now)
    )
    return result.rowcount == 1
