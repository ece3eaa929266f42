"""On-chain deposits: what the operator accepts, what a deposit is worth, and its states.

Amounts on chain are integers in the asset's base units (wei, or a token's smallest unit); the
operator prices a whole unit (1 ETH, 1 USDC) in credits with an exact decimal. A deposit's worth
is computed with integers only and rounded down to the nano-credit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from chainrouter.domain.money import MAX_NANO, NANO_PER_CREDIT

NATIVE = "native"
# keccak256("Transfer(address,address,uint256)"): the topic of every ERC-20 transfer log.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
NATIVE_LOG_INDEX = -1  # a native transfer has no log; its reference says -1
MAX_TOKEN_DECIMALS = 77  # 10**77 is the largest power of ten a uint256 holds

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}", re.ASCII)
_HASH = re.compile(r"0x[0-9a-fA-F]{64}", re.ASCII)
_QUANTITY = re.compile(r"0x(0|[1-9a-fA-F][0-9a-fA-F]{0,63})", re.ASCII)
_WORD = re.compile(r"0x[0-9a-fA-F]{64}", re.ASCII)


class DepositState(StrEnum):
    """Where a deposit stands. Only `credited` moved a balance."""

    PENDING = "pending"  # seen in a block that is not final yet
    CREDITED = "credited"  # final: the ledger has its purchase, once
    BELOW_MINIMUM = "below_minimum"  # final, but worth less than the asset's minimum: recorded only
    REORGED = "reorged"  # its block left the chain before it was final: never credited


class ChainDataError(ValueError):
    """A node's answer that is not what the JSON-RPC method promises; nothing is credited on it."""


@dataclass(frozen=True, slots=True)
class DepositAsset:
    """One asset the operator accepts on one chain.

    `asset` is `native` or the token contract's address in lower case. `decimals` None: the
    chain's native currency decimals, or the token's `decimals()`. `confirmations` None: credited
    once the chain's `finalized` block reaches the deposit.
    """

    chain_id: int
    asset: str
    credits_per_unit: Decimal
    confirmations: int | None = None
    decimals: int | None = None
    minimum: Decimal = Decimal(0)  # in whole units of the asset
    symbol: str = ""
    start_block: int | None = None  # None: the block after the final one when first watched

    @property
    def is_native(self) -> bool:
        return self.asset == NATIVE


def normalise_asset(value: str) -> str:
    """`native`, or a contract address in lower case; ValueError otherwise."""
    text = value.strip()
    if text.lower() == NATIVE:
        return NATIVE
    if not _ADDRESS.fullmatch(text):
        raise ValueError("must be `native` or an ERC-20 contract address (0x and 40 hex digits)")
    return text.lower()


def credits_nano(amount: int, decimals: int, credits_per_unit: Decimal) -> int:
    """What `amount` base units are worth, in nano-credits, rounded down; exact (no float)."""
    if amount < 0 or decimals < 0:
        raise ValueError("amount and decimals must not be negative")
    numerator, denominator = credits_per_unit.as_integer_ratio()
    worth: int = (amount * numerator * NANO_PER_CREDIT) // (denominator * 10**decimals)
    return min(worth, MAX_NANO)


def base_units(amount: Decimal, decimals: int) -> int:
    """Whole units (an exact decimal) in base units, rounded down."""
    numerator, denominator = amount.as_integer_ratio()
    units: int = (numerator * 10**decimals) // denominator
    return units


def format_units(amount: int, decimals: int) -> str:
    """Base units as the shortest exact decimal of whole units ("1.5", "0.000001")."""
    whole, fraction = divmod(amount, 10**decimals)
    if decimals == 0 or fraction == 0:
        return str(whole)
    return f"{whole}.{fraction:0{decimals}d}".rstrip("0")


def deposit_reference(chain_id: int, tx_hash: str, log_index: int) -> str:
    """The ledger reference of a deposit: one purchase per deposit, whoever credits it."""
    return f"deposit:{chain_id}:{tx_hash.lower()}:{log_index}"


