"""Which answers can be proven, and how: one table for the pipeline to read and the docs to show.

A proof starts from a trusted block header (its hash agreed by nodes of two providers, or
reached from such a hash by parent links; headers.py). `fetch` names the calls that bring what
the proof needs beyond that header; `check` is the function that judges the answer. Methods not
in the table, or of kind NONE, are not provable: they are audited (asked again of another
provider's node) or judged by the head rules, as `why` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from chainrouter.integrity.headers import verify_header
from chainrouter.integrity.logs import verify_logs
from chainrouter.integrity.receipts import verify_receipt, verify_receipts
from chainrouter.integrity.state import verify_account, verify_state_answer
from chainrouter.integrity.transactions import verify_transaction, verify_transactions


class ProofKind(StrEnum):
    STATE = "state"  # eth_getProof against the header's stateRoot
    HEADER = "header"  # keccak(RLP(header)) is the block's hash
    TRANSACTIONS = "transactions"  # the block's full transactions against transactionsRoot
    RECEIPTS = "receipts"  # the block's receipts against receiptsRoot
    SELF = "self"  # the answer proves itself (a raw transaction hashes to the hash asked)
    NONE = "none"  # no proof exists: audits or the head rules judge it


@dataclass(frozen=True)
class ProofPlan:
    kind: ProofKind
    fetch: tuple[str, ...]
    check: Callable[..., object] | None
    why: str


def _state(why: str) -> ProofPlan:
    return ProofPlan(ProofKind.STATE, ("eth_getProof",), verify_state_answer, why)


def _none(why: str) -> ProofPlan:
    return ProofPlan(ProofKind.NONE, (), None, why)


_BLOCK_TXS = ("eth_getBlockByHash",)  # with full transactions: (hash, true)
_EXECUTION = "the result of executing code: no root commits to it; audited"

PROOFS: dict[str, ProofPlan] = {
    "eth_getBalance": _state("the account's balance under the block's stateRoot"),
    "eth_getTransactionCount": _state("the account's nonce under the block's stateRoot"),
    "eth_getStorageAt": _state("the slot under the account's storageRoot"),
    "eth_getCode": _state("keccak(code) is the account's codeHash"),
    "eth_getProof": ProofPlan(
        ProofKind.STATE, (), verify_account, "the answer is the proof, against the stateRoot"
    ),
    "eth_getBlockByHash": ProofPlan(
        ProofKind.HEADER, (), verify_header, "the header's fields hash to the hash asked"
    ),
    "eth_getBlockByNumber": ProofPlan(
        ProofKind.HEADER,
        (),
        verify_header,
        "the header's fields hash to its hash, and that hash is the chain's at the number",
    ),
    "eth_getTransactionByHash": ProofPlan(
        ProofKind.TRANSACTIONS,
        _BLOCK_TXS,
        verify_transaction,
        "the transaction at its index in the block's proven list, its sender recovered",
    ),
    "eth_getTransactionByBlockHashAndIndex": ProofPlan(
        ProofKind.TRANSACTIONS, _BLOCK_TXS, verify_transaction, "the block's proven list"
    ),
    "eth_getTransactionByBlockNumberAndIndex": ProofPlan(
        ProofKind.TRANSACTIONS, _BLOCK_TXS, verify_transaction, "the block's proven list"
    ),
    "eth_getBlockTransactionCountByHash": ProofPlan(
        ProofKind.TRANSACTIONS, _BLOCK_TXS, verify_transactions, "the proven list's length"
    ),
    "eth_getBlockTransactionCountByNumber": ProofPlan(
        ProofKind.TRANSACTIONS, _BLOCK_TXS, verify_transactions, "the proven list's length"
    ),
    "eth_getTransactionReceipt": ProofPlan(
        ProofKind.RECEIPTS,
        (*_BLOCK_TXS, "eth_getBlockReceipts"),
        verify_receipt,
        "the receipt at its index in the block's proven receipts, of its proven transaction",
    ),
    "eth_getBlockReceipts": ProofPlan(
        ProofKind.RECEIPTS, _BLOCK_TXS, verify_receipts, "the receiptsRoot, with the transactions"
    ),
    "eth_getRawTransactionByHash": ProofPlan(
        ProofKind.SELF, (), None, "keccak of the bytes is the hash asked (not that it was mined)"
    ),
    "eth_call": _none(_EXECUTION),
    "eth_estimateGas": _none(_EXECUTION),
    "eth_createAccessList": _none(_EXECUTION),
    "eth_getLogs": ProofPlan(
        ProofKind.RECEIPTS,
        (*_BLOCK_TXS, "eth_getBlockReceipts"),
        verify_logs,
        "exactly the matching logs of the range's proven receipts: two calls per block, so for "
        "ranges of final blocks the cache keeps, or one block by hash; else audited",
    ),
    "eth_blockNumber": _none("a node's own head: judged by the head rules, never proven"),
    "eth_gasPrice": _none("a node's estimate: differs between honest nodes; not audited"),
    "eth_maxPriorityFeePerGas": _none("a node's estimate: differs between honest nodes"),
    "eth_feeHistory": _none("the rewards are a node's sample; audited by rule"),
    "eth_chainId": _none("configuration, checked by the health checks"),
    "net_version": _none("configuration, checked by the health checks"),
    "eth_syncing": _none("a node's own state"),
    "eth_sendRawTransaction": _none("a write: its answer, the hash, is computed by the router"),
}
