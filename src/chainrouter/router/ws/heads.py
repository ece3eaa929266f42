"""Following one chain's canonical head from the block headers WebSocket nodes announce, whatever
node they come from and in whatever order a failover brings them (design notes, "WebSocket API":
one head feed per chain, everything derived from it).

`HeadChain` does no I/O. Offered a header, it answers what the hub must do next:
- `Advance`: these heads extend the chain, in order (announce them; read their logs), and
  these were orphaned by a reorg, newest first (send their logs again, `removed: true`);
- `FetchByNumber`: a gap (a node missed heads, or a new node is ahead): fetch the blocks
  between, in order, and offer them before the header again;
- `FetchByHash`: the header does not extend the chain: fetch its parent and offer it first, and
  so on back until a block the chain holds (the common ancestor), then the header again;
- nothing (`None`): a header already known, one below the tip on another branch (a lagging
  node's; followed once its branch reaches the tip's height), or too old to matter.

The hub offers one header at a time and answers each fetch before it offers the next header.

The chain remembers the last `depth` blocks: a reorg deeper than that, or a gap wider than
`max_gap`, restarts it from the new header (`Advance(restarted=True)`), since what the
subscribers were told can no longer be corrected block by block. After a (re)start the hub may
`seed` it with the blocks below its first head, announced to nobody, so that a reorg reaching
below that head is walked back to the real fork.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Head:
    number: int
    hash: str  # 0x-prefixed, lower case
    parent_hash: str
    header: bytes = b""  # the header as the node sent it: what newHeads subscribers receive


@dataclass(frozen=True, slots=True)
class Advance:
    added: tuple[Head, ...]  # oldest first
    removed: tuple[Head, ...] = ()  # orphaned, newest first
    restarted: bool = False  # the chain lost track: what came before cannot be corrected


@dataclass(frozen=True, slots=True)
class FetchByNumber:
    first: int
    last: int  # inclusive


@dataclass(frozen=True, slots=True)
class FetchByHash:
    hash: str


Step = Advance | FetchByNumber | FetchByHash | None


@dataclass(slots=True)
class HeadChain:
    depth: int = 128  # blocks remembered: the deepest reorg corrected block by block
    max_gap: int = 128  # the widest gap filled block by block
    _by_number: dict[int, Head] = field(default_factory=dict)
    _tip: Head | None = None
    # A reorg being walked back: the headers fetched by hash so far, newest first.
    _pending: list[Head] = field(default_factory=list)
    _seeded: set[str] = field(default_factory=set)  # held but never announced (`seed`)

    @property
    def tip(self) -> Head | None:
        return self._tip

    def holds(self, block_hash: str) -> bool:
        return any(head.hash == block_hash for head in self._by_number.values())

    def offer(self, head: Head) -> Step:
        tip = self._tip
        if tip is None:
            return self._restart(head)
        known = self._by_number.get(head.number)
        if known is not None and known.hash == head.hash:
            return None  # a header already on the chain (a second node, a re-announcement)
        if head.number <= tip.number - self.depth:
            return None  # older than anything a subscriber could be corrected about
        if head.number < tip.number and not self._pending:
            # A fork below the tip (a lagging node's view): the chain moves to it only once it
            # reaches the tip's height, as the node itself will then announce.
            return None
        if head.number == tip.number + 1 and head.parent_hash == tip.hash:
            self._pending.clear()
            self._append(head)
            return Advance((head,))
        if head.number > tip.number + 1 and not self._pending:
            if head.number - tip.number > self.max_gap:
                return self._restart(head)
            return FetchByNumber(tip.number + 1, head.number - 1)
        return self._walk_back(head)

    def _walk_back(self, head: Head) -> Step:
        """The header does not extend the tip: find where its ancestry meets the chain."""
        if not self._pending or self._pending[-1].parent_hash == head.hash:
            self._pending.append(head)
        else:
            self._pending = [head]  # another branch than the one being walked: start over
        oldest = self._pending[-1]
        parent = self._by_number.get(oldest.number - 1)
        if parent is not None and parent.hash == oldest.parent_hash:
            return self._switch(oldest.number)
        if oldest.number - 1 <= (self._tip.number if self._tip else 0) - self.depth:
            newest = self._pending[0]
            self._pending.clear()
            return self._restart(newest)
        if oldest.number <= min(self._by_number):
            # The branch replaces every block the chain holds (a chain younger than `depth`,
            # such as a feed just started): the common ancestor is older than anything a
            # subscriber was told of, so the walk ends here rather than at the genesis block.
            return self._switch(oldest.number)
        return FetchByHash(oldest.parent_hash)

    def _switch(self, fork: int) -> Advance:
        """Make the walked-back branch canonical from block `fork` on."""
        assert self._tip is not None
        popped = [self._by_number.pop(n, None) for n in range(self._tip.number, fork - 1, -1)]
        # Seeded blocks were never announced: nobody is to be told they are gone.
        removed = tuple(h for h in popped if h is not None and h.hash not in self._seeded)
        self._seeded.difference_update(h.hash for h in popped if h is not None)
        added = tuple(reversed(self._pending))
        self._pending.clear()
        for head in added:
            self._append(head)
        return Advance(added, removed)

    def seed(self, ancestors: list[Head]) -> int:
        """Remember blocks below the oldest the chain holds, newest first, as far as each is the
        parent of the one above: history announced to nobody (a feed just started), so that a
        reorg reaching below its first head is walked back to the real common ancestor and the
        new branch announced from there, as a node does. How many were taken."""
        if not self._by_number:
            return 0
        above = self._by_number[min(self._by_number)]
        taken = 0
        for head in ancestors:
            floor = self._tip.number - self.depth if self._tip else 0
            if head.number != above.number - 1 or head.hash != above.parent_hash:
                break
            if head.number <= floor:
                break
            self._by_number[head.number] = head
            self._seeded.add(head.hash)
            above = head
            taken += 1
        return taken

    def forget_from(self, head: Head) -> None:
        """`head`, and what came after it, were not delivered (the node failed while its logs
        were read): off the chain, so that the next node's catch-up announces them again."""
        tip = self._tip
        if tip is None or self._by_number.get(head.number) is not head:
            return
        for number in range(tip.number, head.number - 1, -1):
            dropped = self._by_number.pop(number, None)
            if dropped is not None:
                self._seeded.discard(dropped.hash)
        self._tip = self._by_number.get(head.number - 1)
        self._pending.clear()

    def _append(self, head: Head) -> None:
        self._by_number[head.number] = head
        self._tip = head
        dropped = self._by_number.pop(head.number - self.depth, None)
        if dropped is not None:
            self._seeded.discard(dropped.hash)

    def _restart(self, head: Head) -> Advance:
        self._seeded.clear()
        self._by_number = {head.number: head}
        self._tip = head
        self._pending.clear()
        return Advance((head,), restarted=True)
