"""Mandatory EVM screening of an HTTP(S) JSON-RPC node, through the outbound guard.

Three checks, in order, each a JSON-RPC call; the first failure ends the screening:
1. `eth_chainId` answers a quantity, equal to the expected chain when one is given;
2. `eth_blockNumber` answers a quantity, within `max_lag` blocks of the chain head when one is
   known (a node far behind would only be taken out of routing again);
3. `eth_getBlockByNumber("latest", false)` returns a block with a number and a hash;
4. its capabilities are probed (screening/probes.py): tracing, the debug namespace, state depth
   and block history. What the provider declared must hold: a node declared archive must have
   old state, one declared to trace must trace; a capability found but not declared is kept.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from chainrouter.domain.capabilities import Capabilities
from chainrouter.screening.guard import GuardedSession, OutboundError, OutboundGuard
from chainrouter.screening.probes import (
    Ask,
    NodeErrorAnswer,
    ProbeUnanswered,
    call_body,
    probe_capabilities,
    read_answer,
)

_MAX_QUANTITY = 2**63 - 1
# The capability probes' whole time at registration: a slow node must not hold the API call for
# each of their (up to about 80) calls' time-outs. What is not found then, routers find later.
PROBE_BUDGET_S = 15.0
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"check": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(slots=True)
class Screening:
    url: str
    checks: list[Check] = field(default_factory=list)
    chain_id: int | None = None
    block_number: int | None = None
    capabilities: Capabilities | None = None  # what the probes found

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failure(self) -> str | None:
        """`check: why` of the first failed check."""
        failed = next((c for c in self.checks if not c.passed), None)
        return None if failed is None else f"{failed.name}: {failed.detail}"

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "passed": self.passed,
            "chain_id": None if self.chain_id is None else str(self.chain_id),
            "checks": [check.as_dict() for check in self.checks],
        }


class _CheckFailedError(Exception):
    pass


def _quantity(value: Any, what: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) > 66:
        raise _CheckFailedError(f"{what} is not a hex quantity: {str(value)[:80]!r}")
    try:
        number = int(value, 16)
    except ValueError:
        raise _CheckFailedError(f"{what} is not a hex quantity: {value[:80]!r}") from None
    if number > _MAX_QUANTITY:
        raise _CheckFailedError(f"{what} is implausibly large: {value[:80]}")
    return number


async def _call(
    session: GuardedSession, url: URL, method: str, params: list[Any], *, keep_errors: bool = False
) -> Any:
    """The call's result; a JSON-RPC error fails the check, or with `keep_errors` is raised as
    the node's answer (`NodeErrorAnswer`)."""
    call_id = next(_ids)
    try:
        raw = await session.post_json(url, call_body(call_id, method, params))
        return read_answer(raw, call_id)
    except (OutboundError, ProbeUnanswered) as exc:
        raise _CheckFailedError(str(exc)) from None
    except NodeErrorAnswer as exc:
        if keep_errors:
            raise
        error = exc.error
        message = error.get("message") if isinstance(error, dict) else error
        raise _CheckFailedError(f"the node answered an error: {str(message)[:200]}") from None


async def screen_http_node(
    guard: OutboundGuard,
    url: str,
    *,
    schemes: frozenset[str],
    expected_chain_id: int | None = None,
    chain_head: int | None = None,
    max_lag: int = 100,
    declared: Capabilities | None = None,
    probe: bool = True,
) -> Screening:
    """Screen the node at `url`; with `probe`, find its capabilities too (step 4). Public
    submissions skip step 4: an anonymous request must not buy 15 s of probing, and the node,
    once approved, is probed by the routers."""
    screening = Screening(url)
    try:
        parsed = guard.check_url(url, schemes)
    except OutboundError as exc:
        screening.checks.append(Check("url", False, str(exc)))
        return screening
    async with guard.session() as session:
        for name, run in (
            ("eth_chainId", _check_chain_id),
            ("eth_blockNumber", _check_block_number),
            ("eth_getBlockByNumber", _check_latest_block),
        ):
            try:
                detail = await run(
                    session, parsed, screening, expected_chain_id, chain_head, max_lag
                )
            except _CheckFailedError as exc:
                screening.checks.append(Check(name, False, str(exc)))
                return screening
            screening.checks.append(Check(name, True, detail))
        assert screening.block_number is not None
        if not probe:
            return screening
        try:
            async with asyncio.timeout(PROBE_BUDGET_S):
                found = await probe_capabilities(_ask(session, parsed), screening.block_number)
        except TimeoutError:
            detail = f"not probed within {PROBE_BUDGET_S:g} s; routers' probes will find them"
            screening.checks.append(Check("capabilities", True, detail))
            return screening
        screening.capabilities = found
        problem = contradiction(declared or Capabilities(), found)
        screening.checks.append(Check("capabilities", problem is None, problem or describe(found)))
    return screening


