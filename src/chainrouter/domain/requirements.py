"""What a call needs of a node, from its method and parameters (design notes, "Node
capabilities"; the table is documented in docs/router.md, "What a call needs").

`METHODS` is the one table: for each method the router reads the parameters of, what kind of
data it reads and which parameter names the block. A method not in the table needs nothing the
router checks (a node's own error still fails over: `domain/upstream_errors.py`), except that
every `trace_*` method needs tracing and every `debug_*` method needs the debug namespace.

A block parameter is a hex number, a tag (`latest`, `pending`, `safe`, `finalized`,
`earliest`) or an EIP-1898 object (`{"blockNumber": ...}` or `{"blockHash": ..., "requireCanonical":
...}`). Anything else where the table names a block is the caller's error: -32602, never sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Reads(Enum):
    STATE = "state"  # account state at a block: needs that block's state
    HISTORY = "history"  # blocks, transactions, receipts or logs of a block or a range
    TRACE = "trace"  # re-executes a block: tracing, and the state before that block
    WRITE = "write"  # sends a transaction: no block; never retried blindly elsewhere
    HEAD = "head"  # the chain head itself


@dataclass(frozen=True, slots=True)
class MethodNeeds:
    reads: Reads
    block_param: int | None  # index of the block parameter; None: none, or a range or hash
    namespace: str | None = None  # "trace" or "debug": the namespace the node must serve


_STATE = {
    "eth_getBalance": 1,
    "eth_getCode": 1,
    "eth_getTransactionCount": 1,
    "eth_getStorageAt": 2,
    "eth_call": 1,
    "eth_estimateGas": 1,
    "eth_createAccessList": 1,
    "eth_getProof": 2,
    "eth_simulateV1": 1,
}
_HISTORY = {
    "eth_getBlockByNumber": 0,
    "eth_getBlockTransactionCountByNumber": 0,
    "eth_getUncleCountByBlockNumber": 0,
    "eth_getUncleByBlockNumberAndIndex": 0,
    "eth_getTransactionByBlockNumberAndIndex": 0,
    "eth_getRawTransactionByBlockNumberAndIndex": 0,
    "eth_getBlockReceipts": 0,
    "eth_getHeaderByNumber": 0,
    "eth_feeHistory": 1,
}
_TRACE_AT_BLOCK = {  # (namespace, block parameter, reads the state *before* the block)
    "trace_block": ("trace", 0, True),
    "trace_replayBlockTransactions": ("trace", 0, True),
    "trace_call": ("trace", 2, False),
    "trace_callMany": ("trace", 1, False),
    "debug_traceBlockByNumber": ("debug", 0, True),
    "debug_traceCall": ("debug", 1, False),
}

METHODS: dict[str, MethodNeeds] = {
    **{m: MethodNeeds(Reads.STATE, i) for m, i in _STATE.items()},
    **{m: MethodNeeds(Reads.HISTORY, i) for m, i in _HISTORY.items()},
    "eth_getLogs": MethodNeeds(Reads.HISTORY, None),
    **{m: MethodNeeds(Reads.TRACE, i, ns) for m, (ns, i, _) in _TRACE_AT_BLOCK.items()},
    "trace_filter": MethodNeeds(Reads.TRACE, None, "trace"),
    "eth_blockNumber": MethodNeeds(Reads.HEAD, None),
    "eth_sendRawTransaction": MethodNeeds(Reads.WRITE, None),
    "eth_sendTransaction": MethodNeeds(Reads.WRITE, None),
}
HEAD_ONLY = frozenset(m for m, spec in METHODS.items() if spec.reads is Reads.HEAD)


def block_param_only() -> dict[str, int]:
    """The methods whose block parameter is the only one the router reads (to know what a call
    needs; the response cache reads the rest only of a call it looks up, and says so), each with
    that parameter's index: calls alike but for the other parameters need the same of a node,
    and may share a decision (router/fast/decisions.py)."""
    return {
        method: spec.block_param
        for method, spec in METHODS.items()
        if spec.block_param is not None and spec.reads in (Reads.STATE, Reads.HISTORY, Reads.TRACE)
    }


_READS_PARENT_STATE = frozenset(m for m, (_, _, parent) in _TRACE_AT_BLOCK.items() if parent)


class Work(Enum):
    """How much work a call asks of a node, which says whether its time to answer is the node's
    (and may set a time-out and a hedge) or the call's own."""

    QUICK = "quick"  # a look-up of bounded size: its time is the node's
    EXECUTES = "executes"  # runs EVM code (eth_call ...): as long as the code takes
    RANGE = "range"  # many blocks at once (eth_getLogs, a block's receipts)
    TRACE = "trace"  # re-executes with tracing
    WRITE = "write"  # sends a transaction: never sent twice
    UNKNOWN = "unknown"  # not in these tables: may be anything, a write included

    # By identity (members are singletons): Enum's own hash is Python code, and a node's latency
    # record is looked up by (node, work) on every call.
    __hash__ = object.__hash__


