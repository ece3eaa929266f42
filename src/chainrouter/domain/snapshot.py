"""Everything a router serves from memory, loaded at once and replaced whole when it changes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.ws_routes import WsRouteTable


@dataclass(frozen=True, slots=True)
class RouterSnapshot:
    version: int  # the configuration version it was loaded at
    keys_by_hash: Mapping[str, KeyAccess]  # active keys only, by SHA-256 hex digest
    routes: RouteTable
    balances_nano: Mapping[int, int]  # customer id -> balance when loaded
    ws_routes: WsRouteTable = field(default_factory=WsRouteTable)  # WebSocket nodes, priced
    # chain id -> times an administrator purged its cached answers (part of every cache key)
    cache_generations: Mapping[int, int] = field(default_factory=dict)
    # Nodes cordoned in storage (router/cordon.py): each router disputes what it served of them.
    cordoned: frozenset[int] = frozenset()
    # When a price set with notice next applies: the routers load the configuration again then.
    next_price_at: datetime | None = None
