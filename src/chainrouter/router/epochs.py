"""Epochs: counters raised whenever something a decision read changes, so that the native server
drops the decision instead of checking anything again (docs/architecture.md, "Scoped
decisions"; native/src/epochs.rs).

A stage that reads something that can change records the slot of what it read and the slot's
value then (`CallContext.read_epoch`); the one place that changes the thing raises its slot. A
decision carries the slots its call read and stands while each holds its value. The slots:

- `SNAPSHOT`: the configuration (keys, domains, chains, routes, prices, plan standings);
- `node(id)`: a node's health as the pipeline reads it (cooldown, sync, its first check, what
  it is known to be able to answer);
- `chain_heads(id)`: the heads of a chain's nodes (a read of the head goes to a node at it);
- `chain_cache(id)`: a chain's cached answers (a purge, its finality going backwards);
- `chain_final(id)`: the chain's finalized block moving on (a block read as not final may be);
- `seen(key id)`: the newest block a key has seen (router/seen_heads.py).

Things are hashed into a fixed number of slots: the store never grows, and two things sharing a
slot only cost a decision made again. A slot's value is read before the thing itself, and raised
after it changed: a decision made in between reads the old value, and is dropped at first use.
"""

from __future__ import annotations

from typing import Protocol

SLOTS = 1 << 14
SNAPSHOT = 0


class EpochStore(Protocol):
    """Where the counters live: the native server's (`chainrouter._native.Epochs`, read
    without the GIL) or `MemoryEpochs`."""

    def bump(self, slot: int) -> None: ...
    def read(self, slot: int) -> int: ...


class MemoryEpochs:
    """The counters in a list, for an executor that applies no decisions (and the tests)."""

    def __init__(self, slots: int = SLOTS) -> None:
        self._values = [0] * slots

    def bump(self, slot: int) -> None:
        self._values[slot] += 1

    def read(self, slot: int) -> int:
        return self._values[slot]


def _slot(kind: int, thing: int) -> int:
    # Slot 0 is the snapshot's alone; the rest are shared by hashing.
    return 1 + hash((kind, thing)) % (SLOTS - 1)


_NODE, _CHAIN_HEADS, _CHAIN_CACHE, _CHAIN_FINAL, _SEEN = range(5)


def node(node_id: int) -> int:
    return _slot(_NODE, node_id)


def chain_heads(chain_id: int) -> int:
    return _slot(_CHAIN_HEADS, chain_id)


def chain_cache(chain_id: int) -> int:
    return _slot(_CHAIN_CACHE, chain_id)


def chain_final(chain_id: int) -> int:
    return _slot(_CHAIN_FINAL, chain_id)


def seen(key_id: int) -> int:
    return _slot(_SEEN, key_id)


class Epochs:
    """The router's epochs: what raises them and what reads them share this one object."""

    __slots__ = ("store",)

    def __init__(self, store: EpochStore | None = None) -> None:
        self.store: EpochStore = store if store is not None else MemoryEpochs()

    def bump(self, slot: int) -> None:
        self.store.bump(slot)

    def read(self, slot: int) -> int:
        return self.store.read(slot)
