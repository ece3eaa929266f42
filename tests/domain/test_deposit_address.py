"""A customer's deposit address is child m/0/{customer_id} of the operator's account key, derived
from the public key alone, and equals what a wallet holding the private key derives."""

from __future__ import annotations

import pytest
from bip32 import BIP32  # type: ignore[import-untyped]
from eth_account import Account
from eth_account.hdaccount.mnemonic import Mnemonic
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.deposit_address import (
    MAX_CHILD_INDEX,
    DepositKeyError,
    check_xpub,
    derive_deposit_address,
)

# The BIP-39 test mnemonic; its first Ethereum account is a published vector.
MNEMONIC = "abandon " * 11 + "about"
ACCOUNT_PATH = "m/44'/60'/0'"
FIRST_ACCOUNT = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"


def account_xpub(mnemonic: str = MNEMONIC) -> str:
    """The account's extended public key, as the operator's wallet exports it (private side)."""
    xpub: str = BIP32.from_seed(Mnemonic.to_seed(mnemonic)).get_xpub_from_path("m/44h/60h/0h")
    return xpub


def wallet_address(index: int, mnemonic: str = MNEMONIC) -> str:
    """The address a wallet with the mnemonic derives for receiving address `index`, through
    eth-account's own HD wallet: another library, and the private key's side."""
    Account.enable_unaudited_hdwallet_features()
    address: str = Account.from_mnemonic(mnemonic, account_path=f"{ACCOUNT_PATH}/0/{index}").address
    return address


def test_the_first_customer_address_is_the_published_test_vector() -> None:
    assert derive_deposit_address(account_xpub(), 0) == FIRST_ACCOUNT


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=MAX_CHILD_INDEX))
def test_the_public_derivation_matches_the_wallet_holding_the_private_key(index: int) -> None:
    assert derive_deposit_address(account_xpub(), index) == wallet_address(index)


def test_customers_get_distinct_checksummed_addresses() -> None:
    addresses = [derive_deposit_address(account_xpub(), i) for i in range(1, 20)]
    assert len(set(addresses)) == 19
    assert all(a.startswith("0x") and a != a.lower() for a in addresses)


def test_a_private_key_is_refused_with_a_reason() -> None:
    xprv = BIP32.from_seed(Mnemonic.to_seed(MNEMONIC)).get_xpriv_from_path("m/44h/60h/0h")
    with pytest.raises(DepositKeyError, match="PRIVATE"):
        check_xpub(xprv)


@pytest.mark.parametrize(
    "garbage", ["", "xpub", "hello", account_xpub()[:-1] + "x", "xpub" + "1" * 300]
)
def test_a_malformed_key_is_refused(garbage: str) -> None:
    with pytest.raises(DepositKeyError):
        check_xpub(garbage)


def test_an_index_beyond_the_non_hardened_range_is_refused() -> None:
    with pytest.raises(DepositKeyError, match="non-hardened"):
        derive_deposit_address(account_xpub(), MAX_CHILD_INDEX + 1)
