"""The block headers the router trusts: the roots every proof is checked against
(router/proving.py fetches and checks them; docs/integrity.md, "Verified answers")."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any


class TrustedHeaders:
    """Headers the router trusts, newest use last, at most `max_headers` (oldest out first): the
    roots a proof is checked against. A header is trusted when its hash is keccak(RLP(header))
    and a node of another provider has the same hash at its number (`trust`), or when a trusted
    header's `parentHash` chain reaches it (`trust_ancestor`; `Prover._agreed` walks down to it).

    The trusted headers of a chain never contradict each other: a header newly agreed at N that
    another held header contradicts (another hash held at N, a header at N+1 naming another
    parent, one at N-1 that is not its parent) is a reorg, and the store keeps the agreed one.
    Then the old header at N goes, with every header above N that does not reach the new one by
    `parentHash` through held headers (one beyond a gap cannot be told apart, and goes too: it
    is fetched again when asked), and the header at N-1 if it is not the new one's parent.

    Headers whose hash was checked but that no other provider vouched for are held apart, up to
    `max_unvouched` (`hold`): once a trusted header names one as its parent, it is trusted in
    turn, and so on down, unless it contradicts a trusted header at its number."""

    def __init__(self, max_headers: int = 4096, max_unvouched: int = 256) -> None:
        self._max = max_headers
        self._by_hash: OrderedDict[tuple[int, str], Mapping[str, Any]] = OrderedDict()
        self._by_number: dict[tuple[int, int], str] = {}
        self._max_unvouched = max_unvouched
        self._unvouched: OrderedDict[tuple[int, str], Mapping[str, Any]] = OrderedDict()
        self.reorgs = 0  # contradictions resolved by a newer agreement (each drops headers)

    def __len__(self) -> int:
        return len(self._by_hash)

    def by_hash(self, chain_id: int, block_hash: str) -> Mapping[str, Any] | None:
        header = self._by_hash.get((chain_id, block_hash))
        if header is not None:
            self._by_hash.move_to_end((chain_id, block_hash))
        return header

    def by_number(self, chain_id: int, number: int) -> Mapping[str, Any] | None:
        block_hash = self._by_number.get((chain_id, number))
        return None if block_hash is None else self.by_hash(chain_id, block_hash)

    def unvouched(self, chain_id: int) -> list[Mapping[str, Any]]:
        """The headers held apart for the chain, oldest first (for tests and the docs' bound)."""
        return [header for (chain, _), header in self._unvouched.items() if chain == chain_id]

    def trust(self, chain_id: int, header: Mapping[str, Any]) -> None:
        """Trust `header`, its hash checked and agreed by two providers: it wins over any held
        header that contradicts it (a reorg, above), and its held unvouched ancestors follow."""
        block_hash, number = _hash_of(header), _number_of(header)
        held = self._by_number.get((chain_id, number))
        if (held is not None and held != block_hash) or self._contradicted(chain_id, header):
            self.reorgs += 1
            self._reorged(chain_id, header)
        self._add(chain_id, header)
        self._promote(chain_id, header)

    def trust_ancestor(
        self, chain_id: int, child: Mapping[str, Any], header: Mapping[str, Any]
    ) -> bool:
        """Trust `header` (its hash checked) as the parent of the trusted `child`; False, and
        nothing trusted, when it is not `child`'s parent, or a trusted header contradicts it
        (another at its number, or one below that is not its parent): a contradiction is
        settled by agreement, never by a chain."""
        number = _number_of(header)
        if (
            self._by_hash.get((chain_id, _hash_of(child))) is None
            or _number_of(child) != number + 1
            or str(child["parentHash"]).lower() != _hash_of(header)
        ):
            return False
        held = self._by_number.get((chain_id, number))
        if held is not None:
            return held == _hash_of(header)
        below = self._by_number.get((chain_id, number - 1))
        if below is not None and below != str(header["parentHash"]).lower():
            return False  # the trusted header below is not its parent: one of them is reorged
        self._add(chain_id, header)
        self._promote(chain_id, header)
        return True

    def hold(self, chain_id: int, header: Mapping[str, Any]) -> None:
        """Hold `header` (its hash checked, vouched for by no other provider) until a trusted
        header's chain reaches it; at once if the trusted header above it names it."""
        number = _number_of(header)
        child = self.by_number(chain_id, number + 1)
        if child is not None and self.trust_ancestor(chain_id, child, header):
            return
        key = (chain_id, _hash_of(header))
        self._unvouched[key] = header
        self._unvouched.move_to_end(key)
        while len(self._unvouched) > self._max_unvouched:
            self._unvouched.popitem(last=False)

    def _add(self, chain_id: int, header: Mapping[str, Any]) -> None:
        block_hash, number = _hash_of(header), _number_of(header)
        self._unvouched.pop((chain_id, block_hash), None)
        self._by_hash[(chain_id, block_hash)] = header
        self._by_hash.move_to_end((chain_id, block_hash))
        self._by_number[(chain_id, number)] = block_hash
        while len(self._by_hash) > self._max:
            (old_chain, old_hash), old = self._by_hash.popitem(last=False)
            at = (old_chain, _number_of(old))
            if self._by_number.get(at) == old_hash:  # not a later block of that number's
                del self._by_number[at]

    def _promote(self, chain_id: int, header: Mapping[str, Any]) -> None:
        """Trust the held unvouched ancestors `header`'s chain reaches, down to the first gap or
        contradiction (at most `max_unvouched`: each is taken out of the held ones)."""
        child = header
        while True:
            parent = self._unvouched.get((chain_id, str(child["parentHash"]).lower()))
            if parent is None or not self.trust_ancestor(chain_id, child, parent):
                return
            child = parent

    def _contradicted(self, chain_id: int, header: Mapping[str, Any]) -> bool:
        """Whether a held header next to `header` contradicts it."""
        number = _number_of(header)
        above = self.by_number(chain_id, number + 1)
        if above is not None and str(above["parentHash"]).lower() != _hash_of(header):
            return True
        below = self._by_number.get((chain_id, number - 1))
        return below is not None and below != str(header["parentHash"]).lower()

    def _reorged(self, chain_id: int, header: Mapping[str, Any]) -> None:
        """Drop what contradicts `header`, which is about to be trusted (the class's rule)."""
        number = _number_of(header)
        below = self._by_number.get((chain_id, number - 1))
        if below is not None and below != str(header["parentHash"]).lower():
            self._drop(chain_id, number - 1)
        self._drop(chain_id, number)
        above = sorted(n for c, n in self._by_number if c == chain_id and n > number)
        reached = {number: _hash_of(header)}
        for at in above:
            kept = self._by_hash[(chain_id, self._by_number[(chain_id, at)])]
            if reached.get(at - 1) == str(kept["parentHash"]).lower():
                reached[at] = _hash_of(kept)
            else:
                self._drop(chain_id, at)

    def _drop(self, chain_id: int, number: int) -> None:
        block_hash = self._by_number.pop((chain_id, number), None)
        if block_hash is not None:
            self._by_hash.pop((chain_id, block_hash), None)


def _hash_of(header: Mapping[str, Any]) -> str:
    return str(header["hash"]).lower()


def _number_of(header: Mapping[str, Any]) -> int:
    return int(str(header["number"]), 16)
