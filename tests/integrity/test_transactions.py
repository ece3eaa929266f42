"""Transactions proven against the block's transactionsRoot (integrity/transactions.py), built
from the fields of a block fetched with full transactions: the encoding of each type is the
node's own raw bytes, the list makes the root, each hash and sender holds; a changed field, a
reordered list or another sender fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chainrouter.integrity import (
    ProofError,
    encode_transaction,
    sender,
    transactions_root,
    verify_transaction,
    verify_transactions,
)
from chainrouter.integrity._codec import keccak
from tests.integrity.conftest import Chain


def test_each_types_encoding_is_the_nodes_raw_transaction(chain: Chain) -> None:
    block = chain.block(chain.several, full=True)
    assert {tx["type"] for tx in block["transactions"]} == {"0x0", "0x1", "0x2", "0x4"}
    for tx in block["transactions"]:
        raw = chain.read("eth_getRawTransactionByHash", [tx["hash"]])
        assert "0x" + encode_transaction(tx).hex() == raw
        assert sender(tx) == tx["from"]


def test_a_blob_transactions_encoding_hashes_to_its_hash(chain: Chain) -> None:
    """The block form of a blob transaction carries no blobs: its encoding is the signed
    fields alone, which hash to its hash (the node's raw bytes are the network form, with the
    sidecar, and anvil builds its transactionsRoot over those: a blob block of anvil's is not
    provable, and verify_transactions says so)."""
    block = chain.block(chain.blob, full=True)
    [tx] = block["transactions"]
    assert tx["type"] == "0x3"
    assert "0x" + keccak(encode_transaction(tx)).hex() == tx["hash"] == chain.hashes["4844"]
    assert sender(tx) == tx["from"]


def test_the_transactions_of_a_block_with_every_type_make_its_root(chain: Chain) -> None:
    block = chain.block(chain.several, full=True)
    assert transactions_root(block["transactions"]).hex() == block["transactionsRoot"][2:]
    assert verify_transactions(block) == block["transactions"]
    empty = chain.block(chain.blob + 1, full=True)
    assert verify_transactions(empty) == []


def test_each_transaction_answer_checks_against_the_proven_list(chain: Chain) -> None:
    block = chain.block(chain.several, full=True)
    for tx in block["transactions"]:
        claimed = chain.read("eth_getTransactionByHash", [tx["hash"]])
        verify_transaction(block, tx["hash"], claimed)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("value", "0x1234"),
        ("to", "0x" + "12" * 20),
        ("input", "0x00"),
        ("nonce", "0x63"),
        ("gas", "0x1"),
        ("r", "0x1"),
    ],
)
def test_a_changed_transaction_fails_in_the_list_and_alone(
    chain: Chain, name: str, value: str
) -> None:
    block = chain.block(chain.several, full=True)
    changed = copy.deepcopy(block)
    tx: dict[str, Any] = changed["transactions"][0]
    tx[name] = value
    with pytest.raises(ProofError):
        verify_transactions(changed)
    with pytest.raises(ProofError):
        verify_transaction(block, tx["hash"], tx)


def test_a_transaction_answered_with_another_sender_or_place_fails(chain: Chain) -> None:
    block = chain.block(chain.several, full=True)
    tx = block["transactions"][2]
    assert tx["type"] == "0x2"  # its gasPrice is derived, not signed
    for name, value in (
        ("from", "0x" + "12" * 20),
        ("transactionIndex", "0x0"),
        ("blockHash", "0x" + "00" * 32),
        ("gasPrice", hex(int(tx["gasPrice"], 16) + 1)),
    ):
        with pytest.raises(ProofError):
            verify_transaction(block, tx["hash"], {**tx, name: value})
    with pytest.raises(ProofError, match="unknown"):
        verify_transaction(block, tx["hash"], None)


def test_a_reordered_or_shortened_list_fails(chain: Chain) -> None:
    block = chain.block(chain.several, full=True)
    txs = block["transactions"]
    with pytest.raises(ProofError):
        verify_transactions({**block, "transactions": [txs[1], txs[0], *txs[2:]]})
    with pytest.raises(ProofError):
        verify_transactions({**block, "transactions": txs[:-1]})
    with pytest.raises(ProofError, match="hashes"):
        verify_transactions(chain.block(chain.several))  # hashes only: nothing to prove


def test_anvils_blob_block_root_covers_the_sidecar_and_is_not_proven(chain: Chain) -> None:
    with pytest.raises(ProofError, match="transactionsRoot"):
        verify_transactions(chain.block(chain.blob, full=True))
