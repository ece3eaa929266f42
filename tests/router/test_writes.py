"""Writes that land (design notes, "Integrity"; router/writes.py, router/stages/write.py and the
attempt stage): a signed raw transaction goes to nodes of two providers at once; the first to
accept it answers with its hash, computed by the router from the bytes; "already known" is an
acceptance; a refusal for what the transaction is, is the client's answer; a hung node never
holds the answer up; billed once. A node that would sign is never asked.

Told with scripted nodes; the served story (anvil, cast, a hung node through the
fault-injecting upstream) is in test_integrity_served.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from eth_hash.auto import keccak

from chainrouter.domain.enums import Scenario
from chainrouter.router.contract import Forward
from chainrouter.router.latency import TailPolicy
from chainrouter.testing.scripted import Late, Responder, answering, erroring
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

FIRST, SAME_PROVIDER, OTHER = "http://first.node", "http://same.node", "http://other.node"
RAW = "0x02f86b" + "5a" * 100  # the bytes are not read, only hashed
TX_HASH = "0x" + keccak(bytes.fromhex(RAW[2:])).hex()
WRITES = ("eth_sendRawTransaction", "eth_sendTransaction", "eth_sign", "eth_signTransaction")


def accepting(tx_hash: str = TX_HASH) -> Responder:
    return answering(tx_hash)


def _world(first: Any, other: Any, **options: Any) -> ScriptedWorld:
    options.setdefault("tail", TailPolicy(hedge_max=0, timeout_ceiling_s=10.0))
    return scripted_world([(FIRST, 100, first), (OTHER, 300, other)], methods=WRITES, **options)


def _send(world: ScriptedWorld) -> Any:
    return world.call(rpc("eth_sendRawTransaction", [RAW]))


def test_a_signed_transaction_goes_to_two_providers_at_once_and_answers_its_own_hash() -> None:
    world = _world(accepting(), accepting())
    reply = _send(world)
    assert (reply.status, json.loads(reply.body)) == (
        200,
        {"jsonrpc": "2.0", "id": 1, "result": TX_HASH},
    )
    assert sorted(world.urls_called()) == sorted([FIRST, OTHER])
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}  # billed once


def test_the_second_node_is_of_another_provider_than_the_first() -> None:
    world = scripted_world(
        [(FIRST, 100, accepting()), (SAME_PROVIDER, 200, accepting()), (OTHER, 300, accepting())],
        methods=WRITES,
        provider_of={SAME_PROVIDER: FIRST},
    )
    _send(world)
    assert sorted(world.urls_called()) == sorted([FIRST, OTHER])


def test_a_hung_node_never_holds_the_answer_up() -> None:
    world = _world(_late_acceptance(60.0), accepting())
    started = world.clock()
    reply = _send(world)
    assert json.loads(reply.body)["result"] == TX_HASH
    assert world.clock() - started < 1.0
    assert world.metered() == {Scenario.HEDGED: (1, 300)}


def test_already_known_is_an_acceptance() -> None:
    world = _world(erroring(-32000, "already known"), _late_acceptance(60.0))
    assert json.loads(_send(world).body)["result"] == TX_HASH


@pytest.mark.parametrize(
    "refusal",
    ["nonce too low", "insufficient funds for gas * price + value", "intrinsic gas too low"],
)
def test_a_refusal_for_what_the_transaction_is_is_the_clients_answer(refusal: str) -> None:
    world = _world(erroring(-32000, refusal), _late_acceptance(60.0))
    reply = _send(world)
    assert json.loads(reply.body)["error"] == {"code": -32000, "message": refusal}
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}


def test_a_node_that_echoes_another_hash_is_not_believed() -> None:
    world = _world(accepting("0x" + "00" * 32), _late_acceptance(0.2))
    reply = _send(world)
    assert json.loads(reply.body)["result"] == TX_HASH
    assert world.cooling() == [FIRST]
    assert world.metered() == {Scenario.HEDGED: (1, 300)}


def _late_acceptance(seconds: float) -> Responder:
    def respond(command: Forward) -> Late:
        request = orjson.loads(command.body)
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": TX_HASH}
        return Late(seconds, orjson.dumps(answer))

    return respond


@pytest.mark.parametrize(
    "params",
    [
        [],
        ["0x"],
        ["0x1"],
        ["02f86b"],
        ["0xzz"],
        [RAW, RAW],
        [{"raw": RAW}],
        ["0x" + "ab" * 200_000],
    ],
)
def test_a_malformed_raw_transaction_is_minus_32602_and_never_sent(params: Any) -> None:
    world = _world(accepting(), accepting())
    reply = world.call(rpc("eth_sendRawTransaction", params))
    assert (reply.status, json.loads(reply.body)["error"]["code"]) == (400, -32602)
    assert world.urls_called() == []


@pytest.mark.parametrize("method", ["eth_sendTransaction", "eth_sign", "eth_signTransaction"])
def test_a_method_a_node_would_sign_is_never_routed(method: str) -> None:
    world = _world(accepting(), accepting())
    reply = world.call(rpc(method, [{"from": "0x" + "11" * 20}]))
    error = json.loads(reply.body)["error"]
    assert (reply.status, error["code"]) == (422, -32002)
    assert "eth_sendRawTransaction" in error["message"]
    assert world.urls_called() == []
