"""The one contract between the pipeline and its executors (router/contract.py): the Rust side's
declaration of it matches the Python module, a build of another version refuses to start, and
every executor carries out every command."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from chainrouter.ratelimit.window import Bucket
from chainrouter.router import contract
from chainrouter.router.contract import (
    Acquire,
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


def test_the_native_executor_declares_the_contract_the_python_module_defines() -> None:
    assert load_native_module().contract() == contract.describe()


def test_the_description_follows_the_python_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the comparison above sees when only the Python side changes."""
    native = load_native_module().contract()
    monkeypatch.setattr(contract, "VERSION", contract.VERSION + 1)
    assert native != contract.describe()
    monkeypatch.undo()

    @dataclass(slots=True)
    class Forward:  # a field renamed on the Python side alone
        address: str
        body: bytes
        timeout_s: float

    monkeypatch.setattr(contract, "COMMANDS", (Forward, *contract.COMMANDS[1:]))
    assert native["commands"]["Forward"] != contract.describe()["commands"]["Forward"]


def test_the_replay_memo_takes_the_parameters_the_contract_names() -> None:
    """Called with the declared names as keywords, each method runs: a parameter renamed on
    the Rust side alone fails here (the declaration above is compared, not the methods)."""
    native = load_native_module()
    declared = contract.REPLAY_MEMO
    values: dict[str, Any] = {
        "max_bytes": 1 << 20,
        "max_body_bytes": 4096,
        "max_age_s": 1.0,
        "batch_prefix": "p-",
        "token": 1,
        "generation": 0,
        "path": "/rpc/1/k",
        "origin": None,
        "referer": None,
        "content_type": "application/json",
        "body": b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
        "status": 200,
        "headers": [("x-cache", "HIT")],
        "answer": b'{"jsonrpc":"2.0","id":1,"result":"0x1"}',
    }
    memo = native.ReplayMemo(**{name: values[name] for name in declared["__new__"]})
    results = {
        method: getattr(memo, method)(**{name: values[name] for name in parameters})
        for method, parameters in declared.items()
        if method
        not in (
            "__new__",
            "clear",
            "generation",
            "next_batch_id",
            "drain",
            "stats",
            "install_forward",
            "holds_forward",
            "flying",
            "landed",
            "follow",
        )
    }
    # A forward to repeat, under another key (the same key would take the replay's place).
    forward = {
        **values,
        "path": "/rpc/1/other",
        "url": "http://127.0.0.1:1/",
        "sent": values["body"],
        "timeout_s": 1.0,
        "flight": "a-flight",
        "hand_head": False,
        "future": object(),
    }
    for method in ("install_forward", "holds_forward", "flying", "landed", "follow"):
        results[method] = getattr(memo, method)(
            **{name: forward[name] for name in declared[method]}
        )
    assert results["install_forward"] is True
    assert results["holds_forward"] is True
    assert results["follow"] is False  # no repeat leads that flight
    assert results["install"] is True
    assert results["replay"] is not None
    assert results["scan_ids"] == [(22, 23)]
    assert memo.drain() == ([(1, 1)], [])
    assert memo.next_batch_id() == "p-2"  # after the replay's
    memo.clear()
    assert memo.stats() == (0, 0)
    assert memo.drain() == ([], [1, 1])  # the replay's token and the forward's (both 1 here)
    assert memo.generation() == 1
    with pytest.raises(TypeError):
        memo.install(**{name: values[name] for name in declared["install"]}, extra=1)


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
