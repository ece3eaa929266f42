"""State reads pinned to a block, proven with `eth_getProof` against the block's `stateRoot`.

An account is the value at keccak(address) in the state trie, RLP [nonce, balance, storageRoot,
codeHash]; a storage slot the value at keccak(slot) in the account's storage trie, RLP of the
number. A proof of absence is a proof too: the path in the trie ends before the key, and the
account (or slot) is empty. Code is proven by its hash: keccak(code) is the account's codeHash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chainrouter.integrity._codec import (
    BLANK_NODE_HASH,
    EMPTY_CODE_HASH,
    data,
    field,
    keccak,
    listed,
    proven_value,
    quantity,
    rlp,
)
from chainrouter.integrity.errors import ProofError

STATE_READS = (
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getStorageAt",
    "eth_getCode",
)


@dataclass(frozen=True)
class Account:
    """An account as the state trie holds it; an absent account is all empty."""

    nonce: int
    balance: int
    storage_hash: bytes
    code_hash: bytes

    @property
    def empty(self) -> bool:
        return self == ABSENT


ABSENT = Account(0, 0, BLANK_NODE_HASH, EMPTY_CODE_HASH)


def _address(value: Any) -> bytes:
    return data(value, "the address", 20)


def _slot(value: Any) -> int:
    """A storage slot as a number: a quantity or 32 bytes, as nodes accept either."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 256:
        return value
    if isinstance(value, str) and len(value) == 66:
        return int.from_bytes(data(value, "the storage slot", 32), "big")
    slot = quantity(value, "the storage slot")
    if slot >= 1 << 256:
        raise ProofError("the storage slot is wider than 32 bytes")
    return slot


def _slot_hex(slot: int) -> str:
    return "0x" + slot.to_bytes(32, "big").hex()


def verify_account(state_root: bytes, address: str, proof: Mapping[str, Any]) -> Account:
    """The account at `address` as `proof` (an eth_getProof answer) proves it under `state_root`.
    The answer's own balance, nonce and hashes are not read: only what the trie proves counts."""
    key = _address(address)
    if _address(field(proof, "address", "the proof")) != key:
        raise ProofError("the proof is of another address")
    value = proven_value(
        state_root, keccak(key), field(proof, "accountProof", "the proof"), "the account proof"
    )
    if value == b"":
        return ABSENT
    try:
        fields = rlp.decode(value)
    except rlp.DecodingError:
        raise ProofError("the proven account is not RLP") from None
    if (
        not isinstance(fields, list)
        or len(fields) != 4
        or not all(isinstance(item, bytes) for item in fields)
    ):
        raise ProofError("the proven account is not [nonce, balance, storageRoot, codeHash]")
    nonce, balance, storage_hash, code_hash = fields
    if len(storage_hash) != 32 or len(code_hash) != 32:
        raise ProofError("the proven account's hashes are not 32 bytes")
    return Account(
        int.from_bytes(nonce, "big"), int.from_bytes(balance, "big"), storage_hash, code_hash
    )


def verify_storage(account: Account, slot: Any, proof_entry: Mapping[str, Any]) -> int:
    """The value at `slot` of the proven `account`, as one `storageProof` entry proves it."""
    number = _slot(slot)
    if _slot(field(proof_entry, "key", "the storage proof")) != number:
        raise ProofError("the storage proof is of another slot")
    value = proven_value(
        account.storage_hash,
        keccak(number.to_bytes(32, "big")),
        field(proof_entry, "proof", "the storage proof"),
        "the storage proof",
    )
    if value == b"":
        return 0
    try:
        stored = rlp.decode(value)
    except rlp.DecodingError:
        raise ProofError("the proven storage value is not RLP") from None
    if not isinstance(stored, bytes) or len(stored) > 32:
        raise ProofError("the proven storage value is not a 32-byte word")
    return int.from_bytes(stored, "big")


def proof_request(
    method: str, params: Sequence[Any], block_hash_or_number: str | int
) -> tuple[str, list[Any]]:
    """The eth_getProof call that proves `method(params)` at the given block (a block hash, a
    hex number or an int): the call's address, and its slot for eth_getStorageAt."""
    if method not in STATE_READS:
        raise ValueError(f"{method} is not a state read eth_getProof proves")
    if not params:
        raise ProofError(f"{method} names no address")
    address = "0x" + _address(params[0]).hex()
    slots = [_slot_hex(_slot(params[1]))] if method == "eth_getStorageAt" else []
    block: Any
    if isinstance(block_hash_or_number, int):
        block = hex(block_hash_or_number)
    elif len(block_hash_or_number) == 66:
        block = {"blockHash": block_hash_or_number}  # EIP-1898: a hash is never read as a number
    else:
        block = block_hash_or_number
    return "eth_getProof", [address, slots, block]


def _storage_entry(proof: Mapping[str, Any], slot: int) -> Mapping[str, Any]:
    for entry in listed(field(proof, "storageProof", "the proof"), "the storage proofs"):
        if isinstance(entry, Mapping) and "key" in entry and _slot(entry["key"]) == slot:
            return entry
    raise ProofError("the proof has no entry for the slot read")


def verify_state_answer(
    method: str,
    params: Sequence[Any],
    result: Any,
    proof: Mapping[str, Any],
    state_root: bytes,
    code: bytes | None = None,
) -> None:
    """Judge a node's `result` for a state read against the proof of its account (the answer
    to proof_request's call) under the trusted block's `state_root`. eth_getCode's result is
    the code; `code` may hand it over already decoded."""
    if method not in STATE_READS:
        raise ValueError(f"{method} is not a state read eth_getProof proves")
    if not params:
        raise ProofError(f"{method} names no address")
    account = verify_account(state_root, params[0], proof)
    if method == "eth_getBalance":
        if quantity(result, "the balance") != account.balance:
            raise ProofError(f"the balance answered is not the proven {account.balance}")
    elif method == "eth_getTransactionCount":
        if quantity(result, "the nonce") != account.nonce:
            raise ProofError(f"the nonce answered is not the proven {account.nonce}")
    elif method == "eth_getStorageAt":
        if len(params) < 2:
            raise ProofError("eth_getStorageAt names no slot")
        slot = _slot(params[1])
        value = verify_storage(account, slot, _storage_entry(proof, slot))
        word = data(result, "the storage value")
        if len(word) > 32 or int.from_bytes(word, "big") != value:
            raise ProofError(f"the storage value answered is not the proven {value:#x}")
    else:
        answered = code if code is not None else data(result, "the code")
        if keccak(answered) != account.code_hash:
            raise ProofError("the code answered does not hash to the account's codeHash")
