"""What a node can answer (design notes, "Node capabilities").

`Capabilities` is one node's: how much state and history it keeps, whether it traces, the widest
`eth_getLogs` range and the largest batch it accepts. Every field may be unknown (`None`): an
unknown capability is taken as present, so a node is given the benefit of the doubt until its
provider, screening, a probe or its own error says otherwise (a node that then fails the call is
the node's failure: the next one is tried and nothing is billed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeVar

_T = TypeVar("_T")

ARCHIVE_DEPTH = 1 << 62  # `state_depth` of a node that keeps the state of every block
MAX_MISSING_METHODS = 64  # bound on the methods remembered as missing on one node


@dataclass(frozen=True, slots=True)
class Capabilities:
    state_depth: int | None = None  # blocks of state kept behind the head; ARCHIVE_DEPTH: all
    blocks_from: int | None = None  # oldest block whose header, body, receipts and logs it serves
    trace: bool | None = None  # answers `trace_*` (Parity/OpenEthereum style)
    debug: bool | None = None  # answers `debug_trace*` (geth style)
    logs_max_range: int | None = None  # widest `eth_getLogs` range in blocks; None: no own limit
    max_batch: int | None = None  # largest JSON-RPC batch it accepts
    missing_methods: frozenset[str] = frozenset()  # methods it answered "method not found" to

    @property
    def archive(self) -> bool:
        return self.state_depth is not None and self.state_depth >= ARCHIVE_DEPTH

    def oldest_state(self, head: int | None) -> int | None:
        """The oldest block whose state it serves with its head at `head`; None: unknown."""
        if self.state_depth is None:
            return None
        if self.archive:
            return 0
        if head is None:
            return None
        return max(0, head - self.state_depth)

    def narrowed(self, other: Capabilities) -> Capabilities:
        """These capabilities, no wider than `other` where `other` knows better."""
        return Capabilities(
            state_depth=_lowest(self.state_depth, other.state_depth),
            blocks_from=_highest(self.blocks_from, other.blocks_from),
            trace=_and(self.trace, other.trace),
            debug=_and(self.debug, other.debug),
            logs_max_range=_lowest(self.logs_max_range, other.logs_max_range),
            max_batch=_lowest(self.max_batch, other.max_batch),
            missing_methods=_bounded(self.missing_methods | other.missing_methods),
        )

    def overridden_by(self, other: Capabilities) -> Capabilities:
        """`other` where it knows a value, else these (a probe's findings over a declaration)."""
        return Capabilities(
            state_depth=_first(other.state_depth, self.state_depth),
            blocks_from=_first(other.blocks_from, self.blocks_from),
            trace=_first(other.trace, self.trace),
            debug=_first(other.debug, self.debug),
            logs_max_range=_first(other.logs_max_range, self.logs_max_range),
            max_batch=_first(other.max_batch, self.max_batch),
            missing_methods=other.missing_methods,
        )

    def with_missing(self, method: str) -> Capabilities:
        return replace(self, missing_methods=_bounded(self.missing_methods | {method}))

    def as_json(self) -> dict[str, Any]:
        """The provider API's and storage's spelling (`docs/router.md`, "Node capabilities")."""
        state: int | str | None = self.state_depth
        if self.archive:
            state = "archive"
        return {
            "state_history": state,
            "blocks_from": self.blocks_from,
            "trace": self.trace,
            "debug": self.debug,
            "logs_max_block_range": self.logs_max_range,
            "max_batch_size": self.max_batch,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Capabilities:
        """The inverse of `as_json`, lenient about absent fields (stored rows are trusted)."""
        if not data:
            return UNKNOWN
        state = data.get("state_history")
        return cls(
            state_depth=ARCHIVE_DEPTH if state == "archive" else state,
            blocks_from=data.get("blocks_from"),
            trace=data.get("trace"),
            debug=data.get("debug"),
            logs_max_range=data.get("logs_max_block_range"),
            max_batch=data.get("max_batch_size"),
        )


UNKNOWN = Capabilities()


def _lowest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _highest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return b if a is None else a


def _first(preferred: _T | None, fallback: _T | None) -> _T | None:
    return fallback if preferred is None else preferred


def _bounded(methods: frozenset[str]) -> frozenset[str]:
    if len(methods) <= MAX_MISSING_METHODS:
        return methods
    return frozenset(sorted(methods)[:MAX_MISSING_METHODS])
