"""A block's receipts, proven against its `receiptsRoot`.

The trie holds, at RLP(index), each receipt's consensus encoding: RLP [status (or the state root
before Byzantium), cumulativeGasUsed, logsBloom, logs], prefixed by the type byte for typed
transactions. Fetched once per block (`eth_getBlockReceipts`), the whole list is proven; what a
receipt says beyond its encoding is checked where the list determines it: gasUsed from the
cumulative gas, each log's index and place, the receipt's place in the block.

Which transaction a receipt is of is bound by the block's transactions: given the block with
full transactions (`eth_getBlockByHash(h, true)`), they are proven too, and each receipt's
`transactionHash`, `from` (the recovered sender), `to`, `contractAddress` (from the sender and
nonce) and `effectiveGasPrice` (from the block's base fee) are checked against its transaction.
Given the block with its transactions' hashes only, a receipt's `transactionHash` is held to
the block's list, which the header does not commit to: the node's word. `blobGasPrice` is not
checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chainrouter.integrity._codec import (
    data,
    field,
    keccak,
    listed,
    mapping,
    quantity,
    rlp,
    same_hex,
    trie_root,
)
from chainrouter.integrity.errors import ProofError
from chainrouter.integrity.headers import verify_header
from chainrouter.integrity.transactions import (
    effective_gas_price,
    sender,
    verify_transactions,
)

RECEIPT_TYPES = (0, 1, 2, 3, 4)  # legacy, EIP-2930, EIP-1559, EIP-4844, EIP-7702
_WHAT = "the receipt"


def _log(log: Mapping[str, Any]) -> list[Any]:
    topics = listed(field(log, "topics", "a log"), "topics")
    return [
        data(field(log, "address", "a log"), "address", 20),
        [data(topic, "a topic", 32) for topic in topics],
        data(field(log, "data", "a log"), "data"),
    ]


def encode_receipt(receipt: Mapping[str, Any]) -> bytes:
    """The receipt's consensus encoding, as the block's receipts trie holds it."""
    kind = quantity(mapping(receipt, _WHAT).get("type", "0x0"), "type")
    if kind not in RECEIPT_TYPES:
        raise ProofError(f"receipt type {kind} is not one this router can prove")
    outcome: int | bytes
    if "status" in receipt and receipt["status"] is not None:
        outcome = quantity(receipt["status"], "status")
    else:  # before Byzantium: the state root after the transaction
        outcome = data(field(receipt, "root", _WHAT), "root", 32)
    logs = [_log(log) for log in listed(field(receipt, "logs", _WHAT), "logs")]
    body = rlp.encode(
        [
            outcome,
            quantity(field(receipt, "cumulativeGasUsed", _WHAT), "cumulativeGasUsed"),
            data(field(receipt, "logsBloom", _WHAT), "logsBloom", 256),
            logs,
        ]
    )
    return bytes(body) if kind == 0 else bytes([kind]) + body


def receipts_root(receipts: Sequence[Mapping[str, Any]]) -> bytes:
    """The root of the receipts trie the given receipts make, in their order."""
    return trie_root([encode_receipt(receipt) for receipt in receipts])


def _check_transaction(receipt: Mapping[str, Any], tx: Mapping[str, Any], where: str) -> None:
    """What a receipt repeats of its proven transaction."""
    if not same_hex(field(receipt, "transactionHash", where), tx["hash"]):
        raise ProofError(f"{where} is not of the block's transaction at its index")
    origin = sender(tx)
    if not same_hex(field(receipt, "from", where), origin):
        raise ProofError(f"{where} names another sender")
    if field(receipt, "to", where) != tx.get("to") and not same_hex(receipt["to"], tx.get("to")):
        raise ProofError(f"{where} names another recipient")
    created = receipt.get("contractAddress")
    if tx.get("to") is None:
        nonce = quantity(tx["nonce"], "nonce")
        address = "0x" + keccak(rlp.encode([data(origin, "from", 20), nonce]))[12:].hex()
        # geth names the address even where the creation failed; a client that names none for
        # a failed one says nothing false.
        failed = receipt.get("status") == "0x0"
        if not same_hex(created, address) and not (failed and created is None):
            raise ProofError(f"{where} names another created contract")
    elif created is not None:
        raise ProofError(f"{where} names a created contract for a call")


def _check_place(
    receipt: Mapping[str, Any],
    block: Mapping[str, Any],
    index: int,
    gas_before: int,
    first_log: int,
) -> None:
    """What a receipt says of its place that the proven lists and the block determine."""
    where = f"receipt {index}"
    tx = block["transactions"][index]
    if not isinstance(tx, Mapping):  # the block's list of hashes: the node's word
        if not same_hex(field(receipt, "transactionHash", where), tx):
            raise ProofError(f"{where} is not of the block's transaction at its index")
    else:
        _check_transaction(receipt, tx, where)
        if "effectiveGasPrice" in receipt:
            price = quantity(receipt["effectiveGasPrice"], "effectiveGasPrice")
            if price != effective_gas_price(tx, block):
                raise ProofError(f"{where}'s effectiveGasPrice is not its fees' at the block")
    for name, expected in (("blockHash", block["hash"]), ("blockNumber", block["number"])):
        if not same_hex(field(receipt, name, where), expected):
            raise ProofError(f"{where} names another block")
    if quantity(field(receipt, "transactionIndex", where), "transactionIndex") != index:
        raise ProofError(f"{where} names another index")
    cumulative = quantity(receipt["cumulativeGasUsed"], "cumulativeGasUsed")
    if quantity(field(receipt, "gasUsed", where), "gasUsed") != cumulative - gas_before:
        raise ProofError(f"{where}'s gasUsed is not what the cumulative gas says")
    for offset, log in enumerate(receipt["logs"]):
        if quantity(field(log, "logIndex", "a log"), "logIndex") != first_log + offset:
            raise ProofError(f"{where}'s log {offset} carries another logIndex")
        if log.get("removed", False) is not False:
            raise ProofError(f"{where}'s log {offset} is marked removed")
        for name, expected in (
            ("blockHash", block["hash"]),
            ("blockNumber", block["number"]),
            ("transactionHash", receipt["transactionHash"]),
            ("transactionIndex", receipt["transactionIndex"]),
        ):
            if name in log and not same_hex(log[name], expected):
                raise ProofError(f"{where}'s log {offset} names another {name}")


def verify_receipts(block: Mapping[str, Any], receipts: Sequence[Mapping[str, Any]]) -> None:
    """The block's whole receipts (an eth_getBlockReceipts answer), shown to make the block's
    receiptsRoot, one per transaction, each in its place; the header is checked against its
    hash. With the block's full transactions (`eth_getBlockByHash(h, true)`) they are proven
    too, and each receipt is shown to be of its transaction; with hashes only, a receipt's
    transaction hash is as the block's list says (see the module's docstring)."""
    transactions = listed(field(block, "transactions", "the block"), "the block's transactions")
    if transactions and all(isinstance(tx, Mapping) for tx in transactions):
        verify_transactions(block)
    else:
        verify_header(block)
    receipts = listed(receipts, "the receipts")
    if len(receipts) != len(transactions):
        raise ProofError(f"{len(receipts)} receipts for {len(transactions)} transactions")
    if receipts_root(receipts) != data(block["receiptsRoot"], "receiptsRoot", 32):
        raise ProofError("the receipts do not make the block's receiptsRoot")
    gas_before = first_log = 0
    for index, receipt in enumerate(receipts):
        _check_place(receipt, block, index, gas_before, first_log)
        gas_before = quantity(receipt["cumulativeGasUsed"], "cumulativeGasUsed")
        first_log += len(receipt["logs"])


def verify_receipt(
    block: Mapping[str, Any],
    receipts: Sequence[Mapping[str, Any]],
    tx_hash: str,
    claimed: Mapping[str, Any] | None,
) -> None:
    """Judge one eth_getTransactionReceipt answer against the block's whole receipts (as
    verify_receipts proves them: with the block's full transactions, the receipt is bound to
    its transaction): its encoding, and everything the proven lists determine of it. `null`
    for a receipt the block holds is a claim that fails."""
    verify_receipts(block, receipts)
    index = next(
        (i for i, r in enumerate(receipts) if same_hex(r.get("transactionHash"), tx_hash)), None
    )
    if index is None:
        raise ProofError("the block holds no receipt of the transaction")
    if claimed is None:
        raise ProofError("the receipt was answered as unknown, and the block holds it")
    proven = receipts[index]
    if encode_receipt(claimed) != encode_receipt(proven):
        raise ProofError("the receipt answered is not the one the block holds")
    gas_before = quantity(receipts[index - 1]["cumulativeGasUsed"], "gas") if index else 0
    first_log = sum(len(receipt["logs"]) for receipt in receipts[:index])
    _check_place(claimed, block, index, gas_before, first_log)
