"""The native module's classes and functions (`chainrouter._native`, built from `native/`), declared
once: `contract_gen.py` writes the stub `chainrouter/_native.pyi` from this module, and
`tests/router/test_contract.py` checks the built module's signatures against it, parameter by
parameter. What the classes exchange are the types of `contract.py`.

The classes here are never instantiated: they only declare.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Protocol

from chainrouter.router.contract import (
    Acquire,
    HttpRequest,
    Landed,
    Program,
    Receipt,
    Settled,
    Tally,
)


class Driver(Protocol):
    """A tokio runtime with the client to nodes, stepping programs (native/src/driver.rs)."""

    def __init__(
        self,
        acquire: Callable[[Acquire], float | concurrent.futures.Future[float]],
        vet: Callable[[str], str | None] | None,
        max_response_bytes: int,
        connect_timeout_s: float,
        idle_timeout_s: float,
        ca_file: str | None,
        user_agent: str,
    ) -> None: ...

    def run(self, coroutine: Program) -> Any:
        """Drive `coroutine` to its end on this thread; its result."""
        ...

    def spawn(self, coroutine: Program) -> None:
        """Start `coroutine` on its own; it runs whenever the runtime is driven."""
        ...


class Epochs(Protocol):
    """Counters Python raises when what a decision read changes (router/epochs.py)."""

    def __init__(self, slots: int) -> None: ...

    def bump(self, slot: int) -> None: ...

    def read(self, slot: int) -> int: ...


class Memo(Protocol):
    """The decisions a native server applies, and the customers' grants they spend from
    (native/src/memo.rs)."""

    def __init__(
        self,
        epochs: Epochs,
        max_bytes: int,
        max_body_bytes: int,
        max_calls: int,
        max_params_depth: int,
        forward_max_age_s: float,
        answer_max_age_s: float,
        masks: dict[str, int],
        batch_prefix: str,
    ) -> None: ...

    def next_batch_id(self) -> str:
        """The worker's next batch id: one sequence with the pipeline's answers."""
        ...

    def grant(self, customer_id: int, nano: int) -> None:
        """Add `nano` nano-credits to what calls under decisions may spend for the customer."""
        ...

    def granted(self, customer_id: int) -> int:
        """What is left of the customer's grant."""
        ...

    def reclaim(self, customer_id: int) -> int:
        """Take back what is left of the customer's grant; how much that was."""
        ...

    def entries(self) -> int: ...

    def held_bytes(self) -> int: ...

    def clear(self) -> None:
        """Forget every decision (grants stay)."""
        ...

    def applying(
        self,
        path: str,
        origin: str | None,
        referer: str | None,
        content_type: str | None,
        body: bytes,
    ) -> list[object] | None:
        """The bookings of the decisions that would serve this request now, in call order; None
        when the pipeline would (for the tests: nothing is spent)."""
        ...


class NativeServer(Protocol):
    """One worker's HTTP server (native/src/server.rs)."""

    def __init__(
        self,
        handler: Callable[[HttpRequest], Program],
        driver: Driver,
        max_body_bytes: int,
        header_timeout_s: float,
        body_timeout_s: float,
        max_connections: int,
    ) -> None: ...

    def serve(self, fd: int) -> None:
        """Serve the listening socket `fd` until `stop`."""
        ...

    def accept_websockets(self, handler: Callable[[HttpRequest, int], object]) -> None: ...

    def apply_decisions(
        self, memo: Memo, settle: Callable[[list[Receipt], list[Tally]], Settled]
    ) -> None:
        """Apply the decisions the pipeline's answers carry to later calls in their scope; the
        calls served so go to `settle` (the ledger) in groups. Before `serve`."""
        ...

    def stop(self) -> None: ...


class Leading(Protocol):
    """The handle a `Coalesce` command resumes a flight's leader with (contract.Leading)."""

    def land(self, landed: Landed | None) -> None: ...


def parse_node_url(url: str, user_agent: str) -> tuple[tuple[str, int, bool], bytes]:
    """How the client to nodes reads a node URL: `((host, port, tls), request head)`."""
    raise NotImplementedError("declared only: chainrouter._native has it")


def contract() -> dict[str, Any]:
    """The contract as the built module knows it: version, and each crossing type's fields."""
    raise NotImplementedError("declared only: chainrouter._native has it")


def plain_result(answer: bytes, id: bytes) -> tuple[int, int] | None:
    """The span of `answer`'s result when it is a plain answer under the id `id` (the JSON
    bytes sent): for the tests that hold the server's recognizer to router/answers.py."""
    raise NotImplementedError("declared only: chainrouter._native has it")


def result_quantity(result: bytes) -> int | None:
    """The number a plain result holds (a JSON string of `0x` and 1 to 16 hex digits): for the
    tests that hold the server's reading of heads to router/belief.py's."""
    raise NotImplementedError("declared only: chainrouter._native has it")


def call_keys(
    body: bytes, masks: dict[str, int], max_params_depth: int
) -> list[tuple[bytes | None, bytes]] | None:
    """Each call's key in the masked scope (None: none for its method) and in the exact one,
    without the request's fields; None when the server's reader refuses the body. For the tests
    that hold the reader to the pipeline's parser."""
    raise NotImplementedError("declared only: chainrouter._native has it")


CLASSES: tuple[type, ...] = (Driver, Epochs, Memo, NativeServer, Leading)
FUNCTIONS = (parse_node_url, contract, plain_result, result_quantity, call_keys)
