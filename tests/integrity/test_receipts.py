"""Receipts proven against the block's receiptsRoot (integrity/receipts.py): the receipts of
real blocks with transactions of every type (a reverted one, one that logs, one that creates a
contract) make the root, and each eth_getTransactionReceipt answer checks against them and the
block's transactions; a changed status, log, gas figure, sender, recipient, created contract,
index or order fails."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from chainrouter.integrity import ProofError, receipts_root, verify_receipt, verify_receipts
from tests.anvil import LOG_TOPIC
from tests.integrity.conftest import Chain

Receipts = list[dict[str, Any]]


def test_receipts_of_every_type_make_the_blocks_receipts_root(chain: Chain) -> None:
    for number in (chain.several, chain.blob, chain.blob + 1):
        block, receipts = chain.block(number), chain.receipts(number)
        assert receipts_root(receipts).hex() == block["receiptsRoot"][2:]
    for number in (chain.several, chain.blob + 1):  # anvil's blob block: test_transactions.py
        verify_receipts(chain.block(number, full=True), chain.receipts(number))
    several = chain.receipts(chain.several)
    assert {r["type"] for r in several} | {chain.receipts(chain.blob)[0]["type"]} == {
        "0x0",
        "0x1",
        "0x2",
        "0x3",
        "0x4",
    }
    assert {r["status"] for r in several} == {"0x0", "0x1"}
    assert any(log["topics"] == [LOG_TOPIC] for r in several for log in r["logs"])


def test_each_receipt_answer_checks_against_the_blocks_receipts(chain: Chain) -> None:
    block, receipts = chain.block(chain.several, full=True), chain.receipts(chain.several)
    for receipt in receipts:
        tx_hash = receipt["transactionHash"]
        claimed = chain.read("eth_getTransactionReceipt", [tx_hash])
        verify_receipt(block, receipts, tx_hash, claimed)


def _status(receipt: dict[str, Any]) -> None:
    receipt["status"] = "0x0" if receipt["status"] == "0x1" else "0x1"


def _log_data(receipt: dict[str, Any]) -> None:
    receipt["logs"][0]["data"] = "0x" + "00" * 32


def _log_topic(receipt: dict[str, Any]) -> None:
    receipt["logs"][0]["topics"] = ["0x" + "00" * 32]


def _log_dropped(receipt: dict[str, Any]) -> None:
    receipt["logs"] = []


def _gas_used(receipt: dict[str, Any]) -> None:
    receipt["gasUsed"] = hex(int(receipt["gasUsed"], 16) - 1)


def _cumulative(receipt: dict[str, Any]) -> None:
    receipt["cumulativeGasUsed"] = hex(int(receipt["cumulativeGasUsed"], 16) + 1)


def _log_index(receipt: dict[str, Any]) -> None:
    receipt["logs"][0]["logIndex"] = hex(int(receipt["logs"][0]["logIndex"], 16) + 1)


def _type(receipt: dict[str, Any]) -> None:
    receipt["type"] = "0x1" if receipt["type"] == "0x2" else "0x2"


def _block(receipt: dict[str, Any]) -> None:
    receipt["blockHash"] = "0x" + "00" * 32


def _bloom(receipt: dict[str, Any]) -> None:
    receipt["logsBloom"] = "0x" + "ff" * 256


def _sender(receipt: dict[str, Any]) -> None:
    receipt["from"] = "0x" + "12" * 20


def _recipient(receipt: dict[str, Any]) -> None:
    receipt["to"] = "0x" + "12" * 20


def _created(receipt: dict[str, Any]) -> None:
    receipt["contractAddress"] = "0x" + "12" * 20


def _price(receipt: dict[str, Any]) -> None:
    receipt["effectiveGasPrice"] = hex(int(receipt["effectiveGasPrice"], 16) + 1)


def _transaction(receipt: dict[str, Any]) -> None:
    receipt["transactionHash"] = "0x" + "00" * 32


CHANGES: list[Callable[[dict[str, Any]], None]] = [
    _status,
    _log_data,
    _log_topic,
    _log_dropped,
    _gas_used,
    _cumulative,
    _log_index,
    _type,
    _block,
    _bloom,
    _sender,
    _recipient,
    _created,
    _price,
    _transaction,
]


def _logging(receipts: Receipts) -> int:
    return next(index for index, r in enumerate(receipts) if r["logs"])


@pytest.mark.parametrize("change", CHANGES, ids=lambda change: change.__name__.strip("_"))
def test_a_changed_receipt_fails_in_the_list_and_alone(
    chain: Chain, change: Callable[[dict[str, Any]], None]
) -> None:
    block, receipts = chain.block(chain.several, full=True), chain.receipts(chain.several)
    index = _logging(receipts)
    assert receipts[index]["contractAddress"] is not None
    changed = copy.deepcopy(receipts)
    change(changed[index])
    with pytest.raises(ProofError):
        verify_receipts(block, changed)
    tx_hash = receipts[index]["transactionHash"]
    with pytest.raises(ProofError):
        verify_receipt(block, receipts, tx_hash, changed[index])
    verify_receipt(block, receipts, tx_hash, receipts[index])


def test_receipts_out_of_order_or_missing_fail(chain: Chain) -> None:
    block, receipts = chain.block(chain.several, full=True), chain.receipts(chain.several)
    with pytest.raises(ProofError):
        verify_receipts(block, [receipts[1], receipts[0], *receipts[2:]])
    with pytest.raises(ProofError, match="receipts for"):
        verify_receipts(block, receipts[:-1])
    with pytest.raises(ProofError):
        verify_receipts(chain.block(chain.blob + 1, full=True), receipts)  # another block's


def test_null_for_a_receipt_the_block_holds_fails(chain: Chain) -> None:
    block, receipts = chain.block(chain.several, full=True), chain.receipts(chain.several)
    tx_hash = receipts[0]["transactionHash"]
    with pytest.raises(ProofError, match="unknown"):
        verify_receipt(block, receipts, tx_hash, None)
    with pytest.raises(ProofError, match="no receipt"):
        verify_receipt(block, receipts, "0x" + "00" * 32, receipts[0])


def test_with_the_transactions_hashes_only_the_root_and_places_are_proven(chain: Chain) -> None:
    """A block fetched without its transactions binds no receipt to its transaction beyond the
    block's list of hashes, which its header does not commit to: what a receipt repeats of its
    transaction is checked only with the full transactions."""
    hashes_only, receipts = chain.block(chain.several), chain.receipts(chain.several)
    verify_receipts(hashes_only, receipts)
    tx_hash = receipts[0]["transactionHash"]
    verify_receipt(hashes_only, receipts, tx_hash, receipts[0])
    with pytest.raises(ProofError):
        verify_receipt(hashes_only, receipts, tx_hash, {**receipts[0], "status": "0x0"})
    other_sender = {**receipts[0], "from": "0x" + "12" * 20}
    verify_receipt(hashes_only, receipts, tx_hash, other_sender)
    with pytest.raises(ProofError, match="sender"):
        verify_receipt(chain.block(chain.several, full=True), receipts, tx_hash, other_sender)
