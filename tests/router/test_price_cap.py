"""A key's `max_price_per_call` (design notes, "Bounds"): routing never picks a route dearer
than it, for the first try, a failover or a hedge; a call no route serves within it is refused
(HTTP 422, -32013 naming the cap), reaches no node and is never billed. Told with the scripted
executor; the field itself through the management API in tests/api/test_api_keys.py."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.enums import RoutingStrategy
from chainrouter.router.contract import FailureKind
from chainrouter.testing.scripted import answering, failing
from tests.router.scripted_world import rpc, scripted_world

CHEAP, DEAR = "http://cheap", "http://dear"


def test_a_call_no_route_serves_within_the_cap_is_refused_and_reaches_no_node() -> None:
    world = scripted_world([(CHEAP, 300, answering("0x1"))], max_price_nano=200)
    balance = world.balance()
    reply = world.call(rpc(request_id=5))
    assert reply.status == 422
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32013
    assert error["data"] == {"max_price_per_call": "0.0000002"}
    assert "0.0000003" in error["message"]
    assert world.urls_called() == []
    assert world.balance() == balance
    assert world.metered() == {"refused": (1, 0)}


def test_a_failover_never_goes_to_a_route_above_the_cap() -> None:
    world = scripted_world(
        [(CHEAP, 100, failing(FailureKind.TIMEOUT)), (DEAR, 300, answering("0x1"))],
        max_price_nano=200,
    )
    reply = world.call(rpc())
    assert reply.status == 504
    assert world.urls_called() == [CHEAP]
    assert world.metered() == {"all_failed": (1, 0)}


def test_a_fast_dear_route_is_passed_over_for_one_within_the_cap() -> None:
    world = scripted_world(
        [(DEAR, 300, answering("0x1")), (CHEAP, 100, answering("0x2"))],
        strategy=RoutingStrategy.PERFORMANCE,
        max_price_nano=100,
    )
    assert json.loads(world.call(rpc()).body)["result"] == "0x2"
    assert world.urls_called() == [CHEAP]
    assert world.metered() == {"first_choice": (1, 100)}


def test_without_a_cap_the_dear_route_is_a_failover_as_before() -> None:
    world = scripted_world(
        [(CHEAP, 100, failing(FailureKind.TIMEOUT)), (DEAR, 300, answering("0x1"))]
    )
    assert json.loads(world.call(rpc()).body)["result"] == "0x1"
    assert world.urls_called() == [CHEAP, DEAR]


@settings(max_examples=40, deadline=None)
@given(
    prices=st.lists(st.integers(0, 1000), min_size=1, max_size=4),
    cap=st.integers(1, 1000),
)
def test_no_call_ever_costs_more_than_the_cap(prices: list[int], cap: int) -> None:
    """Whatever the routes' prices and however many of them fail, a billed call costs at most
    the cap, and a call is refused only when every route costs more."""
    nodes: list[tuple[str, int, Any]] = [
        (f"http://n{i}", price, failing(FailureKind.TRANSPORT) if i % 2 else answering("0x1"))
        for i, price in enumerate(prices)
    ]
    world = scripted_world(nodes, max_price_nano=cap)
    reply = world.call(rpc())
    billed = world.metered()
    assert all(cost <= cap * calls for calls, cost in billed.values())
    refused = reply.status == 422
    assert refused == all(price > cap for price in prices)
