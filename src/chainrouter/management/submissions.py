"""Public submissions of new chains and nodes, screened before they are stored, and their review.

Every attempt counts against its IP's daily limit, including attempts whose screening failed
(those are stored as rejected): otherwise anyone could make the service dial URLs without end.
Agent and administrator tokens skip the limit. An IP's attempts are taken one at a time per
process (`SubmissionGate`), from the count to the stored attempt, so that attempts sent at once
cannot all pass on the same count while their screenings run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Engine, Table

from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import NodeSource, SubmissionStatus
from chainrouter.domain.records import ChainRequest, NodeRequest
from chainrouter.domain.urls import normalise_url
from chainrouter.management.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RateLimitedError,
    ScreeningFailedError,
)
from chainrouter.screening.evm import Screening, screen_http_node
from chainrouter.screening.guard import OutboundGuard
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql import submissions as store
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.nodes import insert_node, node_url_exists
from chainrouter.stores.sql.plans import get_plan, known_chain_ids
from chainrouter.stores.sql.schema import utcnow

HTTPS_ONLY = frozenset({"https"})
_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Submitter:
    client: str  # net.client_ip.client_block: an IPv4 address or an IPv6 /64
    exempt: bool  # an agent or administrator token came with the request
    daily_limit: int


class SubmissionGate:
    """Lets one limited attempt per IP through at a time, in this process.

    The daily count is read from storage and the attempt is stored seconds later, after its
    screening: without the gate, attempts sent together would all be counted against the same
    total. With several API processes, each process still takes one attempt per IP at a
    time, so the limit can be overrun by at most one attempt per other process.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}  # holders and waiters, to drop idle locks

    @asynccontextmanager
    async def admit(
        self, engine: Engine, table: Table, submitter: Submitter, what: str
    ) -> AsyncIterator[None]:
        """Hold the IP's turn, check its daily limit (RateLimitedError beyond it), and keep the
        turn while the attempt is screened and stored."""
        if submitter.exempt:  # no limit, nothing to keep consistent
            yield
            return
        ip = submitter.client
        lock = self._locks.get(ip)
        if lock is None:
            lock = self._locks[ip] = asyncio.Lock()
        self._waiting[ip] = self._waiting.get(ip, 0) + 1
        try:
            async with lock:
                await asyncio.to_thread(_check_limit, engine, table, submitter, what)
                yield
        finally:
            self._waiting[ip] -= 1
            if not self._waiting[ip]:
                del self._waiting[ip], self._locks[ip]

    @property
    def ips_in_progress(self) -> int:
        return len(self._locks)


def _check_limit(engine: Engine, table: Table, submitter: Submitter, what: str) -> None:
    now = datetime.now(UTC)
    with engine.connect() as connection:
        recent = store.submissions_since(connection, table, submitter.client, now - _DAY)
    if len(recent) >= submitter.daily_limit:
        oldest_counted = recent[len(recent) - submitter.daily_limit]
        retry_after = max(1.0, (oldest_counted + _DAY - now).total_seconds())
        raise RateLimitedError(
            f"at most {submitter.daily_limit} {what} per IP address per day; try again later, "
            "or send an agent or administrator token in X-Api-Key",
            retry_after,
        )


def _store(engine: Engine, table: Table, submitter: Submitter, values: dict[str, Any]) -> int:
    with engine.begin() as connection:
        return store.insert_submission(
            connection,
            table,
            {**values, "submitter_ip": submitter.client, "limit_exempt": submitter.exempt},
        )


async def _store_rejected(
    engine: Engine, table: Table, submitter: Submitter, record: dict[str, Any]
) -> None:
    """Store an attempt that failed screening: it counts against the IP's limit all the same
    (unless it came with an agent or administrator token)."""
    rejected = {
        **record,
        "status": SubmissionStatus.REJECTED.value,
        "review_note": "screening failed",
        "reviewed_at": utcnow(),
    }
    await asyncio.to_thread(_store, engine, table, submitter, rejected)


