"""Buying credits, as customers and administrators see it: the deposit address and the assets
accepted, the deposits found and their state, the ledger of purchases, and the operator's totals
(docs/billing.md). The watcher (payments/watcher.py) and the card webhook (payments/card.py)
write; this reads, and records each deposit address the first time it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, select

from chainrouter.domain.deposit_address import MAX_CHILD_INDEX
from chainrouter.domain.deposits import DepositAsset, DepositState
from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.records import LedgerLine
from chainrouter.management.errors import InvalidInputError, NotFoundError
from chainrouter.stores.sql import payments
from chainrouter.stores.sql import schema as t

NOT_OFFERED = "on-chain deposits are not offered here: the operator has configured none"


@dataclass(frozen=True, slots=True)
class DepositAddress:
    chain_id: int
    address: str
    assets: list[DepositAsset]


def offered_assets(engine: Engine) -> payments.PaymentConfig:
    with engine.connect() as connection:
        return payments.payment_config(connection)


def deposit_address(engine: Engine, customer_id: int, chain_id: int) -> DepositAddress:
    """The customer's address for deposits on `chain_id` (the same on every chain), recorded so
    that watchers credit what it receives."""
    with engine.begin() as connection:
        config = payments.payment_config(connection)
        if config.deposit_xpub is None or not config.assets:
            raise NotFoundError(NOT_OFFERED)
        assets = config.chain_assets(chain_id)
        if not assets:
            chains = ", ".join(str(c) for c in config.chains)
            raise InvalidInputError(
                f"chain_id: no deposits are accepted on chain {chain_id}; chains: {chains}",
                details=[{"field": "chain_id", "message": f"deposits are accepted on {chains}"}],
            )
        if customer_id > MAX_CHILD_INDEX:
            raise InvalidInputError(
                f"customer {customer_id} cannot have a deposit address (at most "
                f"{MAX_CHILD_INDEX} customers do): ask the operator"
            )
        address = payments.deposit_address(connection, config.deposit_xpub, customer_id)
    return DepositAddress(chain_id, address, assets)


@dataclass(frozen=True, slots=True)
class DepositView:
    deposit: payments.Deposit
    symbol: str
    confirmations: int | None  # of its block now, for a pending deposit; None: not known
    confirmations_needed: int | None  # None: the chain's finalized block


@dataclass(frozen=True, slots=True)
class DepositPage:
    deposits: list[DepositView]
    next_before_id: int | None


def list_deposits(
    engine: Engine,
    *,
    customer_id: int | None,
    limit: int,
    before_id: int | None = None,
    chain_id: int | None = None,
    state: DepositState | None = None,
) -> DepositPage:
    """Newest first; each pending deposit with its block's confirmations as the watchers last
    saw the chain."""
    with engine.connect() as connection:
        rows = payments.list_deposits(
            connection,
            customer_id=customer_id,
            chain_id=chain_id,
            state=state,
            limit=limit + 1,
            before_id=before_id,
        )
        config = payments.payment_config(connection)
        heads = payments.cursors(connection)
    assets = {(a.chain_id, a.asset): a for a in config.assets}
    views = []
    for deposit in rows[:limit]:
        asset = assets.get((deposit.chain_id, deposit.asset))
        cursor = heads.get((deposit.chain_id, deposit.asset))
        confirmations = None
        if cursor is not None and cursor.head_block is not None:
            confirmations = max(cursor.head_block - deposit.block_number + 1, 0)
        views.append(
            DepositView(
                deposit=deposit,
                symbol=asset.symbol if asset else deposit.asset,
                confirmations=confirmations,
                confirmations_needed=asset.confirmations if asset else None,
            )
        )
    more = len(rows) > limit
    return DepositPage(views, views[-1].deposit.id if more and views else None)


def _decimals(connection: Connection) -> dict[tuple[int, str], int]:
    """Decimals of native coins from the catalog (tokens read theirs from chain)."""
    rows = connection.execute(
        select(t.deposit_assets.c.chain_id, t.chains.c.native_currency_decimals).join(
            t.chains, t.chains.c.chain_id == t.deposit_assets.c.chain_id
        )
    ).all()
    return {(int(chain), "native"): int(decimals) for chain, decimals in rows}


PURCHASE_KINDS = (LedgerEntryKind.PURCHASE, LedgerEntryKind.GRANT, LedgerEntryKind.ADJUSTMENT)


@dataclass(frozen=True, slots=True)
class LedgerPage:
    lines: list[LedgerLine]
    next_before_id: int | None


def purchases(
    engine: Engine, customer_id: int, *, limit: int, before_id: int | None = None
) -> LedgerPage:
    """The customer's purchases, grants and adjustments (not the usage flushes), newest first."""
    conditions = [
        t.credit_ledger.c.customer_id == customer_id,
        t.credit_ledger.c.kind.in_([kind.value for kind in PURCHASE_KINDS]),
    ]
    if before_id is not None:
        conditions.append(t.credit_ledger.c.id < before_id)
    with engine.connect() as connection:
        rows = connection.execute(
            select(t.credit_ledger)
            .where(*conditions)
            .order_by(t.credit_ledger.c.id.desc())
            .limit(limit + 1)
        ).all()
    lines = [
        LedgerLine(
            id=row.id,
            customer_id=row.customer_id,
            kind=LedgerEntryKind(row.kind),
            amount_nano=row.amount_nano,
            balance_after_nano=row.balance_after_nano,
            reference=row.reference,
            note=row.note,
            created_at=row.created_at,
        )
        for row in rows[:limit]
    ]
    return LedgerPage(lines, lines[-1].id if len(rows) > limit and lines else None)


