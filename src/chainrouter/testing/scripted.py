"""An executor with no I/O, for tests that drive the router's programs with scripted results.

The pipeline and the health checker do no I/O (contract.py): they await commands. This executor
answers them from a script, synchronously, so a test can tell a story (a node fails, another
answers; a 429, then success; a time-out) and check what the program did, with no socket, no
event loop and no waiting:

    nodes = {"http://a": [failing(FailureKind.RATE_LIMITED, 429)], "http://b": answering("0x1")}
    executor = ScriptedExecutor(nodes)
    reply = executor.run(service.handle_keyed("1", key, body))
    assert [f.url for f in executor.forwarded] == ["http://a", "http://b"]

A node's script is one responder for every call, or a list of responders used in turn (a call
past the end of the list is a test error). `Gather` interleaves its programs one command at a
time, as real executors overlap them; `Wait` and time-outs advance `clock` instead of waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson

from chainrouter.ratelimit.gcra import MemoryLimiter
from chainrouter.router.contract import (
    Acquire,
    Failure,
    FailureKind,
    Forward,
    Gather,
    Program,
    Spawn,
    Wait,
)

T = TypeVar("T")
Responder = Callable[[Forward], bytes | Failure]
Script = Responder | list[Responder]


class FakeClock:
    """Monotonic seconds that move only when told (by `Wait`, a time-out, or the test)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _request_of(command: Forward) -> Any:
    return orjson.loads(command.body)


def answering(result: Any) -> Responder:
    """A node that answers every call (and every call of a batch) with `result`."""

    def respond(command: Forward) -> bytes:
        request = _request_of(command)
        if isinstance(request, list):
            return orjson.dumps(
                [{"jsonrpc": "2.0", "id": item["id"], "result": result} for item in request]
            )
        return orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})

    return respond


def erroring(code: int, message: str = "error", *, null_id: bool = False) -> Responder:
    """A node that answers with a JSON-RPC error, under the call's id or null."""

    def respond(command: Forward) -> bytes:
        request_id = None if null_id else _request_of(command)["id"]
        error = {"code": code, "message": message}
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})

    return respond


def failing(kind: FailureKind, status: int | None = None) -> Responder:
    """A node that gives no usable answer; a time-out takes the command's whole time-out."""

    def respond(command: Forward) -> Failure:
        return Failure(kind, f"scripted {kind}", status)

    return respond


def raw(body: bytes) -> Responder:
    """A node that answers `body`, whatever was asked."""
    return lambda command: body


class ScriptError(AssertionError):
    """The program did something the script did not foresee."""


class ScriptedExecutor:
    name = "scripted"

    def __init__(
        self,
        nodes: dict[str, Script] | None = None,
        *,
        limiter: MemoryLimiter | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.nodes: dict[str, Script] = dict(nodes or {})
        self.clock = clock or FakeClock()
        self.limiter = limiter or MemoryLimiter(clock=self.clock)
        self.forwarded: list[Forward] = []  # every Forward carried out, in order
        self.spawned: list[Program] = []  # started by `Spawn`, not run: `run` them to
        self.methods_sent: list[str] = []  # the method of every single call forwarded
        self.down: set[str] = set()  # URLs answering HTTP 503, whatever their script

    def run(self, program: Coroutine[Any, Any, T]) -> T:
        """Run `program` to its end, answering its commands from the script."""
        value: Any = None
        try:
            while True:
                try:
                    command = program.send(value)
                except StopIteration as done:
                    result: T = done.value
                    return result
                value = self._carry_out(command)
        finally:
            program.close()

    def _carry_out(self, command: object) -> Any:
        if isinstance(command, Forward):
            return self._forward(command)
        if isinstance(command, Gather):
            return self._gather(command.programs)
        if isinstance(command, Acquire):
            return self.limiter.try_acquire(command.buckets)
        if isinstance(command, Wait):
            self.clock.now += max(command.seconds, 0.0)
            return None
        if isinstance(command, Spawn):
            self.spawned.append(command.program)
            return None
        raise ScriptError(f"a program awaited {type(command).__name__}, which is not a command")

    def _forward(self, command: Forward) -> bytes | Failure:
        self.forwarded.append(command)
        request = _request_of(command)
        if isinstance(request, dict) and "method" in request:
            self.methods_sent.append(request["method"])
        if command.url in self.down:
            return Failure(FailureKind.HTTP_STATUS, "HTTP 503", 503)
        script = self.nodes.get(command.url)
        if script is None:
            raise ScriptError(f"no script for {command.url}")
        if isinstance(script, list):
            if not script:
                raise ScriptError(f"{command.url} was called more often than scripted")
            responder = script.pop(0)
        else:
            responder = script
        answer = responder(command)
        if isinstance(answer, Failure) and answer.kind == FailureKind.TIMEOUT:
            self.clock.now += command.timeout_s
        return answer

    def _gather(self, programs: list[Program]) -> list[Any]:
        """Step every program one command at a time, in turn, until all have ended."""
        results: list[Any] = [None] * len(programs)
        values: list[Any] = [None] * len(programs)
        running = list(range(len(programs)))
        while running:
            for index in list(running):
                try:
                    command = programs[index].send(values[index])
                except StopIteration as done:
                    results[index] = done.value
                    running.remove(index)
                    continue
                values[index] = self._carry_out(command)
        return results
