"""The Python executors' flight table: identical read-only calls in flight at the same moment
share one attempt (design notes, "Response cache and coalescing"). The pipeline reaches it only
through the `Coalesce` command (router/stages/cache.py); the native executor's table is
native/src/flights.rs, which its server's own calls share.

The first call of a key leads: `board` gives it a `Leading` handle, and it is routed and
attempted as usual; when it ends, its outcome lands (`Leading.land`) for every call that joined
it meanwhile, each of which waited on the flight's future. A leader cut short lands None: the
calls that joined it are attempted on their own.
"""

from __future__ import annotations

import concurrent.futures

from chainrouter.router.contract import Landed


class _Flight:
    """One call in flight. Its future is made only once a call joins: most calls are joined by
    none, and a future (a lock, a condition) costs microseconds."""

    __slots__ = ("_landed", "_outcome")

    def __init__(self) -> None:
        self._outcome: concurrent.futures.Future[Landed | None] | None = None
        self._landed: tuple[Landed | None] | None = None

    def outcome(self) -> concurrent.futures.Future[Landed | None]:
        if self._outcome is None:
            future: concurrent.futures.Future[Landed | None] = concurrent.futures.Future()
            # Running: a follower cancelled while it waits (asyncio passes a cancellation on to
            # the future it wraps) cannot cancel the outcome the others wait for.
            future.set_running_or_notify_cancel()
            if self._landed is not None:
                future.set_result(self._landed[0])
            self._outcome = future
        return self._outcome

    def settle(self, landed: Landed | None) -> None:
        if self._landed is not None:
            return  # landing twice is harmless
        self._landed = (landed,)
        if self._outcome is not None:
            self._outcome.set_result(landed)


class FlightLeader:
    """The handle of the call leading a flight (contract.Leading)."""

    __slots__ = ("_flight", "_key", "_table")

    def __init__(self, table: FlightTable, key: str, flight: _Flight) -> None:
        self._table = table
        self._key = key
        self._flight = flight

    def land(self, landed: Landed | None) -> None:
        self._table.end(self._key, self._flight)
        self._flight.settle(landed)


class FlightTable:
    def __init__(self) -> None:
        self._flights: dict[str, _Flight] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def board(self, key: str) -> FlightLeader | concurrent.futures.Future[Landed | None]:
        """Lead the flight `key` (a handle), or join the one in the air (its outcome's future)."""
        flight = self._flights.get(key)
        if flight is not None:
            return flight.outcome()
        flight = self._flights[key] = _Flight()
        return FlightLeader(self, key, flight)

    def end(self, key: str, flight: _Flight) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
