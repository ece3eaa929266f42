"""A block's transactions, proven against its `transactionsRoot`.

Built from the fields of a block fetched with full transactions (`eth_getBlockByHash(h, true)`):
every signed field is in the JSON object (the signature's v / yParity, r and s too), so the
encoding is exact for every type a chain of ours carries (legacy, EIP-2930, EIP-1559, EIP-4844,
EIP-7702), checked against the nodes' own raw bytes in the tests. One call proves the whole list,
where raw bytes would cost one `eth_getRawTransactionByHash` per transaction. A type this module
does not know (a rollup's deposit, say) is not proven (ProofError), never guessed.

Each transaction's hash is keccak of its encoding, so a proven list binds every hash to its
position; the sender (`from`) is recovered from the signature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eth_keys.datatypes import Signature

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

LEGACY, ACCESS_LIST, DYNAMIC_FEE, BLOB, SET_CODE = 0, 1, 2, 3, 4
_WHAT = "the transaction"


def _q(tx: Mapping[str, Any], name: str) -> int:
    return quantity(field(tx, name, _WHAT), name)


def _to(tx: Mapping[str, Any]) -> bytes:
    to = tx.get("to")
    return b"" if to is None else data(to, "to", 20)  # a contract creation has none


def _input(tx: Mapping[str, Any]) -> bytes:
    return data(tx["input"] if "input" in tx else field(tx, "data", _WHAT), "input")


def _access_list(tx: Mapping[str, Any]) -> list[Any]:
    entries = []
    for entry in listed(field(tx, "accessList", _WHAT), "accessList"):
        stored = listed(field(entry, "storageKeys", "an access"), "storageKeys")
        address = data(field(entry, "address", "an access"), "address", 20)
        entries.append([address, [data(key, "a storage key", 32) for key in stored]])
    return entries


def _authorizations(tx: Mapping[str, Any]) -> list[Any]:
    return [
        [
            _q(auth, "chainId"),
            data(field(auth, "address", "an authorization"), "address", 20),
            _q(auth, "nonce"),
            _q(auth, "yParity"),
            _q(auth, "r"),
            _q(auth, "s"),
        ]
        for auth in listed(field(tx, "authorizationList", _WHAT), "authorizationList")
    ]


def _parity(tx: Mapping[str, Any]) -> int:
    # Typed transactions sign with yParity; some nodes send only `v`, which is then the same bit.
    return _q(tx, "yParity") if "yParity" in tx else _q(tx, "v")


def _type(tx: Mapping[str, Any]) -> int:
    return quantity(mapping(tx, _WHAT).get("type", "0x0"), "type")


def _unsigned(tx: Mapping[str, Any]) -> list[Any]:
    """The fields the sender signed, in the order of the transaction's type."""
    kind = _type(tx)
    common = [_to(tx), _q(tx, "value"), _input(tx)]
    if kind == LEGACY:
        return [_q(tx, "nonce"), _q(tx, "gasPrice"), _q(tx, "gas"), *common]
    if kind == ACCESS_LIST:
        head = [_q(tx, "chainId"), _q(tx, "nonce"), _q(tx, "gasPrice"), _q(tx, "gas")]
        return [*head, *common, _access_list(tx)]
    if kind not in (DYNAMIC_FEE, BLOB, SET_CODE):
        raise ProofError(f"transaction type {kind} is not one this router can prove")
    fees = [_q(tx, "maxPriorityFeePerGas"), _q(tx, "maxFeePerGas")]
    head = [_q(tx, "chainId"), _q(tx, "nonce"), *fees, _q(tx, "gas")]
    fields = [*head, *common, _access_list(tx)]
    if kind == BLOB:
        hashes = listed(field(tx, "blobVersionedHashes", _WHAT), "blobVersionedHashes")
        fields += [_q(tx, "maxFeePerBlobGas"), [data(h, "a blob hash", 32) for h in hashes]]
    elif kind == SET_CODE:
        fields.append(_authorizations(tx))
    return fields


def encode_transaction(tx: Mapping[str, Any]) -> bytes:
    """The transaction's canonical encoding (what keccak hashes to its hash, and what the
    block's transactions trie holds): RLP for legacy, the type byte then RLP for typed ones."""
    unsigned = _unsigned(tx)
    kind = _type(tx)
    if kind == LEGACY:
        return bytes(rlp.encode([*unsigned, _q(tx, "v"), _q(tx, "r"), _q(tx, "s")]))
    return bytes([kind]) + bytes(rlp.encode([*unsigned, _parity(tx), _q(tx, "r"), _q(tx, "s")]))


