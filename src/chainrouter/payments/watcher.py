"""The deposit watcher: follows each chain the operator accepts deposits on, through the router,
and credits each deposit to an address of a customer's once its block is final, exactly once.

Per asset and chain, each round:
1. reads the head and the final block (the chain's `finalized` block, or `confirmations` deep);
2. reads the final blocks after the asset's cursor (native: the blocks' transactions; a token:
   its `Transfer` logs, each checked against the block header of its height), and, holding the
   cursor's row, credits each transfer to a watched address (a `purchase` whose reference names
   chain, transaction and log), marks the pending deposits of those blocks that the final chain
   does not hold as reorged, and moves the cursor past them, all in one transaction;
3. records the transfers it finds in the blocks after the final one as pending, for customers
   to see.
Only step 2 credits, and only from final blocks; the ledger's unique reference and the cursor's
lock make any number of watchers, restarts and reorgs credit a deposit once (docs/billing.md).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from chainrouter.domain.deposits import (
    NATIVE,
    TRANSFER_TOPIC,
    ChainDataError,
    DepositAsset,
    DepositState,
    Transfer,
    base_units,
    block_hash,
    credits_nano,
    deposit_reference,
    format_units,
    native_transfers,
    quantity,
    token_transfer,
)
from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.payments.reader import ChainReadError, RouterReader, expect_dict
from chainrouter.stores.sql import payments
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change

log = logging.getLogger(__name__)

BLOCKS_PER_BATCH = 50  # blocks read in one JSON-RPC batch (the router's default batch limit: 100)
BATCHES_PER_ROUND = 20  # a watcher behind catches up by this many batches a round at most
_DECIMALS_SELECTOR = "0x313ce567"  # decimals()
_WARN_EVERY_S = 60.0


@dataclass(slots=True)
class RoundReport:
    """What one round did, for tests and the log."""

    credited: int = 0
    pending: int = 0
    failures: list[str] = field(default_factory=list)


class _Watched:
    """The deposit addresses, read again after each read of the chain: an address is recorded
    before its customer sees it, so a transfer to it is in no block read before that, and every
    block read after includes it in the set."""

    def __init__(self, load: Callable[[], dict[str, int]]) -> None:
        self._load = load
        self.customers: dict[str, int] = {}  # address (lower case) -> customer

    async def refresh(self) -> frozenset[str]:
        self.customers = await asyncio.to_thread(self._load)
        return frozenset(self.customers)


@dataclass(frozen=True, slots=True)
class _Heads:
    head: int
    finalized: int | None  # what the `finalized` tag answered; None: the tag is not served


class DepositWatcher:
    def __init__(
        self,
        engine: Engine,
        reader: RouterReader,
        *,
        finality_depth: Callable[[int], int],
    ) -> None:
        self._engine = engine
        self._reader = reader
        self._finality_depth = finality_depth
        self._decimals: dict[tuple[int, str], int] = {}
        # Native assets' blocks after the final one that this process has read: height -> hash.
        self._unfinal: dict[int, dict[int, str]] = {}
        self._warned: dict[str, float] = {}

    async def run_round(self) -> RoundReport:
        report = RoundReport()
        config = await asyncio.to_thread(self._config)
        addresses = _Watched(self._addresses)
        heads: dict[int, _Heads] = {}
        for asset in config.assets:
            try:
                if asset.chain_id not in heads:
                    heads[asset.chain_id] = await self._heads(asset.chain_id)
                await self._watch(asset, heads[asset.chain_id], addresses, report)
            except (ChainReadError, ChainDataError) as exc:
                report.failures.append(f"{asset.chain_id}/{asset.asset}: {exc}")
                self._warn(f"{asset.chain_id}/{asset.asset}", f"deposits not read: {exc}")
        return report

    def _config(self) -> payments.PaymentConfig:
        with self._engine.connect() as connection:
            return payments.payment_config(connection)

    def _addresses(self) -> dict[str, int]:
        with self._engine.connect() as connection:
            return payments.watched_addresses(connection)

    def _warn(self, topic: str, message: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(topic, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[topic] = now
            log.warning("deposit watcher: %s: %s", topic, message)

    # -- the chain's head and final block ---------------------------------------------------

    async def _heads(self, chain_id: int) -> _Heads:
        head = quantity(await self._reader.call(chain_id, "eth_blockNumber", []), "head")
        try:
            block = await self._reader.call(chain_id, "eth_getBlockByNumber", ["finalized", False])
        except ChainReadError:
            block = None
        finalized = None
        if isinstance(block, dict):
            finalized = min(quantity(block.get("number"), "finalized block number"), head)
        return _Heads(head, finalized)

    def _final(self, asset: DepositAsset, heads: _Heads) -> int:
        if asset.confirmations is not None:
            return heads.head - asset.confirmations + 1
        if heads.finalized is not None:
            return heads.finalized
        depth = self._finality_depth(asset.chain_id)
        self._warn(
            f"{asset.chain_id}/finalized",
            f"no node answers the finalized tag: blocks {depth} deep are taken as final",
        )
        return heads.head - depth

    async def _asset_decimals(self, asset: DepositAsset) -> int:
        if asset.decimals is not None:
            return asset.decimals
        key = (asset.chain_id, asset.asset)
        if key not in self._decimals:
            answer = await self._reader.call(
                asset.chain_id,
                "eth_call",
                [{"to": asset.asset, "data": _DECIMALS_SELECTOR}, "latest"],
            )
            if not isinstance(answer, str) or len(answer) != 66:
                raise ChainDataError(f"decimals() of {asset.asset} answered {str(answer)[:80]!r}")
            decimals = int(answer, 16)
            if decimals > 77:
                raise ChainDataError(f"decimals() of {asset.asset} is {decimals}")
            self._decimals[key] = decimals
        return self._decimals[key]

    # -- one asset --------------------------------------------------------------------------

    async def _watch(
        self,
        asset: DepositAsset,
        heads: _Heads,
        addresses: _Watched,
        report: RoundReport,
    ) -> None:
        final = self._final(asset, heads)
        decimals = await self._asset_decimals(asset)
        cursor = await asyncio.to_thread(self._cursor, asset, final)
        first = cursor.next_block
        for _ in range(BATCHES_PER_ROUND):
            last = min(final, first + BLOCKS_PER_BATCH - 1)
            if first > last:
                break
            transfers = await self._final_transfers(asset, first, last, addresses)
            moved = await asyncio.to_thread(
                self._credit,
                asset,
                decimals,
                first,
                last,
                transfers,
                addresses.customers,
                heads.head,
                final,
            )
            if moved is None:
                return  # another watcher credited these blocks; the next round goes on from there
            report.credited += moved
            first = last + 1
        else:
            return  # still behind: no pending blocks yet
        if first > final and cursor.head_block != heads.head:
            await asyncio.to_thread(self._note_heads, asset, heads.head, final)
        found = await self._unfinal_transfers(asset, max(first, final + 1), heads.head, addresses)
        if found:
            report.pending += await asyncio.to_thread(
                self._record_pending, asset, decimals, found, addresses.customers
            )

    def _cursor(self, asset: DepositAsset, final: int) -> payments.Cursor:
        start = asset.start_block if asset.start_block is not None else max(final + 1, 0)
        with suppress(IntegrityError), self._engine.begin() as connection:
            payments.ensure_cursor(connection, asset.chain_id, asset.asset, start)
        with self._engine.connect() as connection:
            return payments.cursors(connection)[(asset.chain_id, asset.asset)]

    def _note_heads(self, asset: DepositAsset, head: int, final: int) -> None:
        with self._engine.begin() as connection:
            cursor = payments.lock_cursor(connection, asset.chain_id, asset.asset)
            if cursor is not None:
                payments.move_cursor(
                    connection,
                    asset.chain_id,
                    asset.asset,
                    next_block=cursor.next_block,
                    head=head,
                    final=final,
                )

    # -- reading transfers ------------------------------------------------------------------

    async def _blocks(self, chain_id: int, first: int, last: int, full: bool) -> list[Any]:
        numbers = range(first, last + 1)
        blocks = await self._reader.batch(
            chain_id, [("eth_getBlockByNumber", [hex(n), full]) for n in numbers]
        )
        checked = []
        for number, block in zip(numbers, blocks, strict=True):
            found = expect_dict(block, f"block {number}")
            if quantity(found.get("number"), "block number") != number:
                raise ChainDataError(f"block {number} was answered with another number")
            checked.append(found)
        return checked

    async def _final_transfers(
        self, asset: DepositAsset, first: int, last: int, addresses: _Watched
    ) -> list[Transfer]:
        if asset.asset == NATIVE:
            blocks = await self._blocks(asset.chain_id, first, last, True)
            for parent, child in itertools.pairwise(blocks):
                if child.get("parentHash") != parent.get("hash"):
                    raise ChainDataError(f"blocks {first} to {last} are not one chain")
            watched = await addresses.refresh()
            found = [t for b in blocks for t in native_transfers(asset.chain_id, b, watched)]
            return await self._succeeded(asset.chain_id, found)
        found = await self._token_transfers(asset, first, last, addresses)
        # Each log's block must be the block at its height that the router answers now.
        heights = sorted({t.block_number for t in found})
        headers = await self._reader.batch(
            asset.chain_id, [("eth_getBlockByNumber", [hex(n), False]) for n in heights]
        )
        hashes = {
            n: block_hash(expect_dict(h, f"block {n}").get("hash"))
            for n, h in zip(heights, headers, strict=True)
        }
        for transfer in found:
            if hashes[transfer.block_number] != transfer.block_hash:
                raise ChainDataError(
                    f"a log of {transfer.tx_hash} names block {transfer.block_hash} at height "
                    f"{transfer.block_number}, where the chain has {hashes[transfer.block_number]}"
                )
        return found

    async def _succeeded(self, chain_id: int, found: list[Transfer]) -> list[Transfer]:
        """The native transfers whose transaction succeeded in the block they were found in."""
        receipts = await self._reader.batch(
            chain_id, [("eth_getTransactionReceipt", [t.tx_hash]) for t in found]
        )
        kept = []
        for transfer, receipt in zip(found, receipts, strict=True):
            got = expect_dict(receipt, f"receipt of {transfer.tx_hash}")
            if block_hash(got.get("blockHash"), "receipt block hash") != transfer.block_hash:
                raise ChainDataError(f"the receipt of {transfer.tx_hash} is of another block")
            if got.get("status") == "0x1":
                kept.append(transfer)
        return kept

    async def _token_transfers(
        self, asset: DepositAsset, first: int, last: int, addresses: _Watched
    ) -> list[Transfer]:
        logs = await self._reader.call(
            asset.chain_id,
            "eth_getLogs",
            [
                {
                    "fromBlock": hex(first),
                    "toBlock": hex(last),
                    "address": asset.asset,
                    "topics": [TRANSFER_TOPIC],
                }
            ],
        )
        if not isinstance(logs, list):
            raise ChainDataError("eth_getLogs did not answer a list")
        watched = await addresses.refresh()
        found = []
        for entry in logs:
            transfer = token_transfer(asset.chain_id, expect_dict(entry, "log"))
            if transfer is None or transfer.recipient not in watched:
                continue
            if transfer.asset != asset.asset or not first <= transfer.block_number <= last:
                raise ChainDataError("eth_getLogs answered a log outside its filter")
            found.append(transfer)
        return found

    async def _unfinal_transfers(
        self, asset: DepositAsset, first: int, head: int, addresses: _Watched
    ) -> list[Transfer]:
        """Transfers in the blocks after the final one: what customers see as pending."""
        if first > head:
            return []
        if asset.asset != NATIVE:
            return await self._token_transfers(
                asset, max(first, head - BLOCKS_PER_BATCH * BATCHES_PER_ROUND + 1), head, addresses
            )
        # Native: read each unfinal block once, unless the chain changed under the blocks read.
        seen = self._unfinal.setdefault(asset.chain_id, {})
        for height in [h for h in seen if h < first]:
            del seen[height]
        if seen:
            top = max(seen)
            header = (
                await self._reader.call(asset.chain_id, "eth_getBlockByNumber", [hex(top), False])
                if top <= head
                else None
            )
            if not isinstance(header, dict) or header.get("hash") != seen[top]:
                seen.clear()  # a reorg: read the unfinal blocks again
        start = max(seen) + 1 if seen else first
        last = min(head, start + BLOCKS_PER_BATCH - 1)
        if start > last:
            return []
        blocks = await self._blocks(asset.chain_id, start, last, True)
        watched = await addresses.refresh()
        found = []
        for block in blocks:
            number = quantity(block.get("number"), "block number")
            parent = seen.get(number - 1)
            if parent is not None and block.get("parentHash") != parent:
                seen.clear()
                break
            seen[number] = block_hash(block.get("hash"))
            found += native_transfers(asset.chain_id, block, watched)
        return found

    # -- writing ----------------------------------------------------------------------------

    def _credit(
        self,
        asset: DepositAsset,
        decimals: int,
        first: int,
        last: int,
        transfers: list[Transfer],
        addresses: dict[str, int],
        head: int,
        final: int,
    ) -> int | None:
        """Credit the transfers of final blocks `first` to `last` and move the cursor past them;
        None (nothing written) when the cursor is no longer at `first`."""
        minimum = base_units(asset.minimum, decimals)
        credited = 0
        with self._engine.begin() as connection:
            cursor = payments.lock_cursor(connection, asset.chain_id, asset.asset)
            if cursor is None or cursor.next_block != first:
                return None
            for transfer in transfers:
                customer_id = addresses.get(transfer.recipient)
                if customer_id is None:
                    continue
                existing = payments.find_deposit(connection, transfer)
                if existing is not None and existing.state in (
                    DepositState.CREDITED,
                    DepositState.BELOW_MINIMUM,
                ):
                    continue
                worth = credits_nano(transfer.amount, decimals, asset.credits_per_unit)
                if worth == 0 or transfer.amount < minimum:
                    payments.save_deposit(
                        connection,
                        transfer,
                        customer_id=customer_id,
                        decimals=decimals,
                        worth_nano=worth,
                        state=DepositState.BELOW_MINIMUM,
                    )
                    continue
                reference = deposit_reference(asset.chain_id, transfer.tx_hash, transfer.log_index)
                entry = find_by_reference(connection, customer_id, reference)
                if entry is None:
                    amount = format_units(transfer.amount, decimals)
                    entry = record_credit_change(
                        connection,
                        customer_id=customer_id,
                        kind=LedgerEntryKind.PURCHASE,
                        amount_nano=worth,
                        reference=reference,
                        note=f"deposit of {amount} {asset.symbol} on chain {asset.chain_id}",
                    )
                    credited += 1
                payments.save_deposit(
                    connection,
                    transfer,
                    customer_id=customer_id,
                    decimals=decimals,
                    worth_nano=worth,
                    state=DepositState.CREDITED,
                    ledger_id=entry.id,
                )
            payments.mark_reorged(connection, asset.chain_id, asset.asset, first, last)
            payments.move_cursor(
                connection, asset.chain_id, asset.asset, next_block=last + 1, head=head, final=final
            )
            if credited:
                bump_config_version(connection)  # routers read the new balances at once
        if credited:
            log.info(
                "deposit watcher: credited %d deposit(s) of %s on chain %d (blocks %d to %d)",
                credited,
                asset.symbol,
                asset.chain_id,
                first,
                last,
            )
        return credited

    def _record_pending(
        self,
        asset: DepositAsset,
        decimals: int,
        transfers: list[Transfer],
        addresses: dict[str, int],
    ) -> int:
        recorded = 0
        with self._engine.begin() as connection:
            cursor = payments.lock_cursor(connection, asset.chain_id, asset.asset)
            if cursor is None:
                return 0
            for transfer in transfers:
                customer_id = addresses.get(transfer.recipient)
                if customer_id is None or transfer.block_number < cursor.next_block:
                    continue  # final blocks are the crediting's
                existing = payments.find_deposit(connection, transfer)
                if existing is not None and (
                    existing.state not in (DepositState.PENDING, DepositState.REORGED)
                    or (
                        existing.state is DepositState.PENDING
                        and existing.block_hash == transfer.block_hash
                    )
                ):
                    continue
                payments.save_deposit(
                    connection,
                    transfer,
                    customer_id=customer_id,
                    decimals=decimals,
                    worth_nano=credits_nano(transfer.amount, decimals, asset.credits_per_unit),
                    state=DepositState.PENDING,
                )
                recorded += 1
        return recorded


def watcher_url(rpc_url: str | None, rpc_host: str, rpc_port: int) -> str:
    """The router the watcher reads through: the setting, else this host's router."""
    if rpc_url:
        return rpc_url.rstrip("/")
    host = "127.0.0.1" if rpc_host in ("0.0.0.0", "::", "") else rpc_host  # noqa: S104
    return f"http://[{host}]:{rpc_port}" if ":" in host else f"http://{host}:{rpc_port}"


async def watch_forever(watcher: DepositWatcher, interval_s: float, stop: asyncio.Event) -> None:
    """Rounds every `interval_s` until `stop` is set; a failed round is logged, never fatal."""
    while not stop.is_set():
        try:
            await watcher.run_round()
        except Exception:
            log.exception("deposit watcher: a round failed")
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


async def _serve(
    engine: Engine, url: str, api_key: str, interval_s: float, depth: Callable[[int], int]
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with httpx.AsyncClient(timeout=30.0) as client:
        watcher = DepositWatcher(engine, RouterReader(url, api_key, client), finality_depth=depth)
        log.info("deposit watcher: reading chains through %s every %.2f s", url, interval_s)
        await watch_forever(watcher, interval_s, stop)


def run_watcher(
    engine: Engine,
    *,
    url: str,
    api_key: str,
    interval_s: float,
    finality_depth: Callable[[int], int],
) -> int:
    """The `watcher` role: rounds until SIGTERM or SIGINT."""
    asyncio.run(_serve(engine, url, api_key, interval_s, finality_depth))
    return 0
