"""What holding WebSocket subscriptions open costs (design notes, "Bounds"): the operator's price
per subscription and hour (`CHAINROUTER_WS_SUBSCRIPTION_HOLDING_CREDITS_PER_HOUR`), charged pro
rata for the time each one is held, so that a filter that never matches is not free forever.

Exact: what a connection's subscriptions of one kind owe is kept as price x nanoseconds held
(nano-credits x ns), and each charge takes the whole nano-credits of it, leaving the rest below
one nano-credit for the next; whatever the steps, a kind's charges add up to
floor(price x time held / 1 h), never more, and never charged twice. What is below one
nano-credit when the connection closes is not charged. Sans-IO: the caller says what time it is
(`time.monotonic_ns`); the session charges what `due` gives (router/ws/session.py).
"""

from __future__ import annotations

HOUR_NS = 3600 * 10**9


class Holding:
    """One connection's subscriptions held, by kind, and what their time owes."""

    def __init__(self, nano_per_hour: int, now_ns: int) -> None:
        self._price = nano_per_hour
        self._open: dict[str, int] = {}  # kind -> subscriptions held now
        self._owed: dict[str, int] = {}  # kind -> price x ns held, not yet charged
        self._since = now_ns  # when `_owed` was last brought up to date

    def opened(self, kind: str, now_ns: int) -> None:
        self._accrue(now_ns)
        self._open[kind] = self._open.get(kind, 0) + 1

    def closed(self, kind: str, now_ns: int) -> None:
        self._accrue(now_ns)
        left = self._open.get(kind, 0) - 1
        if left > 0:
            self._open[kind] = left
        else:
            self._open.pop(kind, None)

    def due(self, now_ns: int) -> list[tuple[str, int]]:
        """What the time held up to `now_ns` owes and was not charged yet, in whole
        nano-credits by kind; taken as said (the caller charges it)."""
        self._accrue(now_ns)
        charges = []
        for kind, owed in list(self._owed.items()):
            nano, rest = divmod(owed, HOUR_NS)
            if nano:
                charges.append((kind, nano))
            if rest or kind in self._open:
                self._owed[kind] = rest
            else:
                del self._owed[kind]
        return charges

    @property
    def held(self) -> int:
        """Subscriptions held now."""
        return sum(self._open.values())

    def _accrue(self, now_ns: int) -> None:
        elapsed = now_ns - self._since
        if elapsed <= 0:
            return
        self._since = now_ns
        for kind, count in self._open.items():
            self._owed[kind] = self._owed.get(kind, 0) + count * elapsed * self._price
