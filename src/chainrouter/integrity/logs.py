"""Logs proven by their blocks' receipts: an `eth_getLogs` answer is complete and true for a
range when it is exactly the logs, among the range's proven receipts, that the filter matches.

It costs the receipts (and full transactions) of every block in the range, so it pays for
ranges of final blocks that the cache will keep, or a single block by hash; the range's ends
are the caller's (tags resolved to numbers), and each block's hash is trusted as the caller
trusts it (two providers agreeing, or parent links: headers.py). Matching follows geth: an
address filter is one address or any of a list; a topic filter names, per position, any topic
(null or an empty list), one, or any of a list, and a log with fewer topics than positions
named does not match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chainrouter.integrity._codec import data, field, listed, mapping, quantity, same_hex
from chainrouter.integrity.errors import ProofError
from chainrouter.integrity.receipts import verify_receipts

_CHECKED = ("logIndex", "blockHash", "blockNumber", "transactionHash", "transactionIndex")


def _one_of(value: Any, what: str) -> list[bytes] | None:
    """A filter position: None for any, else the values it allows."""
    if value is None or value == []:
        return None
    values = value if isinstance(value, list) else [value]
    return [data(item, what) for item in values]


def matches(log: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether `log` is one the filter `query` asks for."""
    addresses = _one_of(query.get("address"), "the filter's address")
    if addresses is not None and data(log["address"], "address", 20) not in addresses:
        return False
    wanted = listed(query.get("topics") or [], "the filter's topics")
    topics = [data(topic, "a topic", 32) for topic in log["topics"]]
    if len(wanted) > len(topics):
        return False
    for position, allowed in enumerate(wanted):
        choices = _one_of(allowed, "a filter topic")
        if choices is not None and topics[position] not in choices:
            return False
    return True


def verify_logs(
    blocks: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]],
    query: Mapping[str, Any],
    claimed: Any,
) -> None:
    """Judge an eth_getLogs answer against every block of its range, each given with its
    receipts (`block` with full transactions, as verify_receipts proves them): the answer must
    be exactly the matching logs, in order, each in its place."""
    query = mapping(query, "the filter")
    if not blocks:
        raise ProofError("no blocks to prove the logs by")
    numbers = [quantity(field(block, "number", "a block"), "number") for block, _ in blocks]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        raise ProofError("the blocks are not one range, in order")
    if "blockHash" in query:
        if len(blocks) != 1 or not same_hex(blocks[0][0].get("hash"), query["blockHash"]):
            raise ProofError("the filter's block is not the block given")
    else:
        first = quantity(field(query, "fromBlock", "the filter"), "fromBlock")
        last = quantity(field(query, "toBlock", "the filter"), "toBlock")
        if (first, last) != (numbers[0], numbers[-1]):
            raise ProofError("the blocks given are not the filter's range")
    expected: list[Mapping[str, Any]] = []
    for block, receipts in blocks:
        verify_receipts(block, receipts)
        expected += [log for r in receipts for log in r["logs"] if matches(log, query)]
    answered = listed(claimed, "the logs answered")
    if len(answered) != len(expected):
        raise ProofError(f"{len(answered)} logs answered where the blocks hold {len(expected)}")
    for index, (log, proven) in enumerate(zip(answered, expected, strict=True)):
        what = f"log {index} answered"
        log = mapping(log, what)
        if data(field(log, "address", what), "address", 20) != data(proven["address"], "a", 20):
            raise ProofError(f"{what} is of another address")
        topics = listed(field(log, "topics", what), "topics")
        if [data(t, "a topic", 32) for t in topics] != [
            data(t, "a topic", 32) for t in proven["topics"]
        ]:
            raise ProofError(f"{what} carries other topics")
        if data(field(log, "data", what), "data") != data(proven["data"], "data"):
            raise ProofError(f"{what} carries other data")
        for name in _CHECKED:
            if not same_hex(field(log, name, what), proven.get(name)):
                raise ProofError(f"{what} names another {name}")
        if log.get("removed", False) is not False:
            raise ProofError(f"{what} is marked removed")
