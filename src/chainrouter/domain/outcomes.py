"""What each usage scenario means to the customer who made the call: served, failed or refused
by a limit, and the JSON-RPC error the caller got (docs/router.md#usage).

The router writes usage per hour and scenario, never per call: a failed call is known by its
scenario, and the error it got is the scenario's. Reports and the dashboard read the meaning
here, so an error rate and the list of failed calls agree with the router's own table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from chainrouter.domain.enums import Scenario


class Outcome(StrEnum):
    SERVED = "served"  # the caller got an answer
    FAILED = "failed"  # the caller got an error: no node could, or would, answer
    LIMITED = "limited"  # the caller was refused by a limit: rates, cooldowns or credits


@dataclass(frozen=True, slots=True)
class Meaning:
    outcome: Outcome
    error_codes: tuple[int, ...]  # the JSON-RPC codes the caller got; none when served
    error: str | None  # what happened, for people; None when served


_SERVED = Meaning(Outcome.SERVED, (), None)

MEANINGS: dict[Scenario, Meaning] = {
    Scenario.FIRST_CHOICE: _SERVED,
    Scenario.FAILOVER: _SERVED,
    Scenario.HEDGED: _SERVED,
    Scenario.SPLIT: _SERVED,
    Scenario.CACHE: _SERVED,
    Scenario.SUBSCRIPTION: _SERVED,
    Scenario.SUBSCRIPTION_HELD: _SERVED,
    Scenario.NO_ROUTE: Meaning(
        Outcome.FAILED, (-32008,), "no node of the chain was in sync, or every plan was used up"
    ),
    Scenario.ALL_FAILED: Meaning(Outcome.FAILED, (-32009,), "every node tried failed or timed out"),
    Scenario.UNSUPPORTED_METHOD: Meaning(
        Outcome.FAILED, (-32002,), "no plan serves this method on this chain"
    ),
    Scenario.REFUSED: Meaning(
        Outcome.FAILED, (-32005,), "a router rule refused the call (such as the eth_getLogs range)"
    ),
    Scenario.REJECTED: Meaning(
        Outcome.FAILED,
        (-32700, -32600, -32602),
        "a node answered that the request is invalid (not billed)",
    ),
    Scenario.INCAPABLE: Meaning(
        Outcome.FAILED,
        (-32007, -32011, -32012, -32013, -32005),
        "no node can serve what the call needs (block, state depth or tracing; not billed)",
    ),
    # The caller got a result, no error: one a later audit (or proof) caught, refunded.
    Scenario.DISPUTED: _SERVED,
    # Not a call of the caller's but one its call's check made: a node answered it.
    Scenario.VERIFICATION: _SERVED,
    Scenario.RATE_LIMITED: Meaning(
        Outcome.LIMITED, (-32003,), "every node was rate limited or cooling down"
    ),
    Scenario.INSUFFICIENT_CREDITS: Meaning(
        Outcome.LIMITED, (-32601,), "the balance could not pay for the call"
    ),
}

_UNKNOWN = Meaning(Outcome.FAILED, (), "an outcome this version does not know")


def meaning(scenario: str) -> Meaning:
    """The meaning of a stored scenario name; one written by a newer router counts as failed."""
    try:
        return MEANINGS[Scenario(scenario)]
    except ValueError:
        return _UNKNOWN


def unserved() -> tuple[str, ...]:
    """The scenario names whose calls were not served: failed or limited."""
    return tuple(s.value for s, m in MEANINGS.items() if m.outcome is not Outcome.SERVED)