def _ask(session: GuardedSession, url: URL) -> Ask:
    async def ask(method: str, params: list[Any]) -> Any:
        try:
            return await _call(session, url, method, params, keep_errors=True)
        except _CheckFailedError as exc:
            raise ProbeUnanswered(str(exc)) from None

    return ask


def contradiction(declared: Capabilities, found: Capabilities) -> str | None:
    """What the provider declared that the probes found untrue, if anything."""
    if declared.trace and found.trace is False:
        return "declared to serve trace_*, but trace_transaction is not available"
    if declared.debug and found.debug is False:
        return "declared to serve debug_*, but debug_traceTransaction is not available"
    declared_depth, found_depth = declared.state_depth, found.state_depth
    # The head moves while the probe searches: a depth a block or two short still holds.
    if declared_depth and found_depth is not None and declared_depth > found_depth + 2:
        kept = "all state" if declared.archive else f"{declared_depth} blocks of state"
        return f"declared to keep {kept}, but keeps {found_depth} blocks of state"
    if declared.blocks_from is not None and found.blocks_from is not None:  # noqa: SIM102
        if declared.blocks_from < found.blocks_from:
            return (
                f"declared to serve blocks from block {declared.blocks_from}, but the oldest "
                f"it serves is block {found.blocks_from}"
            )
    return None


def describe(found: Capabilities) -> str:
    state = "unknown"
    if found.archive:
        state = "archive"
    elif found.state_depth is not None:
        state = f"{found.state_depth} blocks"
    blocks = "unknown" if found.blocks_from is None else f"block {found.blocks_from}"
    return (
        f"state: {state}; blocks from: {blocks}; trace: {_yes_no(found.trace)}; "
        f"debug: {_yes_no(found.debug)}"
    )


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "no"


async def _check_chain_id(
    session: GuardedSession,
    url: URL,
    screening: Screening,
    expected: int | None,
    _head: int | None,
    _lag: int,
) -> str:
    chain_id = _quantity(await _call(session, url, "eth_chainId", []), "the chain ID")
    screening.chain_id = chain_id
    if expected is not None and chain_id != expected:
        raise _CheckFailedError(f"the node serves chain {chain_id}, not chain {expected}")
    return f"chain {chain_id}"


async def _check_block_number(
    session: GuardedSession,
    url: URL,
    screening: Screening,
    _expected: int | None,
    head: int | None,
    max_lag: int,
) -> str:
    number = _quantity(await _call(session, url, "eth_blockNumber", []), "the block number")
    screening.block_number = number
    if head is not None and number < head - max_lag:
        raise _CheckFailedError(
            f"block {number} is {head - number} blocks behind the chain head {head}"
        )
    return f"block {number}"


async def _check_latest_block(
    session: GuardedSession,
    url: URL,
    _screening: Screening,
    _expected: int | None,
    _head: int | None,
    _lag: int,
) -> str:
    block = await _call(session, url, "eth_getBlockByNumber", ["latest", False])
    if not isinstance(block, dict):
        raise _CheckFailedError("the latest block could not be read")
    number = _quantity(block.get("number"), "the latest block's number")
    block_hash = block.get("hash")
    if not isinstance(block_hash, str) or len(block_hash) != 66 or not block_hash.startswith("0x"):
        raise _CheckFailedError("the latest block has no valid hash")
    return f"latest block {number}"
