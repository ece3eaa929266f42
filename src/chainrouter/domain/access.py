"""What a router knows about an API key: enough to admit, route and bill a request."""

from __future__ import annotations

from dataclasses import dataclass

from chainrouter.domain.enums import RoutingStrategy


@dataclass(frozen=True, slots=True)
class KeyAccess:
    key_id: int
    customer_id: int
    allowed_domains: tuple[str, ...]
    strategy: RoutingStrategy
    bypass_credit_check: bool
    rate_limit: int = 0  # calls per `rate_limit_interval_s`, the key's own limit; 0: none
    rate_limit_interval_s: int = 1
    verified: bool = False  # asks that every provable answer be proven (docs/integrity.md)
    max_price_nano: int = 0  # the most one call may cost; 0: no cap
