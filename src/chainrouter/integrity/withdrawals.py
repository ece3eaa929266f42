"""A block's withdrawals (Shanghai on), proven against its `withdrawalsRoot`: the trie holds, at
RLP(index), RLP [index, validatorIndex, address, amount in gwei]. Anvil's blocks carry none (an
empty list, and the empty trie's root); a chain with a beacon chain carries some in most blocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chainrouter.integrity._codec import data, field, listed, quantity, rlp, trie_root
from chainrouter.integrity.errors import ProofError
from chainrouter.integrity.headers import verify_header


def encode_withdrawal(withdrawal: Mapping[str, Any]) -> bytes:
    what = "a withdrawal"
    return bytes(
        rlp.encode(
            [
                quantity(field(withdrawal, "index", what), "index"),
                quantity(field(withdrawal, "validatorIndex", what), "validatorIndex"),
                data(field(withdrawal, "address", what), "address", 20),
                quantity(field(withdrawal, "amount", what), "amount"),
            ]
        )
    )


def withdrawals_root(withdrawals: Sequence[Mapping[str, Any]]) -> bytes:
    return trie_root([encode_withdrawal(withdrawal) for withdrawal in withdrawals])


def verify_withdrawals(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The block's withdrawals, shown to make its withdrawalsRoot (its header checked against
    its hash too)."""
    verify_header(block)
    withdrawals = listed(field(block, "withdrawals", "the block"), "the block's withdrawals")
    root = data(field(block, "withdrawalsRoot", "the block"), "withdrawalsRoot", 32)
    if withdrawals_root(withdrawals) != root:
        raise ProofError("the withdrawals do not make the block's withdrawalsRoot")
    return list(withdrawals)