_QUICK_LOOKUPS = frozenset(
    {
        "eth_chainId",
        "net_version",
        "net_listening",
        "net_peerCount",
        "web3_clientVersion",
        "web3_sha3",
        "eth_protocolVersion",
        "eth_syncing",
        "eth_gasPrice",
        "eth_maxPriorityFeePerGas",
        "eth_blobBaseFee",
        "eth_getBlockByHash",
        "eth_getTransactionByHash",
        "eth_getRawTransactionByHash",
        "eth_getTransactionReceipt",
        "eth_getTransactionByBlockHashAndIndex",
        "eth_getBlockTransactionCountByHash",
        "eth_getUncleCountByBlockHash",
        "eth_getUncleByBlockHashAndIndex",
        "eth_getHeaderByHash",
    }
)
_EXECUTES = frozenset({"eth_call", "eth_estimateGas", "eth_createAccessList", "eth_simulateV1"})
_RANGES = frozenset({"eth_getLogs", "eth_getBlockReceipts"})


def work_of(method: str) -> Work:
    """How much work a call of `method` asks (`Work`)."""
    if method in _QUICK_LOOKUPS:
        return Work.QUICK
    if method in _EXECUTES:
        return Work.EXECUTES
    if method in _RANGES:
        return Work.RANGE
    spec = METHODS.get(method)
    if spec is not None:
        if spec.reads is Reads.WRITE:
            return Work.WRITE
        return Work.TRACE if spec.reads is Reads.TRACE else Work.QUICK
    if method.startswith(_NAMESPACES):
        return Work.TRACE
    return Work.UNKNOWN


HEAD_TAGS = frozenset({"latest", "pending"})
LAGGING_TAGS = frozenset({"safe", "finalized"})  # some way behind the head: where, nodes know
HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,16}")  # a block number, at most 64 bits
HASH = re.compile(r"0x[0-9a-fA-F]{64}")  # a block or transaction hash


@dataclass(frozen=True, slots=True)
class Needs:
    """What one call needs. Block numbers are None where the router cannot know them before a
    node answers (a tag behind the head, a block hash): those are not checked in advance."""

    state_at: int | None = None  # the block whose state it reads
    history_from: int | None = None  # the oldest block whose history it reads
    history_to: int | None = None  # the newest
    namespace: str | None = None  # "trace" or "debug"
    write: bool = False
    at_head: bool = False  # reads the head (`latest`, `pending`, or no block named)

    @property
    def oldest_block(self) -> int | None:
        """The oldest block it reads anything of (state or history), where known."""
        found = [b for b in (self.history_from, self.state_at) if b is not None]
        return min(found) if found else None

    @property
    def blocks(self) -> tuple[int, ...]:
        """Every block number it names."""
        return tuple(
            b for b in (self.state_at, self.history_from, self.history_to) if b is not None
        )


NOTHING = Needs()  # the common case: checked by identity on the request path
AT_HEAD = Needs(at_head=True)  # a read at the head and nothing else: checked by identity too


class BadParamsError(ValueError):
    """A parameter the router must read is malformed: -32602."""


def needs_anything(method: str) -> bool:
    """Whether calls of `method` can need anything the router checks (else: `NOTHING`)."""
    return method in METHODS or method.startswith(_NAMESPACES)


_NAMESPACES = ("trace_", "debug_")


def needs_of(method: str, params: Any, head: int | None) -> Needs:
    """What a call of `method` with `params` needs, with the chain head at `head` (None:
    unknown). `BadParamsError` when a block parameter or a log filter is malformed."""
    spec = METHODS.get(method)
    if spec is None:
        if method.startswith("trace_"):
            return Needs(namespace="trace")
        if method.startswith("debug_"):
            return Needs(namespace="debug")
        return NOTHING
    if spec.reads is Reads.WRITE:
        return Needs(write=True)
    if spec.reads is Reads.HEAD:
        return AT_HEAD
    if not isinstance(params, list):
        return NOTHING if spec.namespace is None else Needs(namespace=spec.namespace)
    if method == "eth_getLogs":
        return _logs_needs(params, head)
    if method == "trace_filter":
        ranged = _logs_needs(params, head, what="trace_filter")
        return Needs(
            history_from=ranged.history_from, history_to=ranged.history_to, namespace="trace"
        )
    block = None
    at_head = True  # no block named: the latest
    if spec.block_param is not None and len(params) > spec.block_param:
        named = params[spec.block_param]
        block = block_number(named, head)
        at_head = _names_head(named)
    if spec.reads is Reads.STATE and block is None:
        return AT_HEAD if at_head else NOTHING
    if spec.reads is Reads.STATE:
        return Needs(state_at=block)
    if spec.reads is Reads.HISTORY and block is None:
        return AT_HEAD if at_head else NOTHING
    if spec.reads is Reads.HISTORY:
        return Needs(history_from=block, history_to=block)
    state = block
    if block is not None and method in _READS_PARENT_STATE:
        state = max(0, block - 1)
    return Needs(state_at=state, history_from=block, history_to=block, namespace=spec.namespace)


