"""Buying credits in storage: the operator's payment settings, deposit addresses, deposits and
their watchers' progress, and card payments (docs/billing.md).

Exactly once: a deposit is one row per (chain, transaction, log), and its purchase is a ledger
entry whose reference names the same three, unique per customer on both backends. Watchers
credit a chain's blocks holding the chain's cursor row, one watcher at a time, and move the
cursor in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Row, and_, func, select, update

from chainrouter.domain.deposit_address import derive_deposit_address
from chainrouter.domain.deposits import DepositAsset, DepositState, Transfer
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow


@dataclass(frozen=True, slots=True)
class CardTerms:
    min_credits_nano: int
    max_credits_nano: int
    success_url: str | None
    cancel_url: str | None


@dataclass(frozen=True, slots=True)
class PaymentConfig:
    """What the operator file's `payments` section says, with each asset's decimals filled in
    from the catalog for native coins (tokens without configured decimals keep None)."""

    deposit_xpub: str | None
    assets: tuple[DepositAsset, ...]  # enabled ones only
    card: CardTerms | None
    chain_names: dict[int, str]

    def chain_assets(self, chain_id: int) -> list[DepositAsset]:
        return [asset for asset in self.assets if asset.chain_id == chain_id]

    @property
    def chains(self) -> list[int]:
        return sorted({asset.chain_id for asset in self.assets})


def payment_config(connection: Connection) -> PaymentConfig:
    settings = connection.execute(select(t.payment_settings)).first()
    rows = connection.execute(
        select(
            t.deposit_assets,
            t.chains.c.name.label("chain_name"),
            t.chains.c.native_currency_symbol,
            t.chains.c.native_currency_decimals,
        )
        .join(t.chains, t.chains.c.chain_id == t.deposit_assets.c.chain_id)
        .where(t.deposit_assets.c.enabled.is_(True))
        .order_by(t.deposit_assets.c.chain_id, t.deposit_assets.c.id)
    ).all()
    assets = []
    names = {}
    for row in rows:
        native = row.asset == "native"
        decimals = row.decimals
        if decimals is None and native:
            decimals = row.native_currency_decimals
        symbol = row.symbol or (row.native_currency_symbol if native else row.asset)
        assets.append(
            DepositAsset(
                chain_id=row.chain_id,
                asset=row.asset,
                credits_per_unit=Decimal(row.credits_per_unit),
                confirmations=row.confirmations,
                decimals=decimals,
                minimum=Decimal(row.minimum),
                symbol=symbol,
                start_block=row.start_block,
            )
        )
        names[row.chain_id] = row.chain_name
    card = None
    if settings is not None and settings.card_min_credits_nano is not None:
        card = CardTerms(
            settings.card_min_credits_nano,
            settings.card_max_credits_nano,
            settings.card_success_url,
            settings.card_cancel_url,
        )
    return PaymentConfig(
        deposit_xpub=None if settings is None else settings.deposit_xpub,
        assets=tuple(assets),
        card=card,
        chain_names=names,
    )


# -- addresses -------------------------------------------------------------------------------


def deposit_address(connection: Connection, xpub: str, customer_id: int) -> str:
    """The customer's address under `xpub`, recorded (once) so that every watcher knows it."""
    found = connection.execute(
        select(t.deposit_addresses.c.address).where(
            t.deposit_addresses.c.xpub == xpub, t.deposit_addresses.c.customer_id == customer_id
        )
    ).scalar_one_or_none()
    address = derive_deposit_address(xpub, customer_id)
    if found is None:
        connection.execute(
            t.deposit_addresses.insert().values(
                address=address.lower(), customer_id=customer_id, xpub=xpub, created_at=utcnow()
            )
        )
    return address


def watched_addresses(connection: Connection) -> dict[str, int]:
    """Every address ever shown, lower case, to its customer."""
    rows = connection.execute(
        select(t.deposit_addresses.c.address, t.deposit_addresses.c.customer_id)
    ).all()
    return dict(rows)


# -- watchers' progress ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cursor:
    chain_id: int
    asset: str
    next_block: int  # the first block not yet read for crediting
    head_block: int | None
    final_block: int | None
    checked_at: datetime


def _cursor(row: Row[Any]) -> Cursor:
    return Cursor(
        row.chain_id, row.asset, row.next_block, row.head_block, row.final_block, row.checked_at
    )


def cursors(connection: Connection) -> dict[tuple[int, str], Cursor]:
    return {
        (row.chain_id, row.asset): _cursor(row)
        for row in connection.execute(select(t.deposit_cursors))
    }


def _where(chain_id: int, asset: str) -> Any:
    return and_(t.deposit_cursors.c.chain_id == chain_id, t.deposit_cursors.c.asset == asset)


