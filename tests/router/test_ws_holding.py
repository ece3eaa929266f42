"""The holding price of WebSocket subscriptions (design notes, "Bounds"; router/ws/holding.py):
the operator's price per subscription and hour, charged pro rata for the time held, step by
step and at the end for the rest, exactly (the part below a nano-credit carried to the next
charge), as usage of its own (the kind as the method, scenario `subscription_held`, no call
counted), through the meter and the balances notifications go through. At the default price, 0,
nothing is charged."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy, Scenario
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.router.context import RequestContext
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.ws.holding import HOUR_NS, Holding
from chainrouter.router.ws.hub import Hub as RealHub
from chainrouter.router.ws.session import WsLimits, WsSession
from chainrouter.router.ws.upstream import UpstreamSocket
from tests.router.test_ws_session import CHAIN, CUSTOMER, KEY_ID, Hub, Link, _no_calls

pytestmark = pytest.mark.anyio

KINDS = ("newHeads", "logs", "newPendingTransactions")
MS = 10**6  # nanoseconds


@settings(max_examples=200, deadline=None)
@given(
    price=st.integers(0, 100 * 10**9),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["open", "close", "due"]),
            st.sampled_from(KINDS),
            st.integers(0, 10**13),
        ),
        max_size=40,
    ),
)
def test_charges_add_up_to_the_time_held_at_the_price_never_more_never_twice(
    price: int, steps: list[tuple[str, str, int]]
) -> None:
    """Whatever the steps between them, a kind's charges add up to floor(price x time held /
    1 h): the part below a nano-credit is carried, not lost, and nothing is charged twice."""
    now = 0
    holding = Holding(price, now)
    held: dict[str, int] = {}  # kind -> subscriptions open
    held_ns: dict[str, int] = {}  # kind -> subscription-nanoseconds held
    charged: dict[str, int] = {}
    for action, kind, elapsed in steps:
        for each, count in held.items():
            held_ns[each] = held_ns.get(each, 0) + count * elapsed
        now += elapsed
        if action == "open":
            holding.opened(kind, now)
            held[kind] = held.get(kind, 0) + 1
        elif action == "close" and held.get(kind):
            holding.closed(kind, now)
            held[kind] -= 1
        elif action == "due":
            for due_kind, nano in holding.due(now):
                assert nano > 0
                charged[due_kind] = charged.get(due_kind, 0) + nano
        assert holding.held == sum(held.values())
    for due_kind, nano in holding.due(now):
        charged[due_kind] = charged.get(due_kind, 0) + nano
    expected = {k: price * ns // HOUR_NS for k, ns in held_ns.items() if price * ns >= HOUR_NS}
    assert charged == expected
    assert holding.due(now) == []  # asked again at once: nothing more


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000 * 10**9

    def __call__(self) -> int:
        return self.ns


def _session(
    link: Link, hub: Hub, price: int, clock: Clock
) -> tuple[WsSession, UsageMeter, CreditView]:
    snapshot = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})
    request = RequestContext(snapshot, 0, "b1", b"", str(CHAIN), "crk_x", None, None, None)
    request.access = KeyAccess(KEY_ID, CUSTOMER, ("*",), RoutingStrategy.ECONOMY, False)
    request.chain_id = CHAIN
    credits = CreditView()
    credits.replace_stored({CUSTOMER: 10**12})
    meter = UsageMeter()
    limits = WsLimits(holding_nano_per_hour=price)
    session = WsSession(link, request, hub, _no_calls, credits, meter, limits, clock=clock)
    return session, meter, credits


async def _call(link: Link, method: str, params: list[object], answers: int) -> object:
    link.said.put_nowait(
        json.dumps({"jsonrpc": "2.0", "id": answers, "method": method, "params": params})
    )
    for _ in range(200):
        if len(link.got) >= answers:
            return link.got[answers - 1]["result"]
        await asyncio.sleep(0.01)
    raise AssertionError("no answer")


def _held_rows(meter: UsageMeter) -> dict[tuple[str, str, int], list[int]]:
    return {(k[3], k[4], k[6]): v for k, v in meter.take().rows.items()}


async def test_a_subscription_held_n_steps_costs_exactly_the_price_for_that_time() -> None:
    """7 credits an hour, charged every 1.5 s of a subscription held 4 steps and a half: each
    step's charge is the time's share, the part below a nano-credit carried to the next, and
    closing mid-step charges the rest once; the row is the kind, `subscription_held`, no call."""
    price = 7 * 10**9
    clock, link, hub = Clock(), Link(), Hub()
    session, meter, credits = _session(link, hub, price, clock)
    running = asyncio.create_task(session.run())
    await _call(link, "eth_subscribe", ["newHeads"], 1)
    charges = []
    step = 1_500 * MS
    for _ in range(4):
        clock.ns += step
        session.charge_held()  # the hub's step
        charges.append(_held_rows(meter)[("newHeads", Scenario.SUBSCRIPTION_HELD, 0)])
    # 7e9 nano an hour for 1.5 s: 2,916,666.67 nano; the thirds carried from step to step.
    assert charges == [[0, 2_916_666], [0, 2_916_667], [0, 2_916_667], [0, 2_916_666]]
    clock.ns += step // 2
    subscription = link.got[0]["result"]
    assert await _call(link, "eth_unsubscribe", [subscription], 2) is True
    # The last half step, with the two thirds carried: 1,458,333.33 + 0.67.
    assert _held_rows(meter) == {("newHeads", Scenario.SUBSCRIPTION_HELD, 0): [0, 1_458_334]}
    clock.ns += step
    session.charge_held()  # nothing is held any more
    link.said.put_nowait(None)
    await asyncio.wait_for(running, 5)
    assert _held_rows(meter) == {}
    total = price * (4 * step + step // 2) // HOUR_NS
    assert sum(c[1] for c in charges) + 1_458_334 == total == 13_125_000
    assert credits.available(CUSTOMER) == 10**12 - total


async def test_a_connection_closed_mid_step_charges_the_rest_of_each_kind_once() -> None:
    clock, link, hub = Clock(), Link(), Hub()
    session, meter, credits = _session(link, hub, 3_600_000, clock)  # 1 nano per ms held
    running = asyncio.create_task(session.run())
    await _call(link, "eth_subscribe", ["newHeads"], 1)
    await _call(link, "eth_subscribe", ["newHeads"], 2)
    clock.ns += 1_000 * MS
    session.charge_held()
    assert _held_rows(meter) == {("newHeads", Scenario.SUBSCRIPTION_HELD, 0): [0, 2_000]}
    clock.ns += 250 * MS
    link.said.put_nowait(None)  # the client goes, a quarter into the next step
    await asyncio.wait_for(running, 5)
    session.charge_held()  # a step arriving after the close: nothing more
    assert _held_rows(meter) == {("newHeads", Scenario.SUBSCRIPTION_HELD, 0): [0, 500]}
    assert credits.available(CUSTOMER) == 10**12 - 2_500


async def test_at_the_default_price_holding_a_subscription_costs_nothing() -> None:
    clock, link, hub = Clock(), Link(), Hub()
    session, meter, credits = _session(link, hub, 0, clock)
    running = asyncio.create_task(session.run())
    await _call(link, "eth_subscribe", ["newHeads"], 1)
    clock.ns += 3_600 * 10**9
    session.charge_held()
    link.said.put_nowait(None)
    await asyncio.wait_for(running, 5)
    assert _held_rows(meter) == {}
    assert credits.available(CUSTOMER) == 10**12


async def _unreachable(url: str) -> UpstreamSocket:
    raise OSError("no node in these tests")


class Held:
    """An open connection as the hub sees it, counting its holding steps."""

    checked_as = ("1", "crk_a", None)
    closing = False

    def __init__(self) -> None:
        self.steps = 0

    def recheck(self) -> RpcError | None:
        return None

    def refused(self, refusal: RpcError) -> None:
        raise AssertionError("never")

    def charge_held(self) -> None:
        self.steps += 1


async def test_the_hub_charges_every_open_connection_once_a_step() -> None:
    snapshot = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})
    hub = RealHub(lambda: snapshot, _unreachable, lambda chain: None, holding_step_s=0.05)
    connections = [Held(), Held()]
    for connection in connections:
        hub.watch(connection)
    await asyncio.sleep(0.32)
    assert all(5 <= c.steps <= 7 for c in connections), [c.steps for c in connections]
    hub.unwatch(connections[0])
    before = connections[0].steps
    await asyncio.sleep(0.12)
    assert connections[0].steps == before
    assert connections[1].steps > before
    hub.unwatch(connections[1])
    await hub.stop()


async def test_without_a_holding_price_the_hub_runs_no_holding_steps() -> None:
    snapshot = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})
    hub = RealHub(lambda: snapshot, _unreachable, lambda chain: None)
    connection = Held()
    hub.watch(connection)
    await asyncio.sleep(0.1)
    assert connection.steps == 0
    hub.unwatch(connection)
    await hub.stop()
