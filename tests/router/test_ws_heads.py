"""Following a chain's head (router/ws/heads.py): heads announced in order extend it; a gap is
filled by number, a reorg walked back by hash to the common ancestor, the orphaned blocks given
newest first; known and stale headers change nothing. A property test: whatever order and
duplication the headers of any sequence of forks arrive in, the blocks announced, minus the
ones removed, are exactly the final branch, each once, in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.router.ws.heads import Advance, FetchByHash, FetchByNumber, Head, HeadChain


class Blocks:
    """A block tree: each block named by (branch, number), its parent's hash known."""

    def __init__(self) -> None:
        self.by_hash: dict[str, Head] = {}

    def block(self, number: int, branch: str = "a", parent_branch: str | None = None) -> Head:
        parent = f"0x{parent_branch or branch}{number - 1}"
        head = Head(number, f"0x{branch}{number}", parent)
        self.by_hash[head.hash] = head
        return head

    def chain(self, first: int, last: int, branch: str = "a", fork_from: str = "a") -> list[Head]:
        return [
            self.block(n, branch, fork_from if n == first else branch)
            for n in range(first, last + 1)
        ]


def _serve(
    chain: HeadChain, blocks: dict[int, Head], by_hash: dict[str, Head], head: Head
) -> list[Advance]:
    """Offer `head` as the hub does: answer every fetch (from `blocks` by number, `by_hash` by
    hash) and offer the header again; the advances, in order."""
    advances: list[Advance] = []
    step = chain.offer(head)
    for _ in range(1000):  # a chain that keeps asking for what it was given would loop here
        if step is None:
            break
        if isinstance(step, Advance):
            advances.append(step)
            break
        if isinstance(step, FetchByNumber):
            for number in range(step.first, step.last + 1):
                advances.extend(_serve(chain, blocks, by_hash, blocks[number]))
        else:
            assert isinstance(step, FetchByHash)
            advances.extend(_serve(chain, blocks, by_hash, by_hash[step.hash]))
        step = chain.offer(head)
    else:
        raise AssertionError(f"no end to what offering {head} asks for")
    return advances


def _numbers(heads: tuple[Head, ...]) -> list[str]:
    return [h.hash for h in heads]


def test_heads_in_order_extend_the_chain_and_a_known_one_changes_nothing() -> None:
    tree = Blocks()
    chain = HeadChain()
    first, second = tree.chain(1, 2)
    assert chain.offer(first) == Advance((first,), restarted=True)
    assert chain.offer(second) == Advance((second,))
    assert chain.offer(second) is None
    assert chain.offer(first) is None
    assert chain.tip == second


def test_a_gap_is_filled_by_number_then_the_header_extends_the_chain() -> None:
    tree = Blocks()
    blocks = {h.number: h for h in tree.chain(1, 6)}
    chain = HeadChain()
    chain.offer(blocks[1])
    assert chain.offer(blocks[5]) == FetchByNumber(2, 4)
    advances = _serve(chain, blocks, tree.by_hash, blocks[5])
    assert [h.number for a in advances for h in a.added] == [2, 3, 4, 5]
    assert all(not a.removed for a in advances)


def test_a_reorg_is_walked_back_to_the_common_ancestor_and_the_orphans_given_newest_first() -> None:
    tree = Blocks()
    canonical = {h.number: h for h in tree.chain(1, 5)}
    chain = HeadChain()
    for number in range(1, 6):
        _serve(chain, canonical, tree.by_hash, canonical[number])
    fork = {h.number: h for h in tree.chain(4, 6, branch="b", fork_from="a")}  # 4b, 5b, 6b on 3a
    assert chain.offer(fork[6]) == FetchByHash("0xb5")
    assert chain.offer(fork[5]) == FetchByHash("0xb4")
    step = chain.offer(fork[4])
    assert isinstance(step, Advance)
    assert _numbers(step.removed) == ["0xa5", "0xa4"]
    assert _numbers(step.added) == ["0xb4", "0xb5", "0xb6"]
    assert chain.tip == fork[6]


def test_a_reorg_of_every_block_a_young_chain_holds_ends_its_walk_at_the_oldest() -> None:
    """A feed that started at block 9 sees blocks 9 and 10 replaced: the walk stops at 9' (what
    lies below was never announced) instead of asking for ever older blocks down to genesis."""
    tree = Blocks()
    chain = HeadChain()
    for head in tree.chain(9, 10):
        chain.offer(head)
    fork = {h.number: h for h in tree.chain(9, 10, branch="b", fork_from="a")}
    assert chain.offer(fork[9]) is None  # below the tip: a lagging node's view, for now
    assert chain.offer(fork[10]) == FetchByHash("0xb9")
    step = chain.offer(fork[9])
    assert isinstance(step, Advance)
    assert _numbers(step.removed) == ["0xa10", "0xa9"]
    assert _numbers(step.added) == ["0xb9", "0xb10"]
    assert not step.restarted


