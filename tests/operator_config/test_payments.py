"""The operator file's `payments` section: what it accepts, what it refuses (with the path), and
that applying it twice changes nothing."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import ConfigFileError, validate_document
from chainrouter.stores.sql.payments import payment_config
from tests.domain.test_deposit_address import MNEMONIC, account_xpub

TOKEN = "0x" + "Ab" * 20


def _document(**payments: Any) -> dict[str, Any]:
    return {
        "chains": [
            {
                "chain_id": 10,
                "name": "Ten",
                "short_name": "ten",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "payments": payments,
    }


def _problems(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigFileError) as caught:
        validate_document(document)
    return caught.value.problems


def test_assets_are_stored_exactly_and_applying_again_changes_nothing(engine: Engine) -> None:
    document = _document(
        deposit_xpub=account_xpub(),
        deposits=[
            {"chain_id": 10, "asset": "native", "credits_per_unit": "2500.123456789012345678"},
            {"chain_id": "0xa", "asset": TOKEN, "credits_per_unit": 1, "decimals": 6},
        ],
        card={"min_credits": "2.50"},
    )
    apply_config(engine, validate_document(document))
    assert not apply_config(engine, validate_document(document)).changed
    with engine.connect() as connection:
        config = payment_config(connection)
    native, token = config.assets
    assert native.credits_per_unit == Decimal("2500.123456789012345678")
    assert (native.decimals, native.symbol, native.confirmations) == (18, "ETH", None)
    assert (token.asset, token.decimals, token.symbol) == (TOKEN.lower(), 6, TOKEN.lower())
    assert config.card is not None
    assert config.card.min_credits_nano == 2_500_000_000


def test_a_private_key_is_refused_at_its_path() -> None:
    from bip32 import BIP32  # type: ignore[import-untyped]
    from eth_account.hdaccount.mnemonic import Mnemonic

    xprv = BIP32.from_seed(Mnemonic.to_seed(MNEMONIC)).get_xpriv()
    [problem] = _problems(_document(deposit_xpub=xprv))
    assert problem.startswith("payments.deposit_xpub:")
    assert "PRIVATE" in problem


@pytest.mark.parametrize(
    ("deposit", "path"),
    [
        ({"asset": "eth", "credits_per_unit": 1}, "payments.deposits[0].asset"),
        ({"asset": "native", "credits_per_unit": 0}, "payments.deposits[0].credits_per_unit"),
        ({"asset": "native", "credits_per_unit": 0.5}, "payments.deposits[0].credits_per_unit"),
        ({"asset": "native", "credits_per_unit": 1, "confirmations": 0}, "confirmations"),
        ({"asset": "native", "credits_per_unit": 1, "decimals": 78}, "decimals"),
        ({"asset": "native", "credits_per_unit": "1e3"}, "credits_per_unit"),
    ],
)
def test_a_bad_asset_is_refused_at_its_path(deposit: dict[str, Any], path: str) -> None:
    problems = _problems(
        _document(deposit_xpub=account_xpub(), deposits=[{"chain_id": 10, **deposit}])
    )
    assert any(path in problem for problem in problems), problems


def test_deposits_need_a_key_and_each_asset_comes_once() -> None:
    native = {"chain_id": 10, "asset": "native", "credits_per_unit": 1}
    problems = _problems(_document(deposits=[native, dict(native)]))
    assert "payments.deposits[1]: duplicate of payments.deposits[0]" in problems
    assert any(p.startswith("payments.deposit_xpub:") for p in problems)


def test_an_unknown_chain_is_refused_before_anything_is_written(engine: Engine) -> None:
    document = _document(
        deposit_xpub=account_xpub(),
        deposits=[{"chain_id": 11, "asset": "native", "credits_per_unit": 1}],
    )
    with pytest.raises(ConfigFileError) as caught:
        apply_config(engine, validate_document(document))
    assert caught.value.problems[0].startswith("payments.deposits[0].chain_id: chain 11")
