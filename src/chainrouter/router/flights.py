"""Calls in flight, for coalescing: identical read-only calls at the same moment share one
attempt (design notes, "Response cache and coalescing").

The first call of a key leads: it is routed and attempted as usual, and when it ends its outcome
lands here (`land`), for every call that joined it meanwhile. A joined call awaits the flight's
future (`Join`), and takes the leader's answer under its own id: a result, or the error the
leader ended with (a failure reaches every waiter and is kept nowhere). A leader cut short (its
client gone) lands nothing: the calls that joined it are attempted on their own.

A call that reads the head joins only a leader that has seen at least as new a block as it has
(router/seen_heads.py), and takes its answer only if that answer is known to be at or past the
block its own key saw (the leader's node may have lagged: routing past lagging nodes is best
effort); else it is attempted on its own. A key never gets an older head through another's call.

On the native executor the server also repeats forwards itself (router/forwards.py), and its
repeats of a call lead flights of their own, in the server. The two kinds of flight are one set
(`NativeFlights`): a pipeline call that would lead a flight a repeat leads follows the repeat
instead (its outcome lands when the repeat is settled), and while a pipeline call leads a
flight the server leaves the repeats of that call to the pipeline, which lets them join it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Protocol

from chainrouter.domain.enums import Scenario


@dataclass(frozen=True, slots=True)
class Landed:
    """How a leader's call ended, for the calls that joined it."""

    scenario: Scenario
    status: int
    member: bytes  # `"result":...` or `"error":...`, the JSON after the answer's id
    retry_after_s: float | None = None  # refused for limits: when a retry could succeed
    head: int | None = None  # the newest block the answer is known to reflect (None: unknown)


class Flight:
    """One call in flight and the calls that joined it. Its future is made only once a call
    joins: most calls are joined by none, and a future (a lock, a condition) costs microseconds."""

    __slots__ = ("_landed", "_outcome", "followers", "seen")

    def __init__(self, seen: int | None) -> None:
        self.seen = seen  # the newest block the leader's key had seen (None: none, or free tier)
        self.followers = 0
        self._outcome: concurrent.futures.Future[Landed | None] | None = None
        self._landed: tuple[Landed | None] | None = None  # set once the leader's call ended

    @property
    def outcome(self) -> concurrent.futures.Future[Landed | None]:
        """What the calls that joined wait for: the leader's outcome once it lands."""
        if self._outcome is None:
            future: concurrent.futures.Future[Landed | None] = concurrent.futures.Future()
            # Running: a follower cancelled while it waits (asyncio passes a cancellation on to
            # the future it wraps) cannot cancel the outcome the others wait for.
            future.set_running_or_notify_cancel()
            if self._landed is not None:
                future.set_result(self._landed[0])
            self._outcome = future
        return self._outcome

    def settle(self, outcome: Landed | None) -> None:
        if self._landed is not None:
            return  # landing twice is harmless
        self._landed = (outcome,)
        if self._outcome is not None:
            self._outcome.set_result(outcome)


class NativeFlights(Protocol):
    """The native server's side of the flights (its replay memo: `contract.REPLAY_MEMO`)."""

    def flying(self, *, flight: str) -> None: ...
    def landed(self, *, flight: str) -> None: ...
    def follow(self, *, flight: str, future: concurrent.futures.Future[Landed | None]) -> bool: ...


class Flights:
    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}
        # The native server's flights, when it repeats forwards (set by the runtime); None: none.
        self.native: NativeFlights | None = None
        self._lock = threading.Lock()  # only for the counts a scrape reads from another thread
        self.coalesced: dict[tuple[int, str], int] = {}  # (chain, method) -> calls that joined

    def __len__(self) -> int:
        return len(self._flights)

    def lead_or_join(self, key: str, seen: int | None, at_head: bool) -> tuple[Flight, bool]:
        """The flight of `key`, and whether this call leads it (a new flight) or joins it."""
        flight = self._flights.get(key)
        if flight is not None and (not at_head or _not_older(flight.seen, seen)):
            flight.followers += 1
            return flight, False
        native = self.native
        if native is not None and flight is None:
            # A repeat in the server leads it: its outcome, when settled (router/forwards.py).
            # The repeat's key may have seen less than this one: the answer's head is checked
            # when it lands (cache.py, `Coalesce`), as for any flight.
            outcome: concurrent.futures.Future[Landed | None] = concurrent.futures.Future()
            outcome.set_running_or_notify_cancel()
            if native.follow(flight=key, future=outcome):
                followed = Flight(seen)
                followed.followers = 1
                followed._outcome = outcome
                return followed, False
        flight = Flight(seen)
        if key not in self._flights:
            self._flights[key] = flight
            if native is not None:
                native.flying(flight=key)
        return flight, True

    def land(self, key: str, flight: Flight, outcome: Landed | None) -> None:
        """The leader's call ended with `outcome` (None: cut short, or nothing to share)."""
        if self._flights.get(key) is flight:
            del self._flights[key]
            if self.native is not None:
                self.native.landed(flight=key)
        flight.settle(outcome)

    def count(self, chain_id: int, method: str) -> None:
        stat = (chain_id, method)
        with self._lock:
            self.coalesced[stat] = self.coalesced.get(stat, 0) + 1


def _not_older(leader: int | None, follower: int | None) -> bool:
    return follower is None or (leader is not None and leader >= follower)
