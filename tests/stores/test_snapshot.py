"""The router snapshot holds what the operator configured: active keys, healthy routes, prices,
balances, and the configuration version it was read at."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, Engine

from chainrouter.domain.credentials import hash_secret
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import parse_yaml, validate_document
from chainrouter.router.sync import load_snapshot
from chainrouter.stores.sql import snapshot as snapshot_module
from chainrouter.stores.sql.snapshot import load_router_snapshot

KEY = "crk_" + "k" * 40
OFF_KEY = "crk_" + "o" * 40
FILE = f"""
chains:
  - {{chain_id: 31337, name: Local, short_name: local, native_currency: {{name: E, symbol: E}}}}
providers:
  - slug: cheap
    name: Cheap
    plans:
      - name: basic
        rate_limit_req: 50
        rate_limit_req_interval_sec: 1
        methods:
          - {{method: eth_blockNumber, cost: "0.0000002"}}
          - {{method: eth_blockNumber, cost: "0.0000001", chain_id: 31337}}
        nodes:
          - {{url: "http://127.0.0.1:1/a", chain_id: 31337, rate_limit: 10}}
          - {{url: "http://127.0.0.1:1/off", chain_id: 31337, status: disabled by provider}}
customers:
  - email: c@example.com
    name: C
    credits: [{{reference: r, amount: 3}}]
    api_keys:
      - name: live
        secret: {KEY}
        allowed_domains: ["*.example.com"]
        routing_strategy: performance
      - {{name: off, secret: {OFF_KEY}, allowed_domains: ["*"], active: false}}
"""


def _snapshot(engine: Engine) -> RouterSnapshot:
    with engine.begin() as connection:
        return load_router_snapshot(connection)


def test_the_snapshot_reflects_the_applied_configuration(engine: Engine) -> None:
    apply_config(engine, validate_document(parse_yaml(FILE)))
    snapshot = _snapshot(engine)
    assert snapshot.version == 1
    access = snapshot.keys_by_hash[hash_secret(KEY)]
    assert access.allowed_domains == ("*.example.com",)
    assert access.strategy is RoutingStrategy.PERFORMANCE
    assert access.bypass_credit_check is False
    assert hash_secret(OFF_KEY) not in snapshot.keys_by_hash
    assert snapshot.balances_nano[access.customer_id] == 3 * 10**9
    [route] = snapshot.routes.routes(31337, "eth_blockNumber")
    assert route.node.url == "http://127.0.0.1:1/a"
    assert route.cost_nano == 100
    assert route.node.rate_limit == 10
    assert route.plan.requests == 50


def test_a_deactivated_key_leaves_the_next_snapshot(engine: Engine) -> None:
    apply_config(engine, validate_document(parse_yaml(FILE)))
    apply_config(
        engine,
        validate_document(
            parse_yaml(FILE.replace("routing_strategy: performance", "active: false"))
        ),
    )
    snapshot = _snapshot(engine)
    assert snapshot.version == 2
    assert hash_secret(KEY) not in snapshot.keys_by_hash


WS_FILE = """
chains:
  - {chain_id: 31337, name: Local, short_name: local, native_currency: {name: E, symbol: E}}
  - {chain_id: 31338, name: Other, short_name: other, native_currency: {name: E, symbol: E}}
providers:
  - slug: dear
    name: Dear
    plans:
      - name: ws
        methods:
          - {method: newHeads, node_target_type: ws, cost: "0.000002"}
          - {method: logs, node_target_type: ws, cost: "0.000003"}
        ws_nodes:
          - {url: "ws://127.0.0.1:1/dear", chain_id: 31337}
  - slug: cheap
    name: Cheap
    plans:
      - name: ws
        methods:
          - {method: newHeads, node_target_type: ws, cost: "0.000005"}
          - {method: newHeads, node_target_type: ws, cost: "0.000001", chain_id: 31337}
        ws_nodes:
          - {url: "ws://127.0.0.1:1/cheap", chain_id: 31337}
          - {url: "ws://127.0.0.1:1/cheap-b", chain_id: 31338}
          - {url: "ws://127.0.0.1:1/off", chain_id: 31338, status: disabled by provider}
  - slug: unpriced
    name: Unpriced
    plans:
      - name: ws
        methods: [{method: eth_call, cost: "0.1"}]
        ws_nodes: [{url: "ws://127.0.0.1:1/unpriced", chain_id: 31337}]
"""


def test_websocket_routes_carry_their_notification_prices_cheapest_heads_first(
    engine: Engine,
) -> None:
    apply_config(engine, validate_document(parse_yaml(WS_FILE)))
    table = _snapshot(engine).ws_routes
    local = table.routes(31337)
    assert [r.url.rsplit("/", 1)[1] for r in local] == ["cheap", "dear"]  # unpriced: no route
    assert dict(local[0].prices) == {"newHeads": 1_000}  # the chain's own row wins
    assert dict(local[1].prices) == {"newHeads": 2_000, "logs": 3_000}
    other = table.routes(31338)
    assert [(r.url.rsplit("/", 1)[1], dict(r.prices)) for r in other] == [
        ("cheap-b", {"newHeads": 5_000})  # the all-chains row; the disabled node is out
    ]
    assert table.serves(31337, "logs")
    assert not table.serves(31338, "logs")


def test_every_part_of_a_routers_snapshot_is_read_at_one_moment(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change committed while a router reads its snapshot shows in no part of it, or in all:
    read statement by statement (READ COMMITTED), the routes read last carried a node the
    version read first did not (and balances could disagree with keys)."""
    apply_config(engine, validate_document(parse_yaml(FILE)))
    load_route_table = snapshot_module.load_route_table

    def a_change_lands_meanwhile(connection: Connection) -> RouteTable:
        enabled = FILE.replace("status: disabled by provider", "status: healthy")
        apply_config(engine, validate_document(parse_yaml(enabled)))  # its own transaction
        return load_route_table(connection)

    monkeypatch.setattr(snapshot_module, "load_route_table", a_change_lands_meanwhile)
    snapshot = load_snapshot(engine)
    assert snapshot.version == 1
    assert [r.node.url for r in snapshot.routes.routes(31337, "eth_blockNumber")] == [
        "http://127.0.0.1:1/a"
    ]
    monkeypatch.setattr(snapshot_module, "load_route_table", load_route_table)
    later = load_snapshot(engine)
    assert later.version == 2
    assert len(later.routes.routes(31337, "eth_blockNumber")) == 2
