"""Block headers: a header is what its hash says it is.

A block's hash is keccak(RLP(header)), so every header field a node reports (the roots that
state, transactions and receipts are proven against among them) is bound to the hash. Which hash
is the chain's is not a question of proof: the router trusts a hash that nodes of two providers
agree on, and every ancestor reached from it by `parentHash` (verify_parent_chain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chainrouter.integrity._codec import data, field, keccak, quantity, rlp
from chainrouter.integrity.errors import ProofError

# (field, byte length or None for a quantity, and -1 for bytes of any length), in RLP order.
_QUANTITY = None
_ANY_LENGTH = -1
HEADER_FIELDS: tuple[tuple[str, int | None], ...] = (
    ("parentHash", 32),
    ("sha3Uncles", 32),
    ("miner", 20),
    ("stateRoot", 32),
    ("transactionsRoot", 32),
    ("receiptsRoot", 32),
    ("logsBloom", 256),
    ("difficulty", _QUANTITY),
    ("number", _QUANTITY),
    ("gasLimit", _QUANTITY),
    ("gasUsed", _QUANTITY),
    ("timestamp", _QUANTITY),
    ("extraData", _ANY_LENGTH),
    ("mixHash", 32),
    ("nonce", 8),
)
# Appended by later forks, in this order: London, Shanghai, Cancun (three), Prague. A header
# carries a prefix of them; one present after one missing is no header of any fork.
FORK_FIELDS: tuple[tuple[str, int | None], ...] = (
    ("baseFeePerGas", _QUANTITY),
    ("withdrawalsRoot", 32),
    ("blobGasUsed", _QUANTITY),
    ("excessBlobGas", _QUANTITY),
    ("parentBeaconBlockRoot", 32),
    ("requestsHash", 32),
)


def _value(block: Mapping[str, Any], name: str, length: int | None) -> int | bytes:
    raw = field(block, name, "the block")
    if length is None:
        return quantity(raw, name)
    return data(raw, name, None if length == _ANY_LENGTH else length)


def header_fields(block: Mapping[str, Any]) -> list[int | bytes]:
    """The header's fields as RLP encodes them, from a JSON-RPC block object."""
    values = [_value(block, name, length) for name, length in HEADER_FIELDS]
    missing: str | None = None
    for name, length in FORK_FIELDS:
        if name not in block or block[name] is None:
            missing = missing or name
            continue
        if missing is not None:
            raise ProofError(f"the block has {name} but not {missing}, which comes before it")
        values.append(_value(block, name, length))
    return values


def header_hash(block: Mapping[str, Any]) -> bytes:
    """keccak(RLP(header)) of a JSON-RPC block object: the hash its fields commit to."""
    return keccak(rlp.encode(header_fields(block)))


def verify_header(block: Mapping[str, Any]) -> bytes:
    """The block's hash, once its fields are shown to hash to it."""
    claimed = data(field(block, "hash", "the block"), "hash", 32)
    computed = header_hash(block)
    if computed != claimed:
        raise ProofError(f"the block's fields hash to 0x{computed.hex()}, not its hash")
    return claimed


def verify_parent_chain(trusted: Mapping[str, Any], blocks: Sequence[Mapping[str, Any]]) -> None:
    """`blocks`, in ascending order, are the ancestors of the trusted header: each one's hash is
    the `parentHash` of the next, and the last one's that of `trusted`. Every header is checked
    against its own hash on the way, so each one's fields are then as trusted as `trusted`."""
    child = trusted
    child_number = quantity(field(trusted, "number", "the trusted block"), "number")
    verify_header(trusted)
    for block in reversed(blocks):
        parent_hash = data(field(child, "parentHash", "a block"), "parentHash", 32)
        number = quantity(field(block, "number", "a block"), "number")
        if number != child_number - 1:
            raise ProofError(f"block {number} is not the parent of block {child_number}")
        if verify_header(block) != parent_hash:
            raise ProofError(f"block {number} is not the parent block {child_number} names")
        child, child_number = block, number
