"""One chain feed's subscribers, and what each gets of what the feed sees, without I/O: every
`newHeads` subscriber each new head; every `logs` subscriber each log of a new block its filter
matches, and, after a reorg, each log of an orphaned block again with `removed: true`, newest
block first, before the new branch's (as Ethereum nodes send them).

A subscriber's `Sink` takes a message or refuses it (its client's queue is full); the session
behind it then closes that client alone (docs/websocket.md), so no client waits on another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from chainrouter.router.ws.heads import Head
from chainrouter.router.ws.protocol import LogFilter, SubscriptionKind, notification


class Sink(Protocol):
    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        """Queue `message` (a notification of a `kind` subscription) for the client; False
        when its queue is full."""
        ...

    def too_slow(self) -> None:
        """It refused a message: close its client (it alone)."""
        ...


@dataclass(eq=False, slots=True)
class Subscription:
    subscription_id: str
    kind: SubscriptionKind
    sink: Sink
    log_filter: LogFilter | None = None


@dataclass(slots=True)
class Fanout:
    """The subscribers, by kind. `logs` subscribers are also indexed by the addresses their
    filters name, so that a log is matched against the filters that name its address and the
    ones that name none, never against every filter: the work per log follows what it
    matches, not how many filters are held (a customer's thousands of filters that never
    match cost the event loop nothing per log)."""

    _by_id: dict[str, Subscription] = field(default_factory=dict)
    _heads: dict[str, Subscription] = field(default_factory=dict)
    _logs: dict[str, Subscription] = field(default_factory=dict)
    _pending: dict[str, Subscription] = field(default_factory=dict)
    _any_address: dict[str, Subscription] = field(default_factory=dict)  # logs of any address
    _by_address: dict[str, dict[str, Subscription]] = field(default_factory=dict)

    def add(self, subscription: Subscription) -> None:
        subscription_id = subscription.subscription_id
        self._by_id[subscription_id] = subscription
        self._of(subscription.kind)[subscription_id] = subscription
        if subscription.kind is SubscriptionKind.LOGS:
            addresses = _addresses(subscription)
            if addresses is None:
                self._any_address[subscription_id] = subscription
            else:
                for address in addresses:
                    self._by_address.setdefault(address, {})[subscription_id] = subscription

    def remove(self, subscription_id: str) -> Subscription | None:
        found = self._by_id.pop(subscription_id, None)
        if found is None:
            return None
        del self._of(found.kind)[subscription_id]
        if found.kind is SubscriptionKind.LOGS:
            addresses = _addresses(found)
            if addresses is None:
                del self._any_address[subscription_id]
            else:
                for address in addresses:
                    named = self._by_address[address]
                    del named[subscription_id]
                    if not named:
                        del self._by_address[address]
        return found

    def remove_sink(self, sink: Sink) -> list[Subscription]:
        """Every subscription of one client (it is gone)."""
        gone = [s for s in self._by_id.values() if s.sink is sink]
        for subscription in gone:
            self.remove(subscription.subscription_id)
        return gone

    def __len__(self) -> int:
        return len(self._by_id)

    def wants(self, kind: SubscriptionKind) -> bool:
        return bool(self._of(kind))

    def _of(self, kind: SubscriptionKind) -> dict[str, Subscription]:
        if kind is SubscriptionKind.NEW_HEADS:
            return self._heads
        if kind is SubscriptionKind.LOGS:
            return self._logs
        return self._pending

    def heads(self, heads: Iterable[Head]) -> list[Sink]:
        """Each head to every `newHeads` subscriber; the sinks that refused one."""
        refused: list[Sink] = []
        for head in heads:
            for subscription in tuple(self._heads.values()):
                self._offer(subscription, head.header, refused)
        return refused

    def logs(self, logs: Sequence[dict[str, Any]], *, removed: bool = False) -> list[Sink]:
        """Each log (of one block, as the node gave them) to every `logs` subscriber whose
        filter matches; with `removed`, marked so (a reorg orphaned its block)."""
        refused: list[Sink] = []
        for log in logs:
            address = log.get("address")
            named = self._by_address.get(address.lower()) if isinstance(address, str) else None
            candidates = [*self._any_address.values(), *(named.values() if named else ())]
            matching = [s for s in candidates if s.log_filter is None or s.log_filter.matches(log)]
            if not matching:
                continue
            encoded = orjson.dumps({**log, "removed": True} if removed else log)
            for subscription in matching:
                self._offer(subscription, encoded, refused)
        return refused

    def pending(self, transaction: bytes) -> list[Sink]:
        refused: list[Sink] = []
        for subscription in tuple(self._pending.values()):
            self._offer(subscription, transaction, refused)
        return refused

    @staticmethod
    def _offer(subscription: Subscription, result: bytes, refused: list[Sink]) -> None:
        message = notification(subscription.subscription_id, result)
        if not subscription.sink.offer(message, subscription.kind):
            refused.append(subscription.sink)


def _addresses(subscription: Subscription) -> frozenset[str] | None:
    log_filter = subscription.log_filter
    return None if log_filter is None else log_filter.addresses