async def submit_chain_request(
    engine: Engine,
    guard: OutboundGuard,
    gate: SubmissionGate,
    submitter: Submitter,
    values: dict[str, Any],
) -> int:
    """Screen the RPC URLs (at least one must serve the declared chain) and store the request."""
    async with gate.admit(engine, t.chain_requests, submitter, "chain requests"):
        screenings = await asyncio.gather(
            *(
                screen_http_node(
                    guard,
                    url,
                    schemes=HTTPS_ONLY,
                    expected_chain_id=values["chain_id"],
                    probe=False,
                )
                for url in values["rpc_urls"]
            )
        )
        record = {**values, "screening": [s.as_dict() for s in screenings]}
        if not any(s.passed for s in screenings):
            await _store_rejected(engine, t.chain_requests, submitter, record)
            raise ScreeningFailedError(
                f"none of the RPC URLs passed screening for chain {values['chain_id']}",
                details=_failures(screenings, "rpc_urls"),
            )
        return await asyncio.to_thread(_store, engine, t.chain_requests, submitter, record)


async def submit_node_request(
    engine: Engine,
    guard: OutboundGuard,
    gate: SubmissionGate,
    submitter: Submitter,
    values: dict[str, Any],
) -> int:
    """Screen the node (it reports its chain) and store the request."""
    async with gate.admit(engine, t.node_requests, submitter, "node requests"):
        screening = await screen_http_node(guard, values["url"], schemes=HTTPS_ONLY, probe=False)
        record = {**values, "chain_id": screening.chain_id, "screening": [screening.as_dict()]}
        if not screening.passed:
            await _store_rejected(engine, t.node_requests, submitter, record)
            raise ScreeningFailedError(
                f"the node failed screening: {screening.failure}",
                details=_failures([screening], "url"),
            )
        return await asyncio.to_thread(_store, engine, t.node_requests, submitter, record)


def _failures(screenings: list[Screening], field: str) -> list[dict[str, Any]]:
    return [
        {"field": field, "url": s.url, "message": s.failure or "passed"}
        for s in screenings
        if not s.passed
    ]


# Review ------------------------------------------------------------------------------------


def list_chain_requests(
    engine: Engine, status: SubmissionStatus | None, *, limit: int, offset: int
) -> list[ChainRequest]:
    with engine.connect() as connection:
        return store.list_chain_requests(connection, status, limit=limit, offset=offset)


def list_node_requests(
    engine: Engine, status: SubmissionStatus | None, *, limit: int, offset: int
) -> list[NodeRequest]:
    with engine.connect() as connection:
        return store.list_node_requests(connection, status, limit=limit, offset=offset)


def approve_chain_request(
    engine: Engine, request_id: int, *, native_currency_symbol: str, note: str
) -> ChainRequest:
    """Add the chain to the catalog, with the URLs that passed screening as its public RPCs."""
    with engine.begin() as connection:
        request = store.get_chain_request(connection, request_id)
        if request is None:
            raise NotFoundError(f"no chain request {request_id}")
        if request.status is not SubmissionStatus.PENDING:
            raise ConflictError(f"chain request {request_id} is already {request.status.value}")
        if known_chain_ids(connection, {request.chain_id}):
            raise ConflictError(f"chain {request.chain_id} is already in the catalog")
        passed = tuple(str(s["url"]) for s in request.screening if s.get("passed"))
        chain = Chain(
            chain_id=request.chain_id,
            name=request.name,
            short_name=request.short_name or request.name.lower().replace(" ", "-")[:100],
            native_currency_name=request.native_currency_name or native_currency_symbol,
            native_currency_symbol=native_currency_symbol,
            native_currency_decimals=(
                18 if request.native_currency_decimals is None else request.native_currency_decimals
            ),
            info_url=request.info_url,
            public_rpc_urls=passed,
        )
        upsert_chains(connection, [chain])
        store.mark_reviewed(
            connection, t.chain_requests, request_id, SubmissionStatus.APPROVED, note
        )
        bump_config_version(connection)
        reviewed = store.get_chain_request(connection, request_id)
    assert reviewed is not None
    return reviewed


