"""The pipeline as data (router/stages): the order of the stages, and how the runner ends a
request or a call. Told with scripted nodes, no socket (testing/scripted.py)."""

from __future__ import annotations

import json

import pytest

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode
from chainrouter.router.audits import AuditSettings
from chainrouter.router.context import CallContext
from chainrouter.router.contract import FailureKind, Forward
from chainrouter.testing.scripted import answering, failing
from tests.router.scripted_world import CUSTOMER, rpc, scripted_world

A, B = "http://a.node", "http://b.node"
OK = answering("0x1")


def test_the_keyed_and_free_tier_pipelines_run_their_stages_in_this_order() -> None:
    service = scripted_world([(A, 1, OK)]).service

    def names(stages: tuple[object, ...]) -> list[str]:
        return [type(stage).__name__ for stage in stages]

    assert names(service.keyed.request_stages) == [
        "JsonContentType",
        "BodyWithinLimit",
        "ApiKey",
        "AllowedDomain",
        "SupportedChain",
        "ParsePayload",
        "KeyRateLimit",
    ]
    assert names(service.public.request_stages) == [
        "FreeTierOpen",
        "JsonContentType",
        "SupportedChain",
        "BodyWithinLimit",
        "ParsePayload",
        "FreeTierRoom",
    ]
    assert service.keyed.call_stages is service.public.call_stages or names(
        service.keyed.call_stages
    ) == names(service.public.call_stages)
    assert names(service.keyed.call_stages) == [
        "SignedTransactions",
        "MethodPriced",
        "CallNeeds",
        "LogsRange",
        "PlanRoutes",
        "WithinPriceCap",
        "CapableRoutes",
        "HasTheBlock",
        "NotBehindSeen",
        "Verify",
        "CreditHold",
        "Attempt",
    ]
    assert names(service.keyed.answered_stages) == ["AnswerWithinBound"]
    assert names(service.public.answered_stages) == ["FreeTierAnswerBytes", "AnswerWithinBound"]
    assert names(service.keyed.closing_stages) == ["Book"]
    assert names(service.public.closing_stages) == ["CountFreeCall"]
    # With audits on, every call closes through their sampling too, once booked.
    audited = scripted_world([(A, 1, OK)], audits=AuditSettings()).service
    assert names(audited.keyed.closing_stages) == ["Book", "Audit"]
    assert names(audited.public.closing_stages) == ["CountFreeCall", "Audit"]


def test_an_unauthenticated_request_is_refused_before_its_body_is_parsed() -> None:
    world = scripted_world([(A, 1, OK)])
    reply = world.call(b"{ not json", key="crk_nobody")
    assert reply.status == 401
    assert world.urls_called() == []


def test_a_credit_run_out_mid_batch_refuses_the_calls_it_cannot_pay_for() -> None:
    world = scripted_world([(A, 100, OK)], balance_nano=250)
    reply = world.call([rpc(request_id=i) for i in range(3)])
    answers = json.loads(reply.body)
    assert reply.status == 200  # some calls were answered
    assert [a.get("result") for a in answers[:2]] == ["0x1", "0x1"]
    assert answers[2]["error"]["code"] == RpcCode.INSUFFICIENT_CREDITS
    assert world.urls_called() == [A, A]
    assert world.metered() == {
        Scenario.FIRST_CHOICE: (2, 200),
        Scenario.INSUFFICIENT_CREDITS: (1, 0),
    }
    assert world.balance() == 50


def test_calls_of_a_batch_are_in_flight_together() -> None:
    world = scripted_world([(A, 100, OK)])
    world.call([rpc(request_id=i) for i in range(3)])
    # Each item is its own call, sent as a request of its own, all before any answer came back.
    assert [json.loads(f.body)["id"] for f in world.executor.forwarded] == [0, 1, 2]


def test_a_single_call_reaches_its_node_byte_for_byte() -> None:
    world = scripted_world([(A, 100, OK)])
    body = b'{ "id" : 7 , "jsonrpc":"2.0","method":"eth_blockNumber"}'
    world.call(body)
    assert world.executor.forwarded == [Forward(A, body, 10.0)]


def test_every_call_is_metered_once_whatever_ends_it() -> None:
    world = scripted_world([(A, 100, failing(FailureKind.HTTP_STATUS, 502))], balance_nano=150)
    world.call(
        [
            rpc(request_id=1),  # A fails: all_failed
            rpc("eth_unknown", request_id=2),  # unsupported_method
            {"jsonrpc": "2.0", "id": 3},  # invalid: answered before any stage, not metered
        ]
    )
    world.call(rpc(request_id=4))  # A cools down: rate_limited
    assert world.metered() == {
        Scenario.ALL_FAILED: (1, 0),
        Scenario.UNSUPPORTED_METHOD: (1, 0),
        Scenario.RATE_LIMITED: (1, 0),
    }
    assert world.balance() == 150


class _Exploding:
    def run(self, call: CallContext) -> None:
        raise RuntimeError("a bug in a stage")


def test_a_stage_that_fails_still_releases_the_credits_held_and_meters_nothing() -> None:
    world = scripted_world([(A, 100, OK)], balance_nano=1000)
    keyed = world.service.keyed
    stages = keyed.call_stages
    keyed.call_stages = (*stages[:-1], _Exploding())
    with pytest.raises(RuntimeError, match="a bug in a stage"):
        world.call(rpc())
    assert world.deps.credits.available(CUSTOMER) == 1000
    assert world.metered() == {}


def test_the_free_tier_takes_from_the_ips_budget_and_bills_nobody() -> None:
    world = scripted_world([(A, 100, OK)])  # the free tier here allows 100 calls a minute
    replies = [world.public([rpc(request_id=i) for i in range(50)]) for _ in range(2)]
    assert [reply.status for reply in replies] == [200, 200]
    refused = world.public(rpc())
    assert refused.status == 429
    assert json.loads(refused.body)["error"]["code"] == RpcCode.PUBLIC_RATE_LIMITED
    assert world.public(rpc(), ip="198.51.100.2").status == 200
    assert world.metered() == {}
    assert world.balance() == 10**9


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
     "multipart/form-data; boundary=x", "application/jsonx"],
)  # fmt: skip
def test_a_body_not_declared_as_json_is_refused_before_anything_else(
    content_type: str | None,
) -> None:
    """What a page on another site can make a browser send without a preflight (security.md)."""
    world = scripted_world([(A, 1, OK)])
    body = json.dumps(rpc()).encode()
    for program in (
        world.service.handle_keyed("1", world.key, body, content_type=content_type),
        world.service.handle_public("1", "198.51.100.1", body, content_type),
    ):
        reply = world.executor.run(program)
        assert reply.status == 415
        assert json.loads(reply.body)["error"]["code"] == RpcCode.INVALID_REQUEST
    assert world.urls_called() == []


@pytest.mark.parametrize(
    "content_type", ["application/json", "Application/JSON", "application/json; charset=utf-8"]
)
def test_json_is_served_in_any_case_and_with_parameters(content_type: str) -> None:
    world = scripted_world([(A, 1, OK)])
    body = json.dumps(rpc()).encode()
    program = world.service.handle_keyed("1", world.key, body, content_type=content_type)
    assert world.executor.run(program).status == 200
