"""The one contract between the pipeline and its executors (router/contract.py, native_api.py):
the Rust side and the stub are generated from it and current, the built module matches it field
by field and parameter by parameter, a build of another version refuses to start, and every
executor carries out every command."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from chainrouter.ratelimit.window import Bucket
from chainrouter.router import contract, contract_gen, native_api
from chainrouter.router.contract import (
    Acquire,
    Coalesce,
    Failure,
    FailureKind,
    Forward,
    Gather,
    Race,
    Spawn,
    Wait,
)
from chainrouter.router.executors import Executor
from chainrouter.router.executors.native import load_native_module
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import ScriptedExecutor, answering
from tests.router.conftest import make_executor

pytestmark = pytest.mark.anyio


def test_the_generated_rust_side_and_stub_are_those_of_the_declaration() -> None:
    """`native/src/contract_gen.rs` and `_native.pyi` are what contract_gen.py writes from
    contract.py and native_api.py now: a declaration changed alone fails here."""
    assert contract_gen.main(["--check"]) == 0


def test_the_native_build_was_generated_from_the_declaration_field_by_field() -> None:
    """The built module reports the names it was generated with: a stale build (its Rust side
    generated from another declaration) fails here, type by type, field by field."""
    assert load_native_module().contract() == contract_gen.described()


def test_the_description_follows_the_python_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the comparison above sees when only the Python side changes."""
    native = load_native_module().contract()

    @dataclass(slots=True)
    class Forward:  # a field renamed on the Python side alone
        address: str
        body: bytes
        timeout_s: float

    renamed = tuple(Forward if k is contract.Forward else k for k in contract.CROSSING)
    monkeypatch.setattr(contract, "CROSSING", renamed)
    types = contract_gen.described()["types"]
    assert isinstance(types, dict)
    assert native["types"]["Forward"] != types["Forward"]
    assert contract_gen.main(["--check"]) == 1


