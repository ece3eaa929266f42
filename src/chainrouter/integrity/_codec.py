"""Reading JSON-RPC values as bytes and numbers, and the two trie operations proofs need.

Everything a node says arrives as JSON; a value of the wrong shape is a claim that does not hold
(ProofError), never a crash of the caller. Tries, RLP and keccak are the maintained libraries'
(`trie`, `rlp`, `eth-hash`): nothing here re-implements them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import rlp  # type: ignore[import-untyped]
from eth_hash.auto import keccak
from trie.constants import BLANK_NODE_HASH
from trie.hexary import HexaryTrie

from chainrouter.integrity.errors import ProofError

__all__ = ["BLANK_NODE_HASH", "EMPTY_CODE_HASH", "keccak", "rlp"]

EMPTY_CODE_HASH = keccak(b"")
# Bounds on what one proof may carry, far past what a real chain needs (a state trie is about 10
# levels deep; a node is at most 17 hashes of 33 bytes): a proof past them is refused before any
# work is spent on it.
MAX_PROOF_NODES = 64
MAX_PROOF_NODE_BYTES = 1024


def data(value: Any, what: str, length: int | None = None) -> bytes:
    """`value` as bytes: a `0x` hex string of whole bytes, of `length` bytes where given."""
    if not isinstance(value, str) or not value.startswith(("0x", "0X")) or len(value) % 2:
        raise ProofError(f"{what} is not 0x hex of whole bytes")
    try:
        decoded = bytes.fromhex(value[2:])
    except ValueError:
        raise ProofError(f"{what} is not 0x hex of whole bytes") from None
    if length is not None and len(decoded) != length:
        raise ProofError(f"{what} is {len(decoded)} bytes, not {length}")
    return decoded


def quantity(value: Any, what: str) -> int:
    """`value` as a number: a `0x` hex quantity (leading zeros tolerated, as some nodes send)."""
    if not isinstance(value, str) or not value.startswith(("0x", "0X")) or len(value) < 3:
        raise ProofError(f"{what} is not a 0x hex quantity")
    try:
        return int(value[2:], 16)
    except ValueError:
        raise ProofError(f"{what} is not a 0x hex quantity") from None


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProofError(f"{what} is not an object")
    return value


def field(obj: Mapping[str, Any], name: str, what: str) -> Any:
    """`obj[name]`, or ProofError naming what lacks it."""
    if not isinstance(obj, Mapping):
        raise ProofError(f"{what} is not an object")
    if name not in obj:
        raise ProofError(f"{what} has no {name}")
    return obj[name]


def listed(value: Any, what: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise ProofError(f"{what} is not a list")
    return value


def same_hex(one: Any, other: Any) -> bool:
    """Two hex strings that spell the same bytes or number (addresses in any case alike)."""
    return isinstance(one, str) and isinstance(other, str) and one.lower() == other.lower()


def trie_root(values: Sequence[bytes]) -> bytes:
    """The root of the trie that maps RLP(index) to each value: how a block commits to its
    transactions, receipts and withdrawals."""
    trie = HexaryTrie({})
    for index, value in enumerate(values):
        trie.set(rlp.encode(index), value)  # type: ignore[no-untyped-call]
    root: bytes = trie.root_hash
    return root


def proven_value(root: bytes, key: bytes, proof: Any, what: str) -> bytes:
    """The value a Merkle-Patricia proof (a list of hex RLP nodes, as eth_getProof answers)
    proves at `key` under `root`: b"" where it proves the key absent."""
    nodes_hex = listed(proof, what)
    if len(nodes_hex) > MAX_PROOF_NODES:
        raise ProofError(f"{what} has more than {MAX_PROOF_NODES} nodes")
    nodes = []
    for index, node_hex in enumerate(nodes_hex):
        encoded = data(node_hex, f"{what} node {index}")
        if len(encoded) > MAX_PROOF_NODE_BYTES:
            raise ProofError(f"{what} node {index} is larger than any trie node")
        try:
            nodes.append(rlp.decode(encoded))
        except rlp.DecodingError:
            raise ProofError(f"{what} node {index} is not RLP") from None
    try:
        value = HexaryTrie.get_from_proof(root, key, nodes)  # type: ignore[no-untyped-call]
    # The trie library raises assorted errors on nodes of the wrong shape (BadTrieProof for a
    # missing node, InvalidNode, ValidationError, ValueError, IndexError ...): each means only
    # that the proof does not prove anything.
    except Exception as error:
        raise ProofError(f"{what} does not reach the root: {type(error).__name__}") from None
    if not isinstance(value, bytes):
        raise ProofError(f"{what} proves no value")
    return value