def ensure_cursor(connection: Connection, chain_id: int, asset: str, next_block: int) -> None:
    """Create the asset's cursor at `next_block` unless a watcher made it first."""
    exists = connection.execute(
        select(t.deposit_cursors.c.chain_id).where(_where(chain_id, asset))
    ).first()
    if exists is None:
        connection.execute(
            t.deposit_cursors.insert().values(
                chain_id=chain_id, asset=asset, next_block=next_block, checked_at=utcnow()
            )
        )


def lock_cursor(connection: Connection, chain_id: int, asset: str) -> Cursor | None:
    """The asset's cursor, held until the transaction ends: no other watcher credits it
    meanwhile. SQLite locks the database at a transaction's first write, PostgreSQL the row."""
    rows = t.deposit_cursors
    if connection.dialect.name == "sqlite":
        connection.execute(
            update(rows).where(_where(chain_id, asset)).values(chain_id=rows.c.chain_id)
        )
        query = select(rows).where(_where(chain_id, asset))
    else:
        query = select(rows).where(_where(chain_id, asset)).with_for_update()
    row = connection.execute(query).first()
    return None if row is None else _cursor(row)


def move_cursor(
    connection: Connection, chain_id: int, asset: str, *, next_block: int, head: int, final: int
) -> None:
    connection.execute(
        update(t.deposit_cursors)
        .where(_where(chain_id, asset))
        .values(next_block=next_block, head_block=head, final_block=final, checked_at=utcnow())
    )


# -- deposits ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deposit:
    id: int
    chain_id: int
    asset: str
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    sender: str
    recipient: str
    customer_id: int
    amount: int
    decimals: int
    credits_nano: int
    state: DepositState
    ledger_id: int | None
    seen_at: datetime
    final_at: datetime | None


def _deposit(row: Row[Any]) -> Deposit:
    return Deposit(
        id=row.id,
        chain_id=row.chain_id,
        asset=row.asset,
        tx_hash=row.tx_hash,
        log_index=row.log_index,
        block_number=row.block_number,
        block_hash=row.block_hash,
        sender=row.sender,
        recipient=row.recipient,
        customer_id=row.customer_id,
        amount=int(row.amount),
        decimals=row.decimals,
        credits_nano=row.credits_nano,
        state=DepositState(row.state),
        ledger_id=row.ledger_id,
        seen_at=row.seen_at,
        final_at=row.final_at,
    )


def find_deposit(connection: Connection, transfer: Transfer) -> Deposit | None:
    row = connection.execute(
        select(t.deposits).where(
            t.deposits.c.chain_id == transfer.chain_id,
            t.deposits.c.tx_hash == transfer.tx_hash,
            t.deposits.c.log_index == transfer.log_index,
        )
    ).first()
    return None if row is None else _deposit(row)


def save_deposit(
    connection: Connection,
    transfer: Transfer,
    *,
    customer_id: int,
    decimals: int,
    worth_nano: int,
    state: DepositState,
    ledger_id: int | None = None,
) -> None:
    """Create the transfer's row, or move the existing one to `state` and the transfer's block."""
    now = utcnow()
    values: dict[str, Any] = {
        "block_number": transfer.block_number,
        "block_hash": transfer.block_hash,
        "credits_nano": worth_nano,
        "state": state.value,
        "ledger_id": ledger_id,
        "updated_at": now,
    }
    if state is not DepositState.PENDING:
        values["final_at"] = now
    existing = find_deposit(connection, transfer)
    if existing is None:
        connection.execute(
            t.deposits.insert().values(
                chain_id=transfer.chain_id,
                asset=transfer.asset,
                tx_hash=transfer.tx_hash,
                log_index=transfer.log_index,
                sender=transfer.sender,
                recipient=transfer.recipient,
                customer_id=customer_id,
                amount=str(transfer.amount),
                decimals=decimals,
                seen_at=now,
                **values,
            )
        )
    else:
        connection.execute(update(t.deposits).where(t.deposits.c.id == existing.id).values(values))


def mark_reorged(connection: Connection, chain_id: int, asset: str, first: int, last: int) -> int:
    """Pending deposits of blocks `first` to `last`, now final, that the final chain does not
    hold: their block left the chain. Returns how many."""
    result = connection.execute(
        update(t.deposits)
        .where(
            t.deposits.c.chain_id == chain_id,
            t.deposits.c.asset == asset,
            t.deposits.c.state == DepositState.PENDING.value,
            t.deposits.c.block_number.between(first, last),
        )
        .values(state=DepositState.REORGED.value, updated_at=utcnow())
    )
    return int(result.rowcount)