def _arguments(method: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The declared method's parameters as keywords, each from `values`."""
    names = [name for name in inspect.signature(method).parameters if name != "self"]
    return {name: values[name] for name in names}


def test_the_native_classes_take_the_parameters_native_api_declares() -> None:
    """Each declared method is called with the declared names as keywords: a parameter
    renamed, added or dropped on the Rust side alone fails here (pyo3 checks the keywords)."""
    native = load_native_module()
    epochs = native.Epochs(**_arguments(native_api.Epochs.__init__, {"slots": 16}))
    epochs.bump(**_arguments(native_api.Epochs.bump, {"slot": 3}))
    assert epochs.read(**_arguments(native_api.Epochs.read, {"slot": 3})) == 1
    memo_values = {
        "epochs": epochs,
        "max_bytes": 1 << 20,
        "max_body_bytes": 4096,
        "max_calls": 10,
        "max_params_depth": 64,
        "forward_max_age_s": 1.0,
        "answer_max_age_s": 1.0,
        "masks": {"eth_getBalance": 1},
        "batch_prefix": "p-",
        "customer_id": 7,
        "nano": 100,
        "path": "/rpc/1/k",
        "origin": None,
        "referer": None,
        "content_type": "application/json",
        "body": b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
    }
    memo = native.Memo(**_arguments(native_api.Memo.__init__, memo_values))
    for name, declared in vars(native_api.Memo).items():
        if inspect.isfunction(declared) and not name.startswith("_"):
            getattr(memo, name)(**_arguments(declared, memo_values))
    assert memo.next_batch_id() == "p-2"  # after the loop's
    driver = native.Driver(
        **_arguments(
            native_api.Driver.__init__,
            {
                "acquire": lambda _: 0.0,
                "vet": None,
                "max_response_bytes": 1024,
                "connect_timeout_s": 1.0,
                "idle_timeout_s": 1.0,
                "ca_file": None,
                "user_agent": "test",
            },
        )
    )

    async def leads() -> object:
        leading = await Coalesce("k")
        assert leading is not None
        assert not isinstance(leading, contract.Landed)
        leading.land(**_arguments(native_api.Leading.land, {"landed": None}))
        return "ran"

    assert driver.run(**_arguments(native_api.Driver.run, {"coroutine": leads()})) == "ran"
    server_values = {
        "handler": lambda request: None,
        "driver": driver,
        "max_body_bytes": 1024,
        "header_timeout_s": 1.0,
        "body_timeout_s": 1.0,
        "max_connections": 8,
        "memo": memo,
        "settle": lambda receipts: [],
    }
    server = native.NativeServer(**_arguments(native_api.NativeServer.__init__, server_values))
    server.accept_websockets(
        **_arguments(native_api.NativeServer.accept_websockets, {"handler": lambda r, fd: None})
    )
    server.apply_decisions(**_arguments(native_api.NativeServer.apply_decisions, server_values))
    server.stop()
    assert native.parse_node_url(
        **_arguments(native_api.parse_node_url, {"url": "http://n:1/", "user_agent": "t"})
    )[0] == ("n", 1, False)


def test_a_native_build_of_another_contract_version_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(contract, "VERSION", contract.VERSION + 1)
    with pytest.raises(RuntimeError, match="contract version"):
        load_native_module().Driver(lambda _: True, None, 1024, 1.0, 1.0, None, "test")


async def _every_command(url: str) -> list[Any]:
    done: list[str] = []

    async def beside() -> None:
        done.append("spawned")

    answer = await Forward(url, b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', 5)
    failure = await Forward(url.replace("/ok", "/status/503"), b"{}", 5)
    both = await Gather([_value(1), _value(2)])
    raced = await Race([_value(1, 0.2), _value(2, 0.01)], [0, 0])
    allowed = [await Acquire([Bucket("contract", 1, 60.0)]) == 0.0 for _ in range(2)]
    await Spawn(beside())
    await Wait(0.05)
    assert isinstance(failure, Failure)
    return [answer, (failure.kind, failure.status), both, raced, allowed, done]


async def _value(value: int | None, after_s: float = 0) -> int | None:
    await Wait(after_s)
    return value


@pytest.fixture(params=["python", "native"])
async def executor(request: pytest.FixtureRequest) -> AsyncIterator[Executor]:
    made = make_executor(request.param == "native")
    yield made
    await made.close()


async def test_every_executor_carries_out_every_command(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    url = upstream.url("/ok/contract")
    answer, failure, both, raced, allowed, done = await executor.run(_every_command(url))
    assert b'"result": "0x7a69"' in answer
    assert failure == (FailureKind.HTTP_STATUS, 503)
    assert both == [1, 2]
    assert raced == (1, 2)
    assert allowed == [True, False]
    assert done == ["spawned"]


def test_the_scripted_executor_carries_out_every_command_too() -> None:
    url = "http://node.test/ok"
    scripted = ScriptedExecutor({url: answering("0x7a69")})
    scripted.down.add("http://node.test/status/503")
    answer, failure, both, raced, allowed, done = scripted.run(_every_command(url))
    assert b'"result":"0x7a69"' in answer
    assert failure == (FailureKind.HTTP_STATUS, 503)
    assert (both, raced, allowed) == ([1, 2], (1, 2), [True, False])
    assert done == []  # spawned, not run: a test runs `scripted.spawned` when it wants them
    scripted.run(scripted.spawned.pop())
    assert done == ["spawned"]


async def _race_story(hang_url: str, ok_url: str) -> list[Any]:
    """What a `Race` does, told once for every executor."""
    closed: list[str] = []

    async def attempt(url: str, name: str) -> bytes | Failure | None:
        try:
            return await Forward(url, b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', 30)
        finally:
            closed.append(name)

    async def nothing() -> None:
        await Wait(0.01)

    async def never_started() -> int:
        closed.append("never started ran")
        return 3

    # The first to return a value wins, wherever it is; the hung Forward is abandoned.
    hedged = await Race([attempt(hang_url, "hung"), attempt(ok_url, "hedge")], [0, 0.05])
    # A program returning None does not end the race; one not started by the end is closed.
    after_none = await Race([nothing(), _value(2, 0.05), never_started()], [0, 0, 5])
    # Nobody with a value: (-1, None); no program at all: the same.
    empty = [await Race([nothing(), nothing()], [0, 0.01]), await Race([], [])]
    failed: str | None = None
    try:
        await Race([_raising(), _value(1, 5)], [0, 0])
    except ValueError as exc:
        failed = str(exc)
    assert isinstance(hedged[1], bytes)
    return [hedged[0], after_none, empty, failed, closed]


async def _raising() -> None:
    await Wait(0.01)
    raise ValueError("broken racer")


async def test_every_executor_runs_a_race_and_cancels_its_losers(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    url, before = upstream.url, upstream.open_connections
    started = asyncio.get_running_loop().time()
    outcome = await executor.run(_race_story(url("/hang/race"), url("/ok/race")))
    assert asyncio.get_running_loop().time() - started < 2  # nobody waited for the hang or 5 s
    assert outcome == [1, (1, 2), [(-1, None), (-1, None)], "broken racer", ["hedge", "hung"]]
    for _ in range(300):  # the abandoned attempt's connection is closed, not kept
        if upstream.open_connections <= before + 1:
            break
        await asyncio.sleep(0.01)
    assert upstream.open_connections <= before + 1  # at most the answering one, kept
    assert upstream.requests["/hang/race"] == 1
