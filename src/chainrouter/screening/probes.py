"""Probes that find what a node can answer (design notes, "Node capabilities").

The probes are written over one injected coroutine, `ask(method, params)`, so that the same
code verifies a node at screening (through the outbound guard) and keeps it current in a
router's background (through the executor's `Forward`). Each probe is cheap and bounded:
- tracing and the debug namespace: `trace_transaction` / `debug_traceTransaction` of a hash that
  exists nowhere; a node that serves the namespace answers null or "not found", one that does
  not answers "method not found";
- state depth: `eth_getBalance` of the zero address at block 1 (an archive node answers), else
  a binary search over how far behind its head the node still has state, at most
  `MAX_SEARCH_STEPS` calls; when an earlier depth is known, two calls confirm it;
- block history: `eth_getBlockByNumber` at block 1, else the same search for the oldest block.
The `eth_getLogs` range and batch limits cannot be found cheaply: they come from the
declaration and from the node's own errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from chainrouter.domain.capabilities import ARCHIVE_DEPTH, Capabilities
from chainrouter.domain.upstream_errors import Fault, classify

MAX_SEARCH_STEPS = 40
_ZERO_HASH = "0x" + "00" * 32
_ZERO_ADDRESS = "0x" + "00" * 20


class NodeErrorAnswer(Exception):  # noqa: N818 - a node's answer, not our failure
    """The node answered the probe with a JSON-RPC error object."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error)[:200])
        self.error = error


class ProbeUnanswered(Exception):  # noqa: N818
    """The node gave no usable answer (transport failure, not JSON-RPC): nothing is learned."""


Ask = Callable[[str, list[Any]], Awaitable[Any]]


def call_body(call_id: int, method: str, params: list[Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params})


def read_answer(raw: bytes, call_id: int) -> Any:
    """The result of the JSON-RPC answer `raw` to call `call_id`: `NodeErrorAnswer` for an error
    object, `ProbeUnanswered` for anything that is not the answer to the call."""
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ProbeUnanswered("the answer is not JSON") from None
    if not isinstance(answer, dict) or answer.get("id") != call_id:
        raise ProbeUnanswered("the answer is not the JSON-RPC response to the call")
    if "error" in answer:
        raise NodeErrorAnswer(answer["error"])
    if "result" not in answer:
        raise ProbeUnanswered("the answer has no result")
    return answer["result"]


async def probe_capabilities(
    ask: Ask, head: int, previous: Capabilities | None = None
) -> Capabilities:
    """What the node behind `ask` can answer, with its head at `head`. A probe the node does
    not answer leaves that capability unknown."""
    previous = previous or Capabilities()
    return Capabilities(
        trace=await _namespace(ask, "trace_transaction"),
        debug=await _namespace(ask, "debug_traceTransaction"),
        state_depth=await _state_depth(ask, head, previous.state_depth),
        blocks_from=await _blocks_from(ask, head, previous.blocks_from),
    )


async def _namespace(ask: Ask, method: str) -> bool | None:
    try:
        await ask(method, [_ZERO_HASH])
    except NodeErrorAnswer as exc:
        fault = classify(exc.error)
        return not (fault is not None and fault.fault is Fault.METHOD_MISSING)
    except ProbeUnanswered:
        return None
    return True


async def _has_state(ask: Ask, block: int) -> bool:
    try:
        await ask("eth_getBalance", [_ZERO_ADDRESS, hex(block)])
    except NodeErrorAnswer:
        return False
    return True


async def _has_block(ask: Ask, block: int) -> bool:
    try:
        found = await ask("eth_getBlockByNumber", [hex(block), False])
    except NodeErrorAnswer:
        return False
    return isinstance(found, dict)


async def _state_depth(ask: Ask, head: int, known: int | None) -> int | None:
    try:
        if head <= 1 or await _has_state(ask, 1):
            return ARCHIVE_DEPTH
        oldest = await _oldest(lambda block: _has_state(ask, block), head, known, by_depth=True)
    except ProbeUnanswered:
        return None
    return None if oldest is None else head - oldest


async def _blocks_from(ask: Ask, head: int, known: int | None) -> int | None:
    try:
        if head <= 1 or await _has_block(ask, 1):
            return 0
        return await _oldest(lambda block: _has_block(ask, block), head, known, by_depth=False)
    except ProbeUnanswered:
        return None


async def _oldest(
    has: Callable[[int], Awaitable[bool]], head: int, known: int | None, *, by_depth: bool
) -> int | None:
    """The oldest block in [2, head] that `has` holds, given that block 1 is not held and that
    what is held is a contiguous run up to the head; None if not even the head is."""
    if known is not None and known != ARCHIVE_DEPTH:
        guess = head - known if by_depth else known
        if 2 <= guess <= head and await has(guess) and not await has(guess - 1):
            return guess  # unchanged since the last probe: two calls
    if not await has(head):
        return None
    low, high = 2, head  # the oldest held block is in [low, high]
    for _ in range(MAX_SEARCH_STEPS):
        if low >= high:
            break
        middle = (low + high) // 2
        if await has(middle):
            high = middle
        else:
            low = middle + 1
    return high
