"""Block headers (integrity/headers.py): a real block's fields hash to its hash, through every
fork's fields anvil's Prague blocks carry; any one field changed, the hash no longer matches; a
parent chain reaches back from a trusted head, and a block that is not the named parent breaks
it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.integrity import ProofError, header_hash, verify_header, verify_parent_chain
from chainrouter.integrity.headers import FORK_FIELDS, HEADER_FIELDS
from tests.integrity.conftest import Chain

FIELDS = HEADER_FIELDS + FORK_FIELDS


def test_real_blocks_hash_to_their_hash_with_every_forks_fields(chain: Chain) -> None:
    for number in range(chain.blob + 2):
        block = chain.block(number)
        assert all(block.get(name) is not None for name, _ in FIELDS)
        assert verify_header(block).hex() == block["hash"][2:]


def _changed(value: str, length: int | None, replacement: int) -> str:
    """Another value of the same shape: a quantity or bytes of the field's length."""
    if length is None:
        original = int(value, 16)
        return hex(replacement if replacement != original else original + 1)
    size = len(value) // 2 - 1 if length == -1 else length
    other = replacement.to_bytes(32, "big")[-max(size, 1) :] * (size // 32 + 1)
    changed = "0x" + other[:size].hex()
    if changed == value.lower():
        changed = "0x" + bytes([other[0] ^ 1]).hex() + changed[4:] if size else "0x01"
    return changed


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from([name for name, _ in FIELDS]), replacement=st.integers(0, 2**64))
def test_any_single_changed_field_fails(chain: Chain, name: str, replacement: int) -> None:
    block = chain.block(chain.several)
    length = dict(FIELDS)[name]
    forged = {**block, name: _changed(block[name], length, replacement)}
    assert forged[name] != block[name]
    with pytest.raises(ProofError):
        verify_header(forged)


def test_a_block_claiming_another_hash_fails(chain: Chain) -> None:
    block = chain.block(chain.several)
    with pytest.raises(ProofError, match="hash"):
        verify_header({**block, "hash": chain.block(chain.blob)["hash"]})


def test_a_fork_field_after_a_missing_one_is_no_header(chain: Chain) -> None:
    block = {**chain.block(chain.several), "baseFeePerGas": None}
    with pytest.raises(ProofError, match="baseFeePerGas"):
        header_hash(block)


@pytest.mark.parametrize(
    ("name", "value"), [("miner", "0x1234"), ("number", "12"), ("stateRoot", "0xzz")]
)
def test_a_field_of_the_wrong_shape_is_refused(chain: Chain, name: str, value: Any) -> None:
    with pytest.raises(ProofError, match=name if name != "stateRoot" else "stateRoot"):
        verify_header({**chain.block(chain.several), name: value})


def test_ancestors_are_trusted_through_parent_links_from_a_trusted_head(chain: Chain) -> None:
    blocks = [chain.block(number) for number in range(chain.blob + 2)]
    verify_parent_chain(blocks[-1], blocks[:-1])
    verify_parent_chain(blocks[-1], [])


def test_a_self_consistent_block_that_is_not_the_named_parent_breaks_the_chain(
    chain: Chain,
) -> None:
    blocks = [chain.block(number) for number in range(chain.several - 1, chain.blob + 1)]
    forged = {**blocks[1], "stateRoot": "0x" + "11" * 32}
    forged["hash"] = "0x" + header_hash(forged).hex()  # its own hash holds; the link does not
    verify_header(forged)
    with pytest.raises(ProofError, match="not the parent"):
        verify_parent_chain(blocks[-1], [blocks[0], forged])
    with pytest.raises(ProofError, match="not the parent"):
        verify_parent_chain(blocks[-1], [blocks[1], blocks[0]])  # out of order
