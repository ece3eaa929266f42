"""Deposit addresses: one per customer, derived from the operator's BIP-32 extended public key.

The operator gives the extended public key of an account (for example `m/44'/60'/0'`); a
customer's address is its non-hardened child `m/0/{customer_id}`, the same derivation a wallet
makes for the account's receiving addresses. The service never holds a private key: only the
operator, offline, can spend what arrives (docs/billing.md). Derivation is the `bip32` package's,
the address from the public key `eth-keys`' (keccak and the EIP-55 checksum); no elliptic-curve
arithmetic is written here.
"""

from __future__ import annotations

from functools import lru_cache

from bip32 import BIP32  # type: ignore[import-untyped]
from eth_keys.datatypes import PublicKey

# Non-hardened children only: a public key cannot derive hardened ones.
MAX_CHILD_INDEX = 2**31 - 1
_PRIVATE_PREFIXES = ("xprv", "tprv", "yprv", "zprv", "uprv", "vprv")
MAX_XPUB_LENGTH = 200


class DepositKeyError(ValueError):
    """An extended public key that cannot be used; the message is shown to the operator."""


def check_xpub(xpub: str) -> str:
    """`xpub` itself when it is a usable BIP-32 extended public key (it derives an address)."""
    text = xpub.strip()
    if text.startswith(_PRIVATE_PREFIXES):
        raise DepositKeyError(
            "is an extended PRIVATE key: give the account's extended public key (xpub...); the "
            "service must never hold a private key"
        )
    if not text or len(text) > MAX_XPUB_LENGTH:
        raise DepositKeyError("must be a BIP-32 extended public key (xpub...)")
    try:
        _account(text)
    except Exception:  # the library raises several kinds for a malformed key
        raise DepositKeyError(
            "is not a valid BIP-32 extended public key (xpub...): check that it was copied whole"
        ) from None
    return text


@lru_cache(maxsize=8)
def _account(xpub: str) -> BIP32:
    return BIP32.from_xpub(xpub)


@lru_cache(maxsize=65_536)
def derive_deposit_address(xpub: str, customer_id: int) -> str:
    """The EIP-55 checksummed address of child `m/0/{customer_id}` of the account `xpub`."""
    if not 0 <= customer_id <= MAX_CHILD_INDEX:
        raise DepositKeyError(
            f"customer {customer_id} is beyond the last non-hardened child index {MAX_CHILD_INDEX}"
        )
    public_key: bytes = _account(xpub).get_pubkey_from_path(f"m/0/{customer_id}")
    address: str = PublicKey.from_compressed_bytes(public_key).to_checksum_address()
    return address
