"""Writes that land (design notes, "Integrity" and "Tail latency"): a signed raw transaction is
safe to send to more than one node, since its hash is its identity. What a node's answer to one
means is read here; router/stages/write.py reads the call, router/stages/attempt.py sends it.

- The transaction's hash is computed here from its bytes (keccak-256): an acceptance answers
  with that hash, whatever a node echoes; a node that echoes another hash is not believed.
- "Already known" (the node has the transaction in its pool, or sent it on) is an acceptance.
- Any other error under the call's id that is not the node's failure to serve it
  (domain/upstream_errors.py) is the transaction's refusal (nonce, funds, gas, signature): the
  client's answer.
"""

from __future__ import annotations

import re
from typing import Any

from eth_hash.auto import keccak

RAW_METHOD = "eth_sendRawTransaction"
# Methods a node would answer with keys of its own: never routed.
SIGNED_BY_NODE = frozenset({"eth_sendTransaction", "eth_sign", "eth_signTransaction"})
MAX_RAW_BYTES = 128 * 1024  # geth's pool takes at most this much of one transaction's data

_ALREADY_KNOWN = re.compile(
    r"already known|known transaction|already imported|alreadyknown|already exists"
    r"|already in (the )?(mempool|pool)|tx already in",
    re.IGNORECASE,
)
_HEX = re.compile(r"0x(?:[0-9a-fA-F]{2})+")


class RawTransactionError(ValueError):
    """The call's parameter is not a signed transaction's bytes."""


def transaction_hash(params: Any) -> str:
    """The `0x` hash of the signed transaction in `eth_sendRawTransaction`'s params."""
    if not isinstance(params, list) or len(params) != 1 or not isinstance(params[0], str):
        raise RawTransactionError("eth_sendRawTransaction takes one hex string: the signed bytes")
    raw = params[0]
    if len(raw) > 2 + 2 * MAX_RAW_BYTES:
        raise RawTransactionError(f"the transaction is larger than {MAX_RAW_BYTES:,} bytes")
    if not _HEX.fullmatch(raw):
        raise RawTransactionError("the transaction must be 0x-prefixed hex, whole bytes")
    return "0x" + keccak(bytes.fromhex(raw[2:])).hex()


def already_known(error: Any) -> bool:
    """Whether a node's error says that it already has the transaction."""
    message = error.get("message") if isinstance(error, dict) else None
    return isinstance(message, str) and _ALREADY_KNOWN.search(message[:500]) is not None


def echoes(result: Any, tx_hash: str) -> bool:
    """Whether an accepting node's result is the transaction's hash."""
    return isinstance(result, str) and result.lower() == tx_hash
