"""A bounded memo of what a stage found for a request, forgotten with the snapshot it came from."""

from __future__ import annotations

from typing import Generic, TypeVar

from chainrouter.domain.snapshot import RouterSnapshot

MEMO_SIZE = 4096
K = TypeVar("K")
V = TypeVar("V")


class PerSnapshot(Generic[K, V]):
    """Values kept for the snapshot they were found in, at most `size` of them.

    A new snapshot (a revoked key, a changed domain list) empties it, so nothing outlives the
    configuration it was checked against. Callers keep only successes in it, under keys of bounded
    length: what a stranger sends can neither grow it nor be remembered as passed.
    """

    def __init__(self, size: int | None = None) -> None:
        self._size = MEMO_SIZE if size is None else size
        self._snapshot: RouterSnapshot | None = None
        self._values: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, snapshot: RouterSnapshot, key: K) -> V | None:
        if snapshot is not self._snapshot:
            return None
        return self._values.get(key)

    def put(self, snapshot: RouterSnapshot, key: K, value: V) -> None:
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self._values = {}
        elif len(self._values) >= self._size:
            self._values.clear()
        self._values[key] = value
