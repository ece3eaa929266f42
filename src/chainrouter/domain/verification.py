"""How the router checks a node's answer (design notes, "Integrity"; router/proving.py does it)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class VerifyMode(enum.StrEnum):
    """A chain's setting (`CHAINROUTER_VERIFY`, per chain `CHAINROUTER_CHAIN_VERIFY`)."""

    OFF = "off"  # believe what the nodes answer (heads and audits still apply)
    CACHE = "cache"  # prove, or have two providers agree on, every answer the cache keeps
    ALWAYS = "always"  # as `cache`, and prove every provable answer, kept or not


class Verified(enum.StrEnum):
    """How an answer was checked: the value of `X-Verified` (docs/integrity.md)."""

    PROOF = "proof"
    AGREEMENT = "agreement"


class Check(enum.Enum):
    """What a call's answer will be checked by."""

    STATE = "state"  # eth_getProof against the block's stateRoot
    BLOCK = "block"  # the header's own hash, agreed by two providers
    RECEIPT = "receipt"  # the block's receipts against its receiptsRoot
    TRANSACTION = "transaction"  # the block's transactions against its transactionsRoot
    LOGS = "logs"  # the range's blocks' receipts against their receiptsRoots
    AGREEMENT = "agreement"  # another provider's node answers the same


@dataclass(frozen=True, slots=True)
class ProofPlan:
    check: Check
    block: int | str | None = None  # the block a state read is pinned to: number or hash
    through: int | None = None  # the last block of a log range (`block` its first)
    # A read of `latest` sent pinned to `block` instead, so that its answer can be proven.
    pins_latest: bool = False