@dataclass(frozen=True, slots=True)
class AssetSummary:
    chain_id: int
    asset: str
    symbol: str
    decimals: int | None
    counts: dict[DepositState, tuple[int, int, int]]  # state -> (deposits, amount, credits_nano)
    next_block: int | None
    head_block: int | None
    final_block: int | None
    checked_at: datetime | None


@dataclass(frozen=True, slots=True)
class MoneyIn:
    assets: list[AssetSummary]
    card: dict[str, tuple[int, int]]  # state -> (sessions, credits_nano)


def money_in(engine: Engine) -> MoneyIn:
    """Per chain and asset: deposits seen, credited, pending, below minimum and reorged, and the
    watchers' progress; card sessions by state."""
    with engine.connect() as connection:
        config = payments.payment_config(connection)
        totals = payments.deposit_totals(connection)
        heads = payments.cursors(connection)
        cards = payments.card_totals(connection)
        decimals = _decimals(connection)
    known = {(a.chain_id, a.asset): a for a in config.assets}
    keys = sorted(set(known) | {(x.chain_id, x.asset) for x in totals} | set(heads))
    summaries = []
    for chain_id, asset in keys:
        configured = known.get((chain_id, asset))
        cursor = heads.get((chain_id, asset))
        counts = {
            x.state: (x.count, x.amount, x.credits_nano)
            for x in totals
            if (x.chain_id, x.asset) == (chain_id, asset)
        }
        summaries.append(
            AssetSummary(
                chain_id=chain_id,
                asset=asset,
                symbol=configured.symbol if configured else asset,
                decimals=configured.decimals
                if configured and configured.decimals is not None
                else next(
                    (x.decimals for x in totals if (x.chain_id, x.asset) == (chain_id, asset)),
                    decimals.get((chain_id, asset)),
                ),
                counts=counts,
                next_block=cursor.next_block if cursor else None,
                head_block=cursor.head_block if cursor else None,
                final_block=cursor.final_block if cursor else None,
                checked_at=cursor.checked_at if cursor else None,
            )
        )
    return MoneyIn(summaries, cards)
