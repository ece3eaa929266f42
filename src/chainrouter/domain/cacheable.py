"""Which answers the response cache may keep, and for how long: the one table (design notes,
"Response cache and coalescing"; documented method by method in docs/cache.md).

An answer is kept only when it cannot change any more:
- `CONSTANT`: the chain's own constants (`eth_chainId`, `net_version`);
- `BLOCK`: a call pinned by its block parameter, to a block hash (its content never changes),
  or to a block number at or below the chain's finalized block;
- `TX`: a transaction, receipt or trace by transaction hash, once the block it names is final;
- `LOGS`: `eth_getLogs` of a block hash, or of a range of final block numbers.
Never kept: a tag resolved when the call arrives (`latest`, `pending`, `safe`, `finalized`,
`earliest` too, as it is cheap), an omitted block (the latest), any error, a `null` answer, an
answer from a node whose head is below the block it was asked about (a lagging node answers
`null` or nothing for blocks it lacks), and a method not in this table. Unfinalized answers are
not kept at all: they are only shared by identical calls in flight at once (coalescing), so a
reorg has nothing to drop.

Coalescing is wider than caching: any read-only call in `COALESCED` may share one attempt with
identical calls in flight, whatever block it names (identical calls at the same moment may take
the same answer).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from chainrouter.domain.requirements import HASH, HEX_QUANTITY


class Pin(Enum):
    CONSTANT = "constant"
    BLOCK = "block"
    TX = "transaction"
    LOGS = "logs"


@dataclass(frozen=True, slots=True)
class Rule:
    pin: Pin
    block_param: int = 0  # BLOCK: index of the parameter naming the block
    # The answer lists items that may each have failed on the node alone (a tracer's time-out):
    # one with an `error` is not final.
    items_may_fail: bool = False


_BY_BLOCK = {
    # blocks and their contents
    "eth_getBlockByNumber": 0,
    "eth_getBlockByHash": 0,
    "eth_getBlockTransactionCountByNumber": 0,
    "eth_getBlockTransactionCountByHash": 0,
    "eth_getUncleCountByBlockNumber": 0,
    "eth_getUncleCountByBlockHash": 0,
    "eth_getUncleByBlockNumberAndIndex": 0,
    "eth_getUncleByBlockHashAndIndex": 0,
    "eth_getTransactionByBlockNumberAndIndex": 0,
    "eth_getTransactionByBlockHashAndIndex": 0,
    "eth_getBlockReceipts": 0,
    # state at a block
    "eth_getBalance": 1,
    "eth_getCode": 1,
    "eth_getTransactionCount": 1,
    "eth_getStorageAt": 2,
    "eth_call": 1,
    "eth_getProof": 2,
    # re-execution of a block
    "trace_block": 0,
    "trace_replayBlockTransactions": 0,
}
# Traced per transaction by the node's tracer, which may fail one transaction alone.
_TRACED_BY_THE_NODE = ("debug_traceBlockByNumber", "debug_traceBlockByHash")

CACHEABLE: dict[str, Rule] = {
    "eth_chainId": Rule(Pin.CONSTANT),
    "net_version": Rule(Pin.CONSTANT),
    **{method: Rule(Pin.BLOCK, index) for method, index in _BY_BLOCK.items()},
    **{m: Rule(Pin.BLOCK, 0, items_may_fail=True) for m in _TRACED_BY_THE_NODE},
    "eth_getTransactionByHash": Rule(Pin.TX),
    "eth_getTransactionReceipt": Rule(Pin.TX),
    "trace_transaction": Rule(Pin.TX),
    "eth_getLogs": Rule(Pin.LOGS),
}

# Read-only calls whose identical copies in flight at once share one attempt.
COALESCED = frozenset(
    {
        *CACHEABLE,
        "eth_blockNumber",
        "eth_gasPrice",
        "eth_maxPriorityFeePerGas",
        "eth_blobBaseFee",
        "eth_feeHistory",
        "eth_estimateGas",
        "eth_syncing",
        "net_listening",
        "web3_clientVersion",
    }
)

_HEX = re.compile(r"0x[0-9a-fA-F]*")


@dataclass(frozen=True, slots=True)
class Pinned:
    """What one call's answer depends on, as far as the cache is concerned."""

    rule: Rule
    block: int | None = None  # the (highest) block number it names; None: a hash, or constant
    by_hash: bool = False  # pinned to a block hash: final whatever the block's number


def pinned(method: str, params: Any) -> Pinned | None:
    """What a call of `method` with `params` is pinned to; None when its answer may never be
    kept (a head tag, an omitted block, a method not in the table, parameters not understood)."""
    rule = CACHEABLE.get(method)
    if rule is None:
        return None
    if rule.pin is Pin.CONSTANT:
        return Pinned(rule)
    if not isinstance(params, list):
        return None
    if rule.pin is Pin.TX:
        if params and isinstance(params[0], str) and HASH.fullmatch(params[0]):
            return Pinned(rule)
        return None
    if rule.pin is Pin.LOGS:
        return _logs_pin(rule, params)
    if len(params) <= rule.block_param:
        return None  # no block named: the latest
    return _block_pin(rule, params[rule.block_param])