@dataclass(frozen=True, slots=True)
class Transfer:
    """A transfer found on chain: a native transfer (log_index -1) or an ERC-20 Transfer log."""

    chain_id: int
    asset: str
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    sender: str
    recipient: str  # lower case
    amount: int  # base units


def quantity(value: Any, what: str) -> int:
    """A JSON-RPC hex quantity as an integer."""
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        raise ChainDataError(f"{what} is not a hex quantity: {str(value)[:80]!r}")
    return int(value, 16)


def block_hash(value: Any, what: str = "hash") -> str:
    if not isinstance(value, str) or not _HASH.fullmatch(value):
        raise ChainDataError(f"{what} is not a 32-byte hash: {str(value)[:80]!r}")
    return value.lower()


def address(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ChainDataError(f"{what} is not an address: {str(value)[:80]!r}")
    return value.lower()


def native_transfers(
    chain_id: int, block: dict[str, Any], watched: frozenset[str]
) -> list[Transfer]:
    """Direct transfers of value to a watched address among a full block's transactions.

    Value moved by a contract (an internal transfer) is in no transaction's `to` and `value`:
    it is not seen (docs/billing.md).
    """
    number = quantity(block.get("number"), "block number")
    hash_ = block_hash(block.get("hash"), "block hash")
    transactions = block.get("transactions")
    if not isinstance(transactions, list):
        raise ChainDataError("block has no list of transactions")
    found = []
    for tx in transactions:
        if not isinstance(tx, dict):
            raise ChainDataError("block's transactions are not objects (ask for full ones)")
        to = tx.get("to")
        if to is None:
            continue  # a contract creation
        recipient = address(to, "transaction to")
        value = quantity(tx.get("value"), "transaction value")
        if recipient in watched and value > 0:
            found.append(
                Transfer(
                    chain_id=chain_id,
                    asset=NATIVE,
                    tx_hash=block_hash(tx.get("hash"), "transaction hash"),
                    log_index=NATIVE_LOG_INDEX,
                    block_number=number,
                    block_hash=hash_,
                    sender=address(tx.get("from"), "transaction from"),
                    recipient=recipient,
                    amount=value,
                )
            )
    return found


def token_transfer(chain_id: int, log: dict[str, Any]) -> Transfer | None:
    """The ERC-20 transfer a log records, or None for a log that is not one (ERC-721 transfers
    share the topic but carry the token id as a third topic and no data)."""
    topics = log.get("topics")
    if not isinstance(topics, list) or len(topics) != 3 or topics[0] != TRANSFER_TOPIC:
        return None
    data = log.get("data")
    if not isinstance(data, str) or not _WORD.fullmatch(data):
        return None
    if log.get("removed") is True:
        raise ChainDataError("a removed log was answered for a range of the canonical chain")
    return Transfer(
        chain_id=chain_id,
        asset=address(log.get("address"), "log address"),
        tx_hash=block_hash(log.get("transactionHash"), "log transaction hash"),
        log_index=quantity(log.get("logIndex"), "log index"),
        block_number=quantity(log.get("blockNumber"), "log block number"),
        block_hash=block_hash(log.get("blockHash"), "log block hash"),
        sender=_topic_address(topics[1]),
        recipient=_topic_address(topics[2]),
        amount=int(data, 16),
    )


def _topic_address(topic: Any) -> str:
    if not isinstance(topic, str) or not _WORD.fullmatch(topic) or topic[2:26] != "0" * 24:
        raise ChainDataError(f"transfer topic is not an address: {str(topic)[:80]!r}")
    return "0x" + topic[26:].lower()


def payment_uri(asset: str, chain_id: int, recipient: str) -> str:
    """An EIP-681 payment request wallets read from a QR code: the recipient on its chain, and for
    a token the contract to call `transfer` on."""
    if asset == NATIVE:
        return f"ethereum:{recipient}@{chain_id}"
    return f"ethereum:{asset}@{chain_id}/transfer?address={recipient}"