def test_a_seeded_chain_announces_a_reorg_below_its_first_head_from_the_real_fork() -> None:
    """A feed that started at block 10 read blocks 9 to 6 unannounced: when 9 and 10 are
    replaced, subscribers get 9' and 10' (as the node announces them) and only 10 as removed."""
    tree = Blocks()
    old = {h.number: h for h in tree.chain(5, 10)}
    chain = HeadChain()
    chain.offer(old[10])
    assert chain.seed([old[9], old[8], old[7], old[6]]) == 4
    fork = {h.number: h for h in tree.chain(9, 10, branch="b", fork_from="a")}
    assert chain.offer(fork[9]) is None
    assert chain.offer(fork[10]) == FetchByHash("0xb9")
    step = chain.offer(fork[9])
    assert isinstance(step, Advance)
    assert _numbers(step.removed) == ["0xa10"]  # 9 was never announced
    assert _numbers(step.added) == ["0xb9", "0xb10"]


def test_seeding_stops_at_a_block_that_is_not_the_parent_of_the_one_above() -> None:
    tree = Blocks()
    chain = HeadChain()
    assert chain.seed([tree.block(4)]) == 0  # nothing held yet
    chain.offer(tree.block(5))
    stranger = tree.block(3, "x")
    assert chain.seed([tree.block(4), stranger, tree.block(2)]) == 1


def test_a_competing_head_at_the_same_height_replaces_the_tip() -> None:
    tree = Blocks()
    chain = HeadChain()
    for head in tree.chain(1, 3):
        chain.offer(head)
    rival = tree.block(3, "b", "a")
    step = chain.offer(rival)
    assert step == Advance((rival,), (tree.by_hash["0xa3"],))


def test_a_lagging_nodes_fork_below_the_tip_is_ignored_until_it_reaches_the_tip() -> None:
    tree = Blocks()
    chain = HeadChain()
    for head in tree.chain(1, 5):
        chain.offer(head)
    assert chain.offer(tree.block(4, "b", "a")) is None
    assert chain.tip is not None
    assert chain.tip.hash == "0xa5"


def test_a_gap_wider_than_the_bound_or_a_reorg_deeper_than_the_memory_restarts() -> None:
    tree = Blocks()
    chain = HeadChain(depth=4, max_gap=4)
    for head in tree.chain(1, 3):
        chain.offer(head)
    far = tree.block(20)
    assert chain.offer(far) == Advance((far,), restarted=True)
    for head in tree.chain(21, 30):
        chain.offer(head)
    deep = tree.chain(24, 31, branch="c", fork_from="a")
    by_hash = tree.by_hash
    step = chain.offer(deep[-1])
    while isinstance(step, FetchByHash):
        step = chain.offer(by_hash[step.hash])
    assert isinstance(step, Advance)
    assert step.restarted


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=6)),
        min_size=1,
        max_size=6,
    ),
    st.randoms(use_true_random=False),
    st.integers(min_value=0, max_value=9),
    st.booleans(),
)
def test_whatever_the_forks_the_announced_minus_the_removed_is_the_final_branch(
    forks: list[tuple[int, int]], random: object, joined: int, seeded: bool
) -> None:
    """Each fork rewinds `back` blocks of the current branch and grows `grow` new ones (a
    strictly longer branch: the node's choice). Its headers arrive shuffled, some twice, as a
    node that reconnects repeats them; the hub serves each in turn. The chain hears of the first
    branch from block `joined + 1` on (a feed started late), so forks may reach below it; it may
    be `seeded` with the blocks below, which are then never announced nor removed."""
    import random as random_module

    assert isinstance(random, random_module.Random)
    tree = Blocks()
    current = tree.chain(1, 10, branch="r0")
    chain = HeadChain()
    announced: list[str] = []

    def deliver(heads: list[Head]) -> None:
        blocks = {h.number: h for h in current}
        for head in heads:
            for advance in _serve(chain, blocks, tree.by_hash, head):
                for removed in advance.removed:
                    assert announced[-1] == removed.hash  # newest first, as announced
                    announced.pop()
                if advance.restarted:
                    announced.clear()
                announced.extend(h.hash for h in advance.added)

    deliver(current[joined:])
    if seeded:  # the feed read the blocks below its first head, announcing none
        chain.seed(list(reversed(current[:joined])))
    for index, (back, grow) in enumerate(forks, start=1):
        keep = current[: max(1, len(current) - back)]
        start = keep[-1].number + 1
        branch = f"r{index}"
        new = [tree.block(start, branch, keep[-1].hash[2:].rstrip("0123456789"))]
        new[0] = Head(start, f"0x{branch}{start}", keep[-1].hash)
        tree.by_hash[new[0].hash] = new[0]
        for number in range(start + 1, start + back + grow):
            new.append(tree.block(number, branch))
        current = keep + new
        headers = list(new) + random.sample(new, k=min(2, len(new)))
        random.shuffle(headers)
        # The node always ends by announcing its tip.
        deliver([*headers, new[-1]])
    assert chain.tip == current[-1]
    assert announced == [h.hash for h in current][-len(announced) :]
    assert len(announced) == len(set(announced))
