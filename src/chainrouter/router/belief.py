"""What the router believes of a node's answer beyond its form (design notes, "Integrity"): an
answer is a claim by a party paid for it, and some claims the router can see are a node's that
is behind the chain, whatever the node says of itself.

Two such claims, each believed only from a node that could know better (`Expected`, set by the
stages that know the chain's heads: router/stages/heads.py and consistent_head.py):
- **a head**: an `eth_blockNumber` older than the block the call must see (the key's seen head,
  the chain's head less its allowed lag) is a node's that is behind, or went back;
- **an absence**: "no such block, transaction or receipt" (`null`), or no logs (`[]`), from a
  node whose head is behind the chain's: the thing may be in a block that node does not have.

A doubted answer is not served while another node may answer; when every node tried is doubted,
the best of them is (the client gets an answer rather than an error: the highest head, or the
absence, which is then the chain's as far as any node knows). The pipeline's attempt stage and
the settling of calls the native server served under decisions both judge with `doubted`: the
rule's one home.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

HEAD_METHOD = "eth_blockNumber"
_HEX_DIGITS = b"0123456789abcdefABCDEF"

# Methods whose answer "there is none" may only mean that the node has not reached it yet, and
# how that answer reads.
ABSENT_WHEN: dict[str, Any] = {
    "eth_getBlockByNumber": None,
    "eth_getBlockByHash": None,
    "eth_getBlockReceipts": None,
    "eth_getTransactionByHash": None,
    "eth_getTransactionReceipt": None,
    "eth_getTransactionByBlockHashAndIndex": None,
    "eth_getTransactionByBlockNumberAndIndex": None,
    "eth_getRawTransactionByHash": None,
    "eth_getBlockTransactionCountByHash": None,
    "eth_getBlockTransactionCountByNumber": None,
    "eth_getUncleCountByBlockHash": None,
    "eth_getUncleCountByBlockNumber": None,
    "eth_getUncleByBlockHashAndIndex": None,
    "eth_getUncleByBlockNumberAndIndex": None,
    "eth_getLogs": [],
}


@dataclass(frozen=True, slots=True)
class Expected:
    """What a node's answer to one call must show to be believed (None: nothing)."""

    head_from: int | None = None  # an `eth_blockNumber` of at least this block
    # An absence (ABSENT_WHEN) only from a node whose head is at least this block.
    present_from: int | None = None

    def believes_absence_of(self, node_head: int | None) -> bool:
        """Whether an absence from a node at `node_head` (None: unknown) would be believed."""
        present_from = self.present_from
        return present_from is None or (node_head is not None and node_head >= present_from)


NOTHING_EXPECTED = Expected()


def doubted(method: str, answer: bytes, node_head: int | None, expected: Expected) -> bool:
    """Whether `answer` (one a node gave to a call of `method`, already judged an answer with a
    result) is a claim of a node behind the chain, by what the call `expected`."""
    if method == HEAD_METHOD:
        return expected.head_from is not None and head_doubted(head_told(answer), expected)
    if expected.believes_absence_of(node_head) or method not in ABSENT_WHEN:
        return False
    return bool(_result(answer) == ABSENT_WHEN[method])


def head_doubted(head: int | None, expected: Expected) -> bool:
    """Whether an `eth_blockNumber` telling `head` (None: none it could read) is doubted."""
    head_from = expected.head_from
    return head_from is not None and (head is None or head < head_from)


def head_told(answer: bytes) -> int | None:
    """The block number of an `eth_blockNumber` answer: read without a JSON parse where the
    answer is compact (nodes write it so), else parsed."""
    start = answer.find(b'"result":"0x')
    if start < 0:
        result = _result(answer)
        if not isinstance(result, str) or not result.startswith("0x"):
            return None
        return _quantity(result[2:].encode())
    start += len(b'"result":"0x')
    return _quantity(answer[start : answer.find(b'"', start)])


def _quantity(digits: bytes) -> int | None:
    if not 0 < len(digits) <= 16 or digits.strip(_HEX_DIGITS):
        return None
    return int(digits, 16)


def _result(answer: bytes) -> Any:
    # Only answers that say "none" are short; a long one is a block, a list of logs ...: no
    # need to parse megabytes to see that it is not `null` or `[]`.
    if len(answer) > 256:
        return ...
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return ...
    return parsed.get("result", ...) if isinstance(parsed, dict) else ...
