"""The executors: what runs the router's programs and carries out their commands (contract.py).

- `native` (the default): the Rust HTTP server and client (`chainrouter._native`) step each
  program on the server's thread; `executors/native.py` starts and stops its workers.
- `python`: asyncio with aiohttp as the client to nodes, served by uvicorn (`executors/asgi.py`);
  for installations without the Rust build, and in development.

Both carry out the same commands with the same meaning, and the same integration suite runs on
each (tests/router/conftest.py makes every test world on both).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from chainrouter.router.contract import Program

T = TypeVar("T")


class Executor(Protocol):
    """How asyncio code (the servers' glue, the tests) hands programs to an executor."""

    name: str

    async def run(self, program: Coroutine[Any, Any, T]) -> T:
        """Run `program` to its end and return its result (or raise what it raised)."""
        ...

    def spawn(self, program: Program) -> None:
        """Start `program` on its own; a failure is logged."""
        ...

    async def close(self) -> None:
        """Stop what was spawned (where the executor can) and release connections."""
        ...