def _block_pin(rule: Rule, value: Any) -> Pinned | None:
    if isinstance(value, dict):  # EIP-1898
        if value.get("requireCanonical") is True:
            return None  # the answer depends on the block staying canonical: not final
        if "blockHash" in value and "blockNumber" not in value:
            value = value["blockHash"]
        elif "blockNumber" in value and "blockHash" not in value:
            value = value["blockNumber"]
        else:
            return None
    if not isinstance(value, str):
        return None
    if HASH.fullmatch(value):
        return Pinned(rule, by_hash=True)
    if HEX_QUANTITY.fullmatch(value):
        return Pinned(rule, block=int(value, 16))
    return None  # a tag


def _logs_pin(rule: Rule, params: list[Any]) -> Pinned | None:
    if len(params) != 1 or not isinstance(params[0], dict):
        return None
    query = params[0]
    if "blockHash" in query:
        block_hash = query["blockHash"]
        if "fromBlock" in query or "toBlock" in query:
            return None
        if isinstance(block_hash, str) and HASH.fullmatch(block_hash):
            return Pinned(rule, by_hash=True)
        return None
    start, end = query.get("fromBlock"), query.get("toBlock")
    if not (isinstance(start, str) and isinstance(end, str)):
        return None  # an omitted end is the latest block
    if not (HEX_QUANTITY.fullmatch(start) and HEX_QUANTITY.fullmatch(end)):
        return None
    return Pinned(rule, block=max(int(start, 16), int(end, 16)))


def keepable(pin: Pinned, result: Any, finalized: int | None, node_head: int | None) -> bool:
    """Whether `result` (a node's answer's `result`, parsed) may be kept, with the chain
    finalized up to block `finalized` and the answering node's head at `node_head` (None:
    unknown)."""
    if result is None:
        return False  # not found, or not yet: a lagging node says so as well
    rule = pin.rule
    if (
        rule.items_may_fail
        and isinstance(result, list)
        and any(isinstance(item, dict) and "error" in item for item in result)
    ):
        return False
    if rule.pin is Pin.CONSTANT:
        return True
    if pin.by_hash:
        # The block's content is fixed by its hash; an empty log list could come from a node
        # that does not know the block, so only logs that prove it do are kept.
        return not (rule.pin is Pin.LOGS and result == [])
    if finalized is None:
        return False
    if rule.pin is Pin.TX:
        block = _block_of(result)
        return block is not None and block <= finalized
    block = pin.block
    if block is None or block > finalized:
        return False
    # The answering node had reached the block: an empty answer is the block's, not a gap.
    return node_head is not None and node_head >= block


def _block_of(result: Any) -> int | None:
    """The block number a transaction, receipt or transaction trace names (the highest, for a
    list of traces); None while it is pending or when it names none."""
    items = result if isinstance(result, list) else [result]
    if not items:
        return None
    numbers = []
    for item in items:
        number = item.get("blockNumber") if isinstance(item, dict) else None
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            numbers.append(number)
        elif isinstance(number, str) and HEX_QUANTITY.fullmatch(number):
            numbers.append(int(number, 16))
        else:
            return None
    return max(numbers)


def cache_key(
    chain_id: int, generation: int, method: str, params: Any, epoch: int = 0
) -> str | None:
    """The key of a call's answer: chain, the chain's purge generation and finality epoch (how
    often an administrator purged it, and its finality went backwards), method, and a digest of
    the parameters in one spelling (object keys sorted, hex strings in lower case). Never the
    request id, never the API key: one cache serves everyone. None for parameters with a
    fractional number or an integer beyond 64 bits: parsed, two of them may look alike though
    they were sent differently, so such a call is neither cached nor coalesced."""
    if params == []:  # the head reads' usual spelling (eth_blockNumber, ...): digested once
        return f"{chain_id}:{generation}.{epoch}:{method}:{_NO_PARAMS}"
    try:
        canonical = orjson.dumps(_canonical(params), option=orjson.OPT_SORT_KEYS)
    except _NotExactError:
        return None
    return f"{chain_id}:{generation}.{epoch}:{method}:{_digest(canonical)}"


def _digest(canonical: bytes) -> str:
    return hashlib.blake2b(canonical, digest_size=20).hexdigest()


class _NotExactError(ValueError):
    pass


_NO_PARAMS = _digest(b"[]")


_INT64 = range(-(2**63), 2**64)


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower() if _HEX.fullmatch(value) else value
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, float) or (
        isinstance(value, int) and not isinstance(value, bool) and value not in _INT64
    ):
        raise _NotExactError
    return value


class CachePrices:
    """What a call answered from the cache (or by joining an identical call in flight) costs:
    the operator's price per chain and method, in nano-credits. No provider earns it.

    Keys as the setting spells them (`CHAINROUTER_CACHE_PRICES`): `"<chain>:<method>"`,
    `"<chain>:*"`, `"*:<method>"` or `"*"`, the most specific one that matches wins; nothing
    matching: free."""

    def __init__(self, prices_nano: dict[str, int] | None = None) -> None:
        self._prices = dict(prices_nano or {})
        self._default = self._prices.get("*", 0)

    def __bool__(self) -> bool:
        return any(self._prices.values())

    def items(self) -> list[tuple[str, int]]:
        return sorted(self._prices.items())

    def price_nano(self, chain_id: int, method: str) -> int:
        prices = self._prices
        if not prices:
            return 0
        for key in (f"{chain_id}:{method}", f"{chain_id}:*", f"*:{method}"):
            found = prices.get(key)
            if found is not None:
                return found
        return self._default