def list_deposits(
    connection: Connection,
    *,
    customer_id: int | None = None,
    chain_id: int | None = None,
    state: DepositState | None = None,
    limit: int,
    before_id: int | None = None,
) -> list[Deposit]:
    """Newest first, paged by id like the ledger."""
    conditions = []
    if customer_id is not None:
        conditions.append(t.deposits.c.customer_id == customer_id)
    if chain_id is not None:
        conditions.append(t.deposits.c.chain_id == chain_id)
    if state is not None:
        conditions.append(t.deposits.c.state == state.value)
    if before_id is not None:
        conditions.append(t.deposits.c.id < before_id)
    query = select(t.deposits).where(and_(True, *conditions)).order_by(t.deposits.c.id.desc())
    return [_deposit(row) for row in connection.execute(query.limit(limit))]


@dataclass(frozen=True, slots=True)
class DepositTotals:
    chain_id: int
    asset: str
    state: DepositState
    count: int
    amount: int  # base units
    credits_nano: int
    decimals: int  # of the asset, as its deposits recorded them


def deposit_totals(connection: Connection) -> list[DepositTotals]:
    """Per chain, asset and state: how many deposits, their amount and their worth. Amounts are
    summed here, exactly (the column is text, to hold any uint256)."""
    totals: dict[tuple[int, str, str], list[int]] = {}
    rows = connection.execute(
        select(
            t.deposits.c.chain_id,
            t.deposits.c.asset,
            t.deposits.c.state,
            t.deposits.c.amount,
            t.deposits.c.credits_nano,
            t.deposits.c.decimals,
        )
    )
    for chain_id, asset, state, amount, worth, decimals in rows:
        entry = totals.setdefault((chain_id, asset, state), [0, 0, 0, decimals])
        entry[0] += 1
        entry[1] += int(amount)
        entry[2] += worth
    return [
        DepositTotals(chain, asset, DepositState(state), count, amount, worth, decimals)
        for (chain, asset, state), (count, amount, worth, decimals) in sorted(totals.items())
    ]


# -- card payments -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CardPayment:
    session_id: str
    customer_id: int
    credits_nano: int
    amount_cents: int
    currency: str
    payment_intent: str | None
    state: str
    ledger_id: int | None
    created_at: datetime


def _card(row: Row[Any]) -> CardPayment:
    return CardPayment(
        session_id=row.session_id,
        customer_id=row.customer_id,
        credits_nano=row.credits_nano,
        amount_cents=row.amount_cents,
        currency=row.currency,
        payment_intent=row.payment_intent,
        state=row.state,
        ledger_id=row.ledger_id,
        created_at=row.created_at,
    )


def insert_card_payment(
    connection: Connection,
    *,
    session_id: str,
    customer_id: int,
    credits_nano: int,
    amount_cents: int,
    currency: str,
) -> None:
    now = utcnow()
    connection.execute(
        t.card_payments.insert().values(
            session_id=session_id,
            customer_id=customer_id,
            credits_nano=credits_nano,
            amount_cents=amount_cents,
            currency=currency,
            state="open",
            created_at=now,
            updated_at=now,
        )
    )


def card_payment(
    connection: Connection, session_id: str, *, lock: bool = False
) -> CardPayment | None:
    query = select(t.card_payments).where(t.card_payments.c.session_id == session_id)
    if lock and connection.dialect.name != "sqlite":
        query = query.with_for_update()
    row = connection.execute(query).first()
    return None if row is None else _card(row)


def card_payment_by_intent(connection: Connection, payment_intent: str) -> CardPayment | None:
    row = connection.execute(
        select(t.card_payments).where(t.card_payments.c.payment_intent == payment_intent)
    ).first()
    return None if row is None else _card(row)


def settle_card_payment(
    connection: Connection,
    session_id: str,
    *,
    state: str,
    payment_intent: str | None,
    ledger_id: int | None,
) -> None:
    connection.execute(
        update(t.card_payments)
        .where(t.card_payments.c.session_id == session_id)
        .values(
            state=state, payment_intent=payment_intent, ledger_id=ledger_id, updated_at=utcnow()
        )
    )


def card_totals(connection: Connection) -> dict[str, tuple[int, int]]:
    """Per state: sessions and the credits they bought (or would have)."""
    rows = connection.execute(
        select(
            t.card_payments.c.state,
            func.count(),
            func.coalesce(func.sum(t.card_payments.c.credits_nano), 0),
        ).group_by(t.card_payments.c.state)
    ).all()
    return {state: (int(count), int(nano)) for state, count, nano in rows}


def ledger_sum_with_prefix(connection: Connection, customer_id: int, prefix: str) -> int:
    """The sum of a customer's ledger entries whose reference starts with `prefix`."""
    total = connection.execute(
        select(func.coalesce(func.sum(t.credit_ledger.c.amount_nano), 0)).where(
            t.credit_ledger.c.customer_id == customer_id,
            t.credit_ledger.c.reference.startswith(prefix, autoescape=True),
        )
    ).scalar_one()
    return int(total)