def sender(tx: Mapping[str, Any]) -> str:
    """The address that signed the transaction, recovered from its signature."""
    unsigned = _unsigned(tx)
    kind = _type(tx)
    if kind == LEGACY:
        v = _q(tx, "v")
        if v in (27, 28):
            parity, payload = v - 27, rlp.encode(unsigned)
        else:  # EIP-155: v = chainId * 2 + 35 + parity, the chain ID signed too
            chain_id, parity = (v - 35) // 2, (v - 35) % 2
            payload = rlp.encode([*unsigned, chain_id, 0, 0])
    else:
        parity, payload = _parity(tx), bytes([kind]) + rlp.encode(unsigned)
    r, s = _q(tx, "r"), _q(tx, "s")
    try:
        signature = Signature(vrs=(parity, r, s))
        public_key = signature.recover_public_key_from_msg_hash(keccak(payload))
    except Exception:  # eth_keys refuses a malformed signature with several error types
        raise ProofError("the transaction's signature recovers no sender") from None
    return str(public_key.to_checksum_address()).lower()


def transactions_root(transactions: Sequence[Mapping[str, Any]]) -> bytes:
    """The root of the block's transactions trie built from the transactions' fields."""
    return trie_root([encode_transaction(tx) for tx in transactions])


def verify_transactions(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The block's full transactions, once shown to be the ones its header commits to, each at
    its index with its own hash. The header is checked against the block's hash too: the
    caller's trust in that hash (two providers, or a parent chain) then covers the list."""
    block_hash = verify_header(block)
    transactions = listed(field(block, "transactions", "the block"), "the block's transactions")
    if not all(isinstance(tx, Mapping) for tx in transactions):
        raise ProofError("the block carries transaction hashes, not the transactions")
    root = transactions_root(transactions)
    if root != data(block["transactionsRoot"], "transactionsRoot", 32):
        raise ProofError("the transactions do not make the block's transactionsRoot")
    for index, tx in enumerate(transactions):
        if keccak(encode_transaction(tx)) != data(field(tx, "hash", _WHAT), "hash", 32):
            raise ProofError(f"transaction {index} does not hash to its hash")
        _check_place(tx, block, block_hash, index)
    return list(transactions)


def effective_gas_price(tx: Mapping[str, Any], block: Mapping[str, Any]) -> int:
    """What the sender paid per gas in this block: its gas price, or for fee-market types the
    lesser of its fee cap and the block's base fee plus its tip."""
    if _type(tx) in (LEGACY, ACCESS_LIST):
        return _q(tx, "gasPrice")
    base_fee = quantity(field(block, "baseFeePerGas", "the block"), "baseFeePerGas")
    return min(_q(tx, "maxFeePerGas"), base_fee + _q(tx, "maxPriorityFeePerGas"))


def _check_place(
    tx: Mapping[str, Any], block: Mapping[str, Any], block_hash: bytes, index: int
) -> None:
    if data(field(tx, "blockHash", _WHAT), "blockHash", 32) != block_hash:
        raise ProofError(f"transaction {index} names another block")
    if quantity(field(tx, "blockNumber", _WHAT), "blockNumber") != quantity(
        block["number"], "number"
    ):
        raise ProofError(f"transaction {index} names another block number")
    # Mined, a fee-market transaction's gasPrice is what it paid; some clients once answered its
    # fee cap there, which is not false either.
    paid = {effective_gas_price(tx, block), _q(tx, "maxFeePerGas") if "maxFeePerGas" in tx else -1}
    if "gasPrice" in tx and _q(tx, "gasPrice") not in paid:
        raise ProofError(f"transaction {index}'s gasPrice is not what it paid in the block")
    if quantity(field(tx, "transactionIndex", _WHAT), "transactionIndex") != index:
        raise ProofError(f"transaction {index} names another index")


def verify_transaction(
    block: Mapping[str, Any], tx_hash: str, claimed: Mapping[str, Any] | None
) -> None:
    """Judge one answer about transaction `tx_hash` (eth_getTransactionByHash, ...ByBlock...)
    against the proven transactions of the block it is in: its signed fields, its hash, its
    place and its sender. `null` for a transaction the block holds is a claim that fails."""
    proven = verify_transactions(block)
    wanted = data(tx_hash, "the transaction hash", 32)
    index = next((i for i, tx in enumerate(proven) if data(tx["hash"], "hash", 32) == wanted), None)
    if index is None:
        raise ProofError("the block does not hold the transaction")
    if claimed is None:
        raise ProofError("the transaction was answered as unknown, and the block holds it")
    if encode_transaction(claimed) != encode_transaction(proven[index]):
        raise ProofError("the transaction answered is not the one the block holds")
    if not same_hex(field(claimed, "hash", _WHAT), tx_hash):
        raise ProofError("the transaction answered carries another hash")
    _check_place(claimed, block, data(block["hash"], "hash", 32), index)
    if not same_hex(field(claimed, "from", _WHAT), sender(proven[index])):
        raise ProofError("the transaction answered names another sender")
