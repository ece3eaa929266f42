"""Closed sets of values the spec names; storage keeps their string values."""

from __future__ import annotations

from enum import StrEnum


class RoutingStrategy(StrEnum):
    ECONOMY = "economy"  # cheapest eligible route first
    PERFORMANCE = "performance"  # fastest in-sync route first


class Role(StrEnum):
    CUSTOMER = "customer"
    AGENT = "agent"  # skips per-IP limits of public submissions
    ADMINISTRATOR = "administrator"  # reaches the admin routes


class NodeStatus(StrEnum):
    """Node states a provider (or operator) sets. `provider-deleted` hides the node everywhere."""

    HEALTHY = "healthy"
    DISABLED_BY_PROVIDER = "disabled by provider"
    PROVIDER_DELETED = "provider-deleted"
    # Outvoted by an audit or failed a proof: no traffic until an administrator or its provider
    # lifts it (router/cordon.py).
    CORDONED = "cordoned"


class NodeSource(StrEnum):
    PROVIDER = "provider"
    WEBSITE = "website"
    ERPC = "erpc"
    NODE_REQUEST = "node_request"
    NEW_CHAIN_REQUEST = "new_chain_request"


class LedgerEntryKind(StrEnum):
    PURCHASE = "purchase"
    GRANT = "grant"
    USAGE = "usage"  # negative: credits consumed by RPC calls
    ADJUSTMENT = "adjustment"


class SubmissionStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ChainStatus(StrEnum):
    """Lifecycle of a chain in the ethereum-lists registry."""

    ACTIVE = "active"
    INCUBATING = "incubating"
    DEPRECATED = "deprecated"


SUPPORTED_VMS = frozenset({"evm"})


class Scenario(StrEnum):
    """The routing outcome of one metered call, as usage reports group it."""

    FIRST_CHOICE = "first_choice"  # served by the strategy's first route
    FAILOVER = "failover"  # served by a later route after the earlier ones failed or were skipped
    HEDGED = "hedged"  # served by a route tried beside a slow one, which was then cancelled
    NO_ROUTE = "no_route"  # no eligible route (all out of sync); -32008
    ALL_FAILED = "all_failed"  # every route tried failed or timed out; -32009
    RATE_LIMITED = "rate_limited"  # every route rate limited or cooling down; -32003
    # Refused by the credit check (before routing, or before a dearer route); -32601.
    INSUFFICIENT_CREDITS = "insufficient_credits"
    UNSUPPORTED_METHOD = "unsupported_method"  # no plan prices the method on the chain; -32002
    REFUSED = "refused"  # a router rule refused the call, e.g. the eth_getLogs range; -32005
    REJECTED = "rejected"  # a node answered that the request is invalid (-32600 ...); unbilled
    INCAPABLE = "incapable"  # no node can serve what the call needs (-32007/11/12/13, -32005)
    SPLIT = "split"  # an eth_getLogs range served in parts by nodes with narrower limits
    CACHE = "cache"  # answered from the response cache, or by an identical call in flight
    # Answered by a node later outvoted by an audit (or a failed proof) before a clean audit:
    # refunded, not paid to its provider (router/cordon.py).
    DISPUTED = "disputed"
    # A call a verified answer's check made (a proof, a header, a block's receipts, another
    # provider's answer): billed to the customer whose call caused it, at the answering plan's
    # price for that method (router/proving.py; docs/integrity.md).
    VERIFICATION = "verification"
    SUBSCRIPTION = (
        "subscription"  # a notification sent to a WebSocket subscriber (method: its kind)
    )
    # The time WebSocket subscriptions were held open, at the operator's holding price (method:
    # their kind; no call counted, only credits: router/ws/session.py).
    SUBSCRIPTION_HELD = "subscription_held"