def _names_head(value: Any) -> bool:
    """Whether a (valid) block parameter names the head: `latest`, `pending`, or those tags as
    EIP-1898 `blockNumber`."""
    if isinstance(value, dict):
        value = value.get("blockNumber")
    return isinstance(value, str) and value in HEAD_TAGS


def block_number(value: Any, head: int | None) -> int | None:
    """The block a block parameter names, where it can be known now: a number, `earliest`, or
    `latest`/`pending` at a known head; None for a block hash, a lagging tag or an unknown head."""
    if isinstance(value, str):
        if value in HEAD_TAGS:
            return None  # the head: every node in sync has its state
        if value in LAGGING_TAGS:
            return None
        if value == "earliest":
            return 0
        return _quantity(value, "block number")
    if isinstance(value, dict):
        return _eip1898(value)
    raise BadParamsError(
        "block parameter must be a hex block number, a tag (latest, pending, safe, finalized, "
        "earliest) or an object with blockNumber or blockHash"
    )


def _eip1898(value: dict[str, Any]) -> int | None:
    if "blockNumber" in value and "blockHash" in value:
        raise BadParamsError("block parameter must have blockNumber or blockHash, not both")
    if "blockNumber" in value:
        number = value["blockNumber"]
        if isinstance(number, str) and number == "earliest":
            return 0
        if isinstance(number, str) and number in HEAD_TAGS | LAGGING_TAGS:
            return None
        return _quantity(number, "blockNumber")
    if "blockHash" in value:
        block_hash = value["blockHash"]
        if not isinstance(block_hash, str) or not HASH.fullmatch(block_hash):
            raise BadParamsError("blockHash must be a 32-byte hex string")
        canonical = value.get("requireCanonical", False)
        if not isinstance(canonical, bool):
            raise BadParamsError("requireCanonical must be true or false")
        return None
    raise BadParamsError("block parameter object must have blockNumber or blockHash")


def _quantity(value: Any, what: str) -> int:
    if not isinstance(value, str) or not HEX_QUANTITY.fullmatch(value):
        shown = str(value)[:40]
        raise BadParamsError(f"{what} must be a hex quantity of at most 64 bits, got {shown!r}")
    return int(value, 16)


def _logs_needs(params: list[Any], head: int | None, what: str = "eth_getLogs") -> Needs:
    if not params:
        return NOTHING
    query = params[0]
    if not isinstance(query, dict):
        raise BadParamsError(f"{what} takes a filter object")
    if "blockHash" in query:
        if "fromBlock" in query or "toBlock" in query:
            raise BadParamsError(f"{what} takes blockHash or fromBlock/toBlock, not both")
        block_hash = query["blockHash"]
        if not isinstance(block_hash, str) or not HASH.fullmatch(block_hash):
            raise BadParamsError("blockHash must be a 32-byte hex string")
        return NOTHING
    to_block = query.get("toBlock", "latest")
    start = _range_end(query.get("fromBlock", "latest"), head, "fromBlock")
    end = _range_end(to_block, head, "toBlock")
    at_head = isinstance(to_block, str) and to_block in HEAD_TAGS
    if start is None and end is None:
        return AT_HEAD if at_head else NOTHING
    return Needs(history_from=start, history_to=end, at_head=at_head)


def _range_end(value: Any, head: int | None, what: str) -> int | None:
    """An end of a log range. Every head tag is read as the head here: a range is only as wide
    as the blocks it covers, and a tag behind the head covers at most as many."""
    if isinstance(value, str) and value in HEAD_TAGS | LAGGING_TAGS:
        return head
    if isinstance(value, str) and value == "earliest":
        return 0
    return _quantity(value, what)


def logs_span(needs: Needs) -> int | None:
    """Blocks an `eth_getLogs` range covers, when both ends are known and in order."""
    start, end = needs.history_from, needs.history_to
    if start is None or end is None or end < start:
        return None
    return end - start + 1
