"""Withdrawals proven against the block's withdrawalsRoot (integrity/withdrawals.py): anvil's
blocks carry none, and one added to such a block fails."""

from __future__ import annotations

import pytest

from chainrouter.integrity import ProofError, verify_withdrawals
from tests.integrity.conftest import Chain


def test_a_real_blocks_withdrawals_make_its_root_and_one_added_fails(chain: Chain) -> None:
    block = chain.block(chain.several)
    assert verify_withdrawals(block) == []
    added = {"index": "0x0", "validatorIndex": "0x1", "address": "0x" + "12" * 20, "amount": "0x5"}
    with pytest.raises(ProofError, match="withdrawalsRoot"):
        verify_withdrawals({**block, "withdrawals": [added]})
