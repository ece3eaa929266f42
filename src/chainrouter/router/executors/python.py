"""The Python executor: programs on the asyncio event loop, with aiohttp as the client to nodes.

aiohttp was chosen by measurement (docs/decisions.md, "The executors"): it is the well-kept
asyncio client with the least cost per call here after pyreqwest, whose every call crosses into
its own runtime's thread; and the screening of submitted URLs uses it too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from yarl import URL

from chainrouter.net.outbound import CheckingResolver, DialRule, failure_text, ssl_context
from chainrouter.ratelimit.window import Limiter
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
from chainrouter.router.flights import FlightLeader, FlightTable

T = TypeVar("T")
log = logging.getLogger(__name__)
_HEADERS = {"Content-Type": "application/json"}


class PythonExecutor:
    name = "python"

    def __init__(
        self,
        limiter: Limiter,
        *,
        max_response_bytes: int,
        connect_timeout_s: float,
        idle_timeout_s: float = 30.0,
        ca_file: Path | None = None,
        user_agent: str = "chainrouter",
        rule: DialRule | None = None,
    ) -> None:
        """`rule`: which addresses may be dialled, checked on each connection's real addresses
        (net/outbound.py); None dials anything (tests of the client alone)."""
        self._limiter = limiter
        self._rule = rule
        self._literal_refusals: dict[str, str | None] = {}  # by URL: what an IP host breaks
        self._max_response_bytes = max_response_bytes
        self._connect_timeout_s = connect_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._ssl = ssl_context(ca_file)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._spawned: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references
        self._flights = FlightTable()  # the calls in flight that identical ones join

    def _client(self) -> aiohttp.ClientSession:
        # Made on first use, inside the event loop that serves (aiohttp binds to it).
        if self._session is None:
            rule = self._rule if self._rule is not None and self._rule.checks else None
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=0,
                    ssl=self._ssl,
                    keepalive_timeout=self._idle_timeout_s,
                    resolver=None if rule is None else CheckingResolver(rule),
                    use_dns_cache=rule is None,  # a cached answer would skip the check
                ),
                headers={"User-Agent": self._user_agent},
                # No Accept-Encoding: nodes then answer uncompressed, as to the native client.
                skip_auto_headers=("Accept-Encoding",),
                trust_env=False,
                auto_decompress=False,
            )
        return self._session

    async def run(self, program: Coroutine[Any, Any, T]) -> T:
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    command = program.send(value) if error is None else program.throw(error)
                except StopIteration as done:
                    result: T = done.value
                    return result
                value, error = None, None
                try:
                    value = await self._carry_out(command)
                except Exception as exc:  # thrown into the program, which decides
                    error = exc
        finally:
            program.close()  # cut short (cancelled): the program's own `finally` blocks run

    async def _carry_out(self, command: object) -> Any:
        if isinstance(command, Forward):
            return await self._forward(command)
        if isinstance(command, Gather):
            return await self._gather(command.programs)
        if isinstance(command, Race):
            return await self._race(command)
        if isinstance(command, Acquire):
            return await self._limiter.acquire(command.buckets)
        if isinstance(command, Join):
            return await asyncio.wrap_future(command.future)
        if isinstance(command, Wait):
            seconds = command.seconds
            await asyncio.sleep(seconds if seconds > 0 else 0)  # NaN and negatives: at once
            return None
        if isinstance(command, Spawn):
            self.spawn(command.program)
            return None
        if isinstance(command, Coalesce):
            boarded = self._flights.board(command.key)
            if isinstance(boarded, FlightLeader):
                return boarded
            return await asyncio.wrap_future(boarded)
        raise RuntimeError(f"a program awaited {type(command).__name__}, which is not a command")

    async def _gather(self, programs: list[Program]) -> list[Any]:
        outcomes = await asyncio.gather(*(self.run(p) for p in programs), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes

    async def _race(self, command: Race) -> tuple[int, Any]:
        """Each program from its delay, until one returns something other than None; then the
        others are cancelled, and the ones never started closed. A program is made a task only
        when it starts: a hedge whose first attempt answers in time costs no task."""
        programs, delays = command.programs, command.delays_s
        if len(delays) != len(programs):
            raise ValueError("Race needs one delay per program")
        loop = asyncio.get_running_loop()
        began = loop.time()
        starts = sorted(range(len(programs)), key=lambda i: _delay(delays[i]))
        running: dict[asyncio.Task[Any], int] = {}
        try:
            while starts or running:
                while starts and _delay(delays[starts[0]]) <= loop.time() - began:
                    index = starts.pop(0)
                    running[loop.create_task(self.run(programs[index]))] = index
                timeout = None if not starts else began + _delay(delays[starts[0]]) - loop.time()
                if not running:
                    await asyncio.sleep(max(timeout or 0.0, 0.0))
                    continue
                done, _ = await asyncio.wait(
                    running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                for task in sorted(done, key=running.__getitem__):
                    index = running.pop(task)
                    value = task.result()  # a program's exception ends the race here
                    if value is not None:
                        return index, value
            return -1, None
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            for index in starts:
                programs[index].close()

    async def _forward(self, command: Forward) -> bytes | Failure:
        refusal = self._literal_refusal(command.url)
        if refusal is not None:
            return Failure(FailureKind.TRANSPORT, refusal, None)
        timeout = aiohttp.ClientTimeout(
            total=command.timeout_s, sock_connect=self._connect_timeout_s
        )
        try:
            async with self._client().post(
                command.url,
                data=command.body,
                headers=_HEADERS,
                timeout=timeout,
                allow_redirects=False,
            ) as response:
                status = response.status
                if status == 429:
                    return Failure(FailureKind.RATE_LIMITED, "HTTP 429", 429)
                if not 200 <= status < 300:
                    return Failure(FailureKind.HTTP_STATUS, f"HTTP {status}", status)
                return await self._read_within(response)
        except TimeoutError:
            detail = f"no complete answer within {command.timeout_s:.3f} s"
            return Failure(FailureKind.TIMEOUT, detail, None)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Failure(FailureKind.TRANSPORT, failure_text(exc), None)

    def _literal_refusal(self, url: str) -> str | None:
        """Why the URL's host, when it is an IP address, must not be dialled: such hosts never
        reach the resolver, which checks names."""
        rule = self._rule
        if rule is None or not rule.checks:
            return None
        if url not in self._literal_refusals:
            if len(self._literal_refusals) > 65_536:  # node URLs are far fewer
                self._literal_refusals.clear()
            try:
                host = URL(url).host or ""
            except ValueError:
                host = ""
            problem = rule.problem_of(host) if _is_ip(host) else None
            self._literal_refusals[url] = None if problem is None else f"{host} is {problem}"
        return self._literal_refusals[url]

    async def _read_within(self, response: aiohttp.ClientResponse) -> bytes | Failure:
        limit = self._max_response_bytes
        declared = response.content_length
        if declared is not None and declared > limit:
            return _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > limit:
                return _too_large(limit)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def spawn(self, program: Program) -> None:
        task = asyncio.get_running_loop().create_task(self.run(program))
        self._spawned.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._spawned.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a background program failed", exc_info=task.exception())

    async def close(self) -> None:
        for task in list(self._spawned):
            task.cancel()
        await asyncio.gather(*self._spawned, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None


def _delay(seconds: float) -> float:
    return seconds if seconds > 0 else 0.0  # NaN and negatives: at once


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _too_large(limit: int) -> Failure:
    return Failure(FailureKind.TOO_LARGE, f"answer larger than {limit} bytes", None)
