"""The node's fault or the caller's answer: what a JSON-RPC error from an upstream means
(design notes, "Node capabilities"; the table is documented in docs/router.md).

`classify` reads an error object a node answered. A `NodeFault` says the node could not serve
the call (it lacks the state or the block, does not serve the method, hit its own range or
rate limit, or failed inside): the router tries the next eligible node, bills nothing, and
learns what the node cannot do. Anything else is the node's answer (an execution revert, a nonce
or gas error, a real "invalid params"): returned and billed.

Rules are tried in order; the first whose code and message pattern both match decides. Messages
are matched case-insensitively; the patterns are those of geth, erigon, nethermind, reth, besu,
anvil and the common hosted providers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Fault(Enum):
    STATE_MISSING = "state_missing"  # the block's state is pruned or not yet there
    BLOCK_MISSING = "block_missing"  # the block (or its receipts/logs) is not kept, or is ahead
    METHOD_MISSING = "method_missing"  # the method or its namespace is not served here
    RANGE_LIMIT = "range_limit"  # the node's own eth_getLogs block-range limit
    RESULT_LIMIT = "result_limit"  # too many results for this node: another may return them
    RATE_LIMITED = "rate_limited"  # the node's (or its provider's) own rate limit
    NODE_ERROR = "node_error"  # an internal failure or a timeout inside the node


@dataclass(frozen=True, slots=True)
class NodeFault:
    fault: Fault
    limit: int | None = None  # the range limit the node stated, where it did
    message: str = ""


@dataclass(frozen=True, slots=True)
class _Rule:
    fault: Fault | None  # None: the node's answer
    codes: frozenset[int] | None  # None: any code
    pattern: re.Pattern[str] | None  # None: any message


def _rule(fault: Fault | None, codes: tuple[int, ...] | None, pattern: str | None) -> _Rule:
    return _Rule(
        fault,
        None if codes is None else frozenset(codes),
        None if pattern is None else re.compile(pattern, re.IGNORECASE),
    )


# The table. docs/router.md, "Node failure or answer", shows it with an example per row.
RULES: tuple[_Rule, ...] = (
    # Answers that would otherwise match a fault below: the caller's own mistake or the chain's
    # verdict, the same from every node.
    _rule(None, None, r"execution reverted|invalid block range|fromblock .*(after|greater|>)"),
    _rule(
        Fault.BLOCK_MISSING,
        None,
        r"header not found|unknown block|block not found|pruned history|(history|bodies|receipts)"
        r" .*(pruned|expired|unavailable|not available)",
    ),
    _rule(
        Fault.STATE_MISSING,
        None,
        r"missing trie node|required historical state unavailable|historical state .*(not |un)"
        r"available|state (is )?not available|state histor(y|ies)|state .*pruned|pruned state"
        r"|blockoutofrangeerror|old data not available|distance to target block",
    ),
    # A result-size limit before a range limit: it depends on the query, and a message naming
    # both ("response size exceeded ... up to a 2K block range") must teach nothing a caller
    # could provoke.
    _rule(
        Fault.RESULT_LIMIT,
        None,
        r"query returned more than|too many (results|logs)|response size|result set too large",
    ),
    _rule(
        Fault.RANGE_LIMIT,
        None,
        r"block range|range (is )?too (large|wide)|exceed(s|ed)? (the )?max(imum)? (block )?range"
        r"|too many blocks|range limit",
    ),
    _rule(
        Fault.RATE_LIMITED,
        None,
        r"rate limit|too many requests|request limit|capacity exceeded|exceeded .*(rate|quota)"
        r"|daily request count",
    ),
    _rule(Fault.METHOD_MISSING, (-32601,), None),
    _rule(
        Fault.METHOD_MISSING,
        None,
        r"method .*(not found|does not exist|not available|not supported|not enabled|disabled)"
        r"|unsupported method|namespace .*(disabled|not enabled)|not whitelisted",
    ),
    _rule(Fault.NODE_ERROR, (-32603,), None),
)

_STATED_LIMIT = re.compile(
    r"(?:at most|up to|max(?:imum)?(?: block range)?(?: is| of)?|limit(?:ed)?(?: is| of| to)?)"
    r"\s*(?:a\s*)?([0-9][0-9,_]*)\s*(k\b)?",
    re.IGNORECASE,
)


def classify(error: Any) -> NodeFault | None:
    """The node's fault that a JSON-RPC error object reports, or None if it is an answer."""
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    message = error.get("message")
    text = message if isinstance(message, str) else ""
    for rule in RULES:
        if rule.codes is not None and code not in rule.codes:
            continue
        if rule.pattern is not None and not rule.pattern.search(text):
            continue
        if rule.fault is None:
            return None
        limit = stated_limit(text) if rule.fault is Fault.RANGE_LIMIT else None
        return NodeFault(rule.fault, limit, text[:200])
    return None


def stated_limit(message: str) -> int | None:
    """The block-range limit a node's message states ("... up to a 2K block range",
    "exceed maximum block range: 5000"), where it does."""
    found = _STATED_LIMIT.search(message)
    if found is None:
        match = re.search(r"range[^0-9]{0,20}([0-9][0-9,_]*)", message, re.IGNORECASE)
        if match is None:
            return None
        digits, thousands = match.group(1), None
    else:
        digits, thousands = found.group(1), found.group(2)
    value = int(digits.replace(",", "").replace("_", "") or "0")
    if thousands:
        value *= 1000
    return value if value > 0 else None
