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
past the end of the list is a test error). An answer comes at once unless the responder says it
is late (`slow`, `hanging`); a time-out takes the command's whole time-out. `Wait`, time-outs and
late answers advance `clock` instead of waiting. `Gather` interleaves its programs one command
at a time, as real executors overlap them; `Race` runs its programs in simulated time, each from
its delay, each command taking as long as its answer is late, and records the `Forward`s it cuts
off in `cancelled`. (A race inside a batch runs whole, one item after the other, in that time.)
"""

from __future__ import annotations

import concurrent.futures
import heapq
import math
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

import orjson

from chainrouter.ratelimit.window import MemoryLimiter
from chainrouter.router.contract import (
    Acquire,
    Coalesce,
    Failure,
    FailureKind,
    Forward,
    Gather,
    Join,
    Program,
    Race,
    Spawn,
    Wait,
)
from chainrouter.router.flights import FlightTable

T = TypeVar("T")


class Late(NamedTuple):
    """An answer that takes `seconds` to come; past the command's time-out it never does."""

    seconds: float
    answer: bytes | Failure


Responder = Callable[[Forward], bytes | Failure | Late]
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


def slow(seconds: float, responder: Responder) -> Responder:
    """`responder`'s answers, each `seconds` late."""

    def respond(command: Forward) -> Late:
        answer = responder(command)
        return Late(seconds, answer.answer if isinstance(answer, Late) else answer)

    return respond


def hanging() -> Responder:
    """A node that takes every call and never answers: each attempt ends at its time-out."""
    return lambda command: Late(math.inf, Failure(FailureKind.TIMEOUT, "scripted hang", None))


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
        self.clock = clock if clock is not None else FakeClock()
        # Not `limiter or ...`: a limiter has a length, and an empty one is falsy.
        self.limiter = limiter if limiter is not None else MemoryLimiter(clock=self.clock)
        self.forwarded: list[Forward] = []  # every Forward carried out, in order
        self.cancelled: list[Forward] = []  # cut off by the end of a race, in order
        self.spawned: list[Program] = []  # started by `Spawn`, not run: `run` them to
        self.methods_sent: list[str] = []  # the method of every single call forwarded
        self.down: set[str] = set()  # URLs answering HTTP 503, whatever their script
        self.flights = FlightTable()  # the calls in flight that identical ones join

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
            seconds, answer = self._forward(command)
            self.clock.now += seconds
            return answer
        if isinstance(command, Gather):
            return self._gather(command.programs)
        if isinstance(command, Race):
            return self._race(command)
        if isinstance(command, Acquire):
            return self.limiter.try_acquire(command.buckets)
        if isinstance(command, Join):
            if not command.future.done():
                raise ScriptError("a Join on a future nothing in the script can end")
            return command.future.result()
        if isinstance(command, Wait):
            self.clock.now += max(command.seconds, 0.0)
            return None
        if isinstance(command, Spawn):
            self.spawned.append(command.program)
            return None
        if isinstance(command, Coalesce):
            boarded = self.flights.board(command.key)
            if not isinstance(boarded, concurrent.futures.Future):
                return boarded
            return self._carry_out(Join(boarded))
        raise ScriptError(f"a program awaited {type(command).__name__}, which is not a command")

    def _forward(self, command: Forward) -> tuple[float, bytes | Failure]:
        """How long the answer takes, and what it is."""
        self.forwarded.append(command)
        request = _request_of(command)
        if isinstance(request, dict) and "method" in request:
            self.methods_sent.append(request["method"])
        if command.url in self.down:
            return 0.0, Failure(FailureKind.HTTP_STATUS, "HTTP 503", 503)
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
        seconds = 0.0
        if isinstance(answer, Late):
            seconds, answer = answer
        if seconds >= command.timeout_s or (
            isinstance(answer, Failure) and answer.kind == FailureKind.TIMEOUT
        ):
            detail = f"no complete answer within {command.timeout_s:.3f} s"
            return command.timeout_s, Failure(FailureKind.TIMEOUT, detail, None)
        return seconds, answer

    def _race(self, command: Race) -> tuple[int, Any]:
        """The race in simulated time: the earliest event first (a program starting at its
        delay, or a command's result arriving), until a program returns something not None."""
        programs = command.programs
        if len(command.delays_s) != len(programs):
            raise ValueError("Race needs one delay per program")
        began, order = self.clock.now, 0
        events: list[tuple[float, int, int, Any]] = []  # (when, order, program, resumed with)
        for index, delay in enumerate(command.delays_s):
            events.append((began + (delay if delay > 0 else 0.0), index, index, None))
            order = index + 1
        heapq.heapify(events)
        in_flight: dict[int, Forward] = {}
        try:
            while events:
                when, _, index, value = heapq.heappop(events)
                self.clock.now = max(self.clock.now, when)
                in_flight.pop(index, None)
                try:
                    step = programs[index].send(value)
                except StopIteration as done:
                    if done.value is not None:
                        return index, done.value
                    continue
                seconds, result = 0.0, None
                if isinstance(step, Forward):
                    seconds, result = self._forward(step)
                    in_flight[index] = step
                elif isinstance(step, Wait):
                    seconds = max(step.seconds, 0.0)
                else:
                    result = self._carry_out(step)
                heapq.heappush(events, (self.clock.now + seconds, order, index, result))
                order += 1
            return -1, None
        finally:
            self.cancelled.extend(in_flight.values())
            for program in programs:
                program.close()

    def _gather(self, programs: list[Program]) -> list[Any]:
        """Step every program one command at a time, in turn, until all have ended. A program
        that joined a future not yet done (an identical call in flight) waits its turn until
        another program's step ends it."""
        results: list[Any] = [None] * len(programs)
        values: list[Any] = [None] * len(programs)
        joined: dict[int, Join] = {}
        running = list(range(len(programs)))
        while running:
            stepped = False
            for index in list(running):
                waiting = joined.get(index)
                if waiting is not None:
                    if not waiting.future.done():
                        continue
                    del joined[index]
                    values[index] = waiting.future.result()
                try:
                    command = programs[index].send(values[index])
                except StopIteration as done:
                    results[index] = done.value
                    running.remove(index)
                    stepped = True
                    continue
                stepped = True
                if isinstance(command, Coalesce):
                    boarded = self.flights.board(command.key)
                    if isinstance(boarded, concurrent.futures.Future):
                        command = Join(boarded)  # waits for the leader, as a Join does
                    else:
                        values[index] = boarded
                        continue
                if isinstance(command, Join) and not command.future.done():
                    joined[index] = command
                    continue
                values[index] = self._carry_out(command)
            if not stepped:
                raise ScriptError("every program of a Gather waits on a Join nothing can end")
        return results
