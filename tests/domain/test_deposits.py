"""What a deposit is worth, exactly, and how transfers are read from blocks and logs."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from eth_hash.auto import keccak
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.deposits import (
    NATIVE,
    TRANSFER_TOPIC,
    ChainDataError,
    base_units,
    credits_nano,
    deposit_reference,
    format_units,
    native_transfers,
    normalise_asset,
    payment_uri,
    token_transfer,
)

RATES = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(10**6), places=6)


def test_the_transfer_topic_is_the_keccak_of_the_event_signature() -> None:
    assert "0x" + keccak(b"Transfer(address,address,uint256)").hex() == TRANSFER_TOPIC


@pytest.mark.parametrize(
    ("amount", "decimals", "rate", "nano"),
    [
        (10**6, 6, "1", 10**9),  # 1 USDC at 1 credit
        (10**18, 18, "2000", 2000 * 10**9),  # 1 ETH at 2000
        (123_456_789, 6, "1", 123_456_789_000),
        (1, 18, "2000", 0),  # one wei is worth less than a nano-credit: rounded down
        (3, 0, "0.333333333", 999_999_999),
        (10**18 + 1, 18, "0.1", 10**8),
    ],
)
def test_worth_is_amount_times_rate_rounded_down_to_the_nano_credit(
    amount: int, decimals: int, rate: str, nano: int
) -> None:
    assert credits_nano(amount, decimals, Decimal(rate)) == nano


@given(st.integers(min_value=0, max_value=2**256 - 1), st.integers(0, 30), RATES)
def test_worth_never_exceeds_the_exact_product_and_misses_it_by_less_than_a_nano(
    amount: int, decimals: int, rate: Decimal
) -> None:
    exact = Fraction(amount, 10**decimals) * Fraction(rate) * 10**9
    worth = credits_nano(amount, decimals, rate)
    assert worth <= exact
    assert worth == min(int(exact), 2**63 - 1)


@given(st.integers(min_value=0, max_value=10**30), st.integers(0, 30))
def test_units_are_written_exactly_and_read_back(amount: int, decimals: int) -> None:
    written = format_units(amount, decimals)
    assert base_units(Decimal(written), decimals) == amount


def test_the_reference_names_chain_transaction_and_log() -> None:
    assert deposit_reference(1, "0xABC", -1) == "deposit:1:0xabc:-1"


@pytest.mark.parametrize(
    ("written", "stored"),
    [("native", NATIVE), ("NATIVE", NATIVE), ("0x" + "Ab" * 20, "0x" + "ab" * 20)],
)
def test_assets_are_native_or_a_contract_address(written: str, stored: str) -> None:
    assert normalise_asset(written) == stored


@pytest.mark.parametrize("written", ["eth", "0x1234", "0x" + "g" * 40, ""])
def test_other_assets_are_refused(written: str) -> None:
    with pytest.raises(ValueError, match="native"):
        normalise_asset(written)


WATCHED = "0x" + "11" * 20
HASH = "0x" + "ab" * 32


def _tx(to: str | None, value: str = "0x10") -> dict[str, object]:
    return {"hash": HASH, "from": "0x" + "22" * 20, "to": to, "value": value}


def test_only_value_sent_directly_to_a_watched_address_is_a_native_transfer() -> None:
    block = {
        "number": "0x5",
        "hash": "0x" + "cd" * 32,
        "transactions": [
            _tx(WATCHED),
            _tx("0x" + "33" * 20),
            _tx(None),
            _tx(WATCHED.upper().replace("X", "x"), "0x0"),
        ],
    }
    [found] = native_transfers(7, block, frozenset({WATCHED}))
    assert (found.recipient, found.amount, found.block_number, found.log_index) == (
        WATCHED,
        16,
        5,
        -1,
    )


def test_a_block_without_full_transactions_is_refused() -> None:
    block = {"number": "0x5", "hash": "0x" + "cd" * 32, "transactions": [HASH]}
    with pytest.raises(ChainDataError, match="full"):
        native_transfers(7, block, frozenset({WATCHED}))


def _log(**fields: object) -> dict[str, object]:
    log: dict[str, object] = {
        "address": "0x" + "44" * 20,
        "topics": [TRANSFER_TOPIC, "0x" + "0" * 24 + "22" * 20, "0x" + "0" * 24 + "11" * 20],
        "data": "0x" + f"{5 * 10**6:064x}",
        "transactionHash": HASH,
        "logIndex": "0x3",
        "blockNumber": "0x9",
        "blockHash": "0x" + "cd" * 32,
        "removed": False,
    }
    log.update(fields)
    return log


def test_an_erc20_transfer_log_is_read_whole() -> None:
    found = token_transfer(7, _log())
    assert found is not None
    assert (found.asset, found.recipient, found.amount, found.log_index) == (
        "0x" + "44" * 20,
        WATCHED,
        5 * 10**6,
        3,
    )


def test_an_erc721_transfer_shares_the_topic_but_is_no_token_deposit() -> None:
    topics = [TRANSFER_TOPIC, "0x" + "0" * 64, "0x" + "0" * 24 + "11" * 20, "0x" + "0" * 63 + "1"]
    assert token_transfer(7, _log(topics=topics, data="0x")) is None


def test_a_removed_log_is_never_taken() -> None:
    with pytest.raises(ChainDataError, match="removed"):
        token_transfer(7, _log(removed=True))


def test_payment_requests_name_the_chain() -> None:
    assert payment_uri(NATIVE, 5, WATCHED) == f"ethereum:{WATCHED}@5"
    token = "0x" + "44" * 20
    assert payment_uri(token, 5, WATCHED) == f"ethereum:{token}@5/transfer?address={WATCHED}"
