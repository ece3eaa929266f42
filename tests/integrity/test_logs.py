"""Logs proven by their blocks' receipts (integrity/logs.py): a real eth_getLogs answer over a
range, or for one block by hash, is exactly the matching logs of the proven receipts; a log
dropped, added, changed or out of place, or blocks that are not the filter's range, fail."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chainrouter.integrity import ProofError, verify_logs
from tests.anvil import LOG_TOPIC
from tests.integrity.conftest import Chain

Blocks = list[tuple[dict[str, Any], list[dict[str, Any]]]]


def _range(chain: Chain) -> tuple[dict[str, Any], Blocks]:
    """A filter over the blocks up to the one with every type (anvil's blob block aside: its
    transactions are not provable), and those blocks with their receipts."""
    query = {"fromBlock": "0x0", "toBlock": hex(chain.several)}
    blocks = [(chain.block(n, full=True), chain.receipts(n)) for n in range(chain.several + 1)]
    return query, blocks


FILTERS: list[dict[str, Any]] = [
    {},
    {"topics": [LOG_TOPIC]},
    {"topics": [[LOG_TOPIC, "0x" + "00" * 32]]},
    {"topics": [None]},
    {"topics": [None, LOG_TOPIC]},  # more positions than the logs have topics: none match
    {"topics": ["0x" + "00" * 32]},
]


@pytest.mark.parametrize("extra", FILTERS)
def test_a_real_answer_over_a_range_is_exactly_the_matching_logs(
    chain: Chain, extra: dict[str, Any]
) -> None:
    query, blocks = _range(chain)
    answer = chain.read("eth_getLogs", [{**query, **extra}])
    verify_logs(blocks, {**query, **extra}, answer)


def test_a_filter_by_address_and_by_block_hash(chain: Chain) -> None:
    query, blocks = _range(chain)
    answer = chain.read("eth_getLogs", [query])
    assert len(answer) == 2
    by_address = {**query, "address": answer[1]["address"]}
    verify_logs(blocks, by_address, chain.read("eth_getLogs", [by_address]))
    by_hash = {"blockHash": blocks[-1][0]["hash"]}
    verify_logs(blocks[-1:], by_hash, chain.read("eth_getLogs", [by_hash]))
    with pytest.raises(ProofError, match="not the block given"):
        verify_logs(blocks[:1], by_hash, [])


def test_logs_dropped_added_changed_or_misplaced_fail(chain: Chain) -> None:
    query, blocks = _range(chain)
    answer = chain.read("eth_getLogs", [query])
    changes: list[list[dict[str, Any]]] = [[], answer[:1], [*answer, answer[0]], answer[::-1]]
    for name, value in (
        ("data", "0x00"),
        ("address", "0x" + "12" * 20),
        ("topics", []),
        ("logIndex", "0x9"),
        ("transactionHash", "0x" + "00" * 32),
        ("removed", True),
    ):
        changed = copy.deepcopy(answer)
        changed[0][name] = value
        changes.append(changed)
    for claimed in changes:
        with pytest.raises(ProofError):
            verify_logs(blocks, query, claimed)


def test_blocks_that_are_not_the_filters_range_prove_nothing(chain: Chain) -> None:
    query, blocks = _range(chain)
    answer = chain.read("eth_getLogs", [query])
    with pytest.raises(ProofError, match="range"):
        verify_logs(blocks[1:], query, answer)  # the range's first block left out
    with pytest.raises(ProofError, match="one range"):
        verify_logs([blocks[0], blocks[-1], blocks[1]], query, answer)
    with pytest.raises(ProofError, match="no blocks"):
        verify_logs([], query, answer)
