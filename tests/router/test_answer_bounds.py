"""Bounds on answers (design notes, "Bounds"; docs/security.md): one request's answers take at
most `max_answer_bytes`, and an answer that would take them past it gets an error of its own
(-32014, the bound in `data`), unbilled, while a batch's other items keep theirs; the free tier
gives one IP at most `free_tier_ip_answer_bytes` of answers per interval beside its calls
(-32029). Told with the scripted executor; served on both executors in
test_answer_bounds_served.py."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.router.contract import Forward
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

BALANCE = "eth_getBalance"
PRICE = 1000


def _sized(command: Forward) -> bytes:
    """A node whose answer to each call holds as many digits as the call's address says."""

    def one(call: dict[str, Any]) -> dict[str, Any]:
        digits = int(call["params"][0], 16)
        return {"jsonrpc": "2.0", "id": call["id"], "result": "0x" + "f" * digits}

    request = json.loads(command.body)
    answer = [one(call) for call in request] if isinstance(request, list) else one(request)
    return json.dumps(answer, separators=(",", ":")).encode()


def _call(digits: int, call_id: int = 1) -> dict[str, Any]:
    return rpc(BALANCE, [f"0x{digits:040x}", "latest"], call_id)


def _answer_bytes(digits: int, call_id: int = 1) -> int:
    """The bytes of the node's answer to `_call(digits, call_id)`."""
    return len(b'{"jsonrpc":"2.0","id":,"result":"0x"}') + len(str(call_id)) + digits


def _world(**options: Any) -> ScriptedWorld:
    return scripted_world([("http://a", PRICE, _sized)], methods=(BALANCE,), **options)


def test_an_answer_past_the_bound_is_an_error_with_the_bound_in_data_and_costs_nothing() -> None:
    world = _world(max_answer_bytes=1000)
    balance = world.balance()
    reply = world.call(_call(2000, 7))
    assert reply.status == 200
    answer = json.loads(reply.body)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32014
    assert answer["error"]["data"] == {"max_answer_bytes": 1000}
    assert world.balance() == balance
    assert world.metered() == {"refused": (1, 0)}


def test_an_answer_at_the_bound_is_served() -> None:
    world = _world(max_answer_bytes=_answer_bytes(900))
    reply = world.call(_call(900))
    assert json.loads(reply.body)["result"] == "0x" + "f" * 900
    assert world.metered() == {"first_choice": (1, PRICE)}


def test_a_batch_past_the_bound_keeps_the_answers_that_fit_and_only_they_are_billed() -> None:
    world = _world(max_answer_bytes=1000)
    reply = world.call([_call(400, i) for i in range(1, 5)])
    assert reply.status == 200
    items = json.loads(reply.body)
    assert [item["id"] for item in items] == [1, 2, 3, 4]
    assert ["result" in item for item in items] == [True, True, False, False]
    assert {item["error"]["code"] for item in items[2:]} == {-32014}
    assert world.metered() == {"first_choice": (2, 2 * PRICE), "refused": (2, 0)}


@settings(max_examples=40, deadline=None)
@given(
    digits=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=12),
    bound=st.integers(min_value=1, max_value=12000),
)
def test_no_request_is_answered_past_its_bound_and_only_answers_that_would_pass_it_are_withheld(
    digits: list[int], bound: int
) -> None:
    world = _world(max_answer_bytes=bound)
    reply = world.call([_call(n, i) for i, n in enumerate(digits)])
    items = json.loads(reply.body)
    answered = sum(_answer_bytes(n, i) for i, n in enumerate(digits) if "result" in items[i])
    assert answered <= bound
    for i, n in enumerate(digits):
        if "error" in items[i]:
            assert items[i]["error"]["data"] == {"max_answer_bytes": bound}
            assert answered + _answer_bytes(n, i) > bound


def test_no_bound_when_it_is_zero() -> None:
    world = _world(max_answer_bytes=0)
    assert "result" in json.loads(world.call(_call(5000)).body)


def test_the_free_tier_gives_one_ip_its_answer_bytes_per_interval_and_then_429() -> None:
    world = _world(free_answer_bytes=1000)
    served = [world.public(_call(400, i), ip="203.0.113.5") for i in range(3)]
    assert [reply.status for reply in served] == [200, 200, 429]
    error = json.loads(served[2].body)["error"]
    assert error["code"] == -32029
    assert error["data"] == {"ip_answer_bytes": 1000}
    assert 60 <= int(dict(served[2].headers)["retry-after"]) <= 66
    # Another address has its own budget; a small answer still fits this one's.
    assert world.public(_call(400), ip="198.51.100.9").status == 200
    assert world.public(_call(50), ip="203.0.113.5").status == 200
    # Its minute over, the address is served again.
    world.clock.now += 67
    assert world.public(_call(400), ip="203.0.113.5").status == 200


def test_a_free_tier_answer_larger_than_the_whole_budget_is_never_served() -> None:
    world = _world(free_answer_bytes=1000)
    reply = world.public(_call(2000), ip="203.0.113.6")
    assert reply.status == 429
    assert json.loads(reply.body)["error"]["code"] == -32029