async def screen_and_approve_node_request(
    engine: Engine, guard: OutboundGuard, request_id: int, *, plan_id: int, note: str
) -> NodeRequest:
    """Screen the node again, for the chain it reported when submitted, then approve it.

    A request may wait days for review: meanwhile the node may have gone, fallen behind or been
    pointed at another chain, and approval puts it straight into routing. A node that fails now
    is refused with the screening's reasons and its request stays pending.
    """
    # Checked here so that a reviewed request is not dialled for nothing; the approval's own
    # transaction checks again, in case another review lands while the node is screened.
    request = await asyncio.to_thread(_node_request, engine, request_id)
    if request.status is not SubmissionStatus.PENDING:
        raise ConflictError(f"node request {request_id} is already {request.status.value}")
    screening = await screen_http_node(
        guard, request.url, schemes=HTTPS_ONLY, expected_chain_id=request.chain_id, probe=False
    )
    if not screening.passed:
        raise ScreeningFailedError(
            f"the node fails screening now: {screening.failure}; the request stays pending",
            details=_failures([screening], "url"),
        )
    return await asyncio.to_thread(
        _approve_node_request, engine, request_id, plan_id=plan_id, note=note
    )


def _node_request(engine: Engine, request_id: int) -> NodeRequest:
    with engine.connect() as connection:
        request = store.get_node_request(connection, request_id)
    if request is None:
        raise NotFoundError(f"no node request {request_id}")
    return request


def _approve_node_request(
    engine: Engine, request_id: int, *, plan_id: int, note: str
) -> NodeRequest:
    """Register the node on `plan_id`, serving the chain it reported during screening."""
    with engine.begin() as connection:
        request = store.get_node_request(connection, request_id)
        if request is None:
            raise NotFoundError(f"no node request {request_id}")
        if request.status is not SubmissionStatus.PENDING:
            raise ConflictError(f"node request {request_id} is already {request.status.value}")
        if get_plan(connection, plan_id) is None:
            raise NotFoundError(f"no plan {plan_id}")
        if request.chain_id is None or not known_chain_ids(connection, {request.chain_id}):
            raise InvalidInputError(
                f"the node serves chain {request.chain_id}, which is not in the catalog; "
                "approve a chain request for it first"
            )
        try:
            url = normalise_url(request.url)  # requests from before URLs had one spelling
        except ValueError as exc:  # stored before URLs were checked as now: reject it instead
            message = f"node request {request_id}'s URL cannot be registered ({exc}); reject it"
            details = [{"field": "url", "url": request.url, "message": str(exc)}]
            raise InvalidInputError(message, details=details) from exc
        if node_url_exists(connection, url):
            raise ConflictError("a node with this URL is already registered")
        insert_node(
            connection,
            plan_id=plan_id,
            chain_id=request.chain_id,
            url=url,
            vm=request.vm,
            source=NodeSource.NODE_REQUEST,
        )
        store.mark_reviewed(
            connection, t.node_requests, request_id, SubmissionStatus.APPROVED, note
        )
        bump_config_version(connection)
        reviewed = store.get_node_request(connection, request_id)
    assert reviewed is not None
    return reviewed


def reject_request(
    engine: Engine, kind: Literal["chain", "node"], request_id: int, note: str
) -> None:
    table = t.chain_requests if kind == "chain" else t.node_requests
    with engine.begin() as connection:
        getter = store.get_chain_request if kind == "chain" else store.get_node_request
        request = getter(connection, request_id)
        if request is None:
            raise NotFoundError(f"no {kind} request {request_id}")
        if not store.mark_reviewed(connection, table, request_id, SubmissionStatus.REJECTED, note):
            raise ConflictError(f"{kind} request {request_id} is already {request.status.value}")
