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
