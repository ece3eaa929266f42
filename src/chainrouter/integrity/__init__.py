"""Proofs of nodes' answers (design notes, "Integrity"): pure functions over JSON-RPC values as
a node returned them, each raising ProofError when the claim does not hold. No I/O: the caller
fetches what `PROOFS` says a proof needs and hands it over."""

from chainrouter.integrity.errors import ProofError
from chainrouter.integrity.headers import header_hash, verify_header, verify_parent_chain
from chainrouter.integrity.logs import verify_logs
from chainrouter.integrity.methods import PROOFS, ProofKind, ProofPlan
from chainrouter.integrity.receipts import (
    encode_receipt,
    receipts_root,
    verify_receipt,
    verify_receipts,
)
from chainrouter.integrity.state import (
    Account,
    proof_request,
    verify_account,
    verify_state_answer,
    verify_storage,
)
from chainrouter.integrity.transactions import (
    encode_transaction,
    sender,
    transactions_root,
    verify_transaction,
    verify_transactions,
)
from chainrouter.integrity.withdrawals import verify_withdrawals, withdrawals_root

__all__ = [
    "PROOFS",
    "Account",
    "ProofError",
    "ProofKind",
    "ProofPlan",
    "encode_receipt",
    "encode_transaction",
    "header_hash",
    "proof_request",
    "receipts_root",
    "sender",
    "transactions_root",
    "verify_account",
    "verify_header",
    "verify_logs",
    "verify_parent_chain",
    "verify_receipt",
    "verify_receipts",
    "verify_state_answer",
    "verify_storage",
    "verify_transaction",
    "verify_transactions",
    "verify_withdrawals",
    "withdrawals_root",
]
