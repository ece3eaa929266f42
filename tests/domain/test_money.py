"""Money is exact: credits become integer nano-credits and come back as the same decimal."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.money import (
    MAX_NANO,
    MoneyError,
    credits_decimal,
    format_credits,
    parse_credits,
    parse_exact_decimal,
)

nano_amounts = st.integers(min_value=-MAX_NANO, max_value=MAX_NANO)


@given(nano_amounts)
def test_formatting_then_parsing_gives_back_the_same_amount(nano: int) -> None:
    assert parse_credits(format_credits(nano)) == nano


@given(nano_amounts)
def test_formatted_amount_is_the_exact_decimal_value(nano: int) -> None:
    assert Decimal(format_credits(nano)) == credits_decimal(nano) == Decimal(nano) / 10**9


@pytest.mark.parametrize(
    ("written", "nano"),
    [
        ("0.0000003", 300),
        ("1", 1_000_000_000),
        (25, 25_000_000_000),
        (Decimal("0.000000001"), 1),
        ("12.5", 12_500_000_000),
        ("0.000000001", 1),
        ("-2", -2_000_000_000),
    ],
)
def test_decimal_strings_integers_and_decimals_are_accepted(written: object, nano: int) -> None:
    assert parse_credits(written) == nano


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        (0.1, "not a float"),
        (True, "not a boolean"),
        ("0.0000000001", "more than 9 decimal places"),
        ("abc", "not a plain decimal number"),
        ("", "not a plain decimal number"),
        ("NaN", "not a plain decimal number"),
        ("Infinity", "not a plain decimal number"),
        (Decimal("NaN"), "finite"),
        ("1e30", "not a plain decimal number"),
        ("10000000000000000000000000000000", "too large"),
        (None, "must be a decimal number"),
        # Decimal() takes these; nobody writes money so (security.md).
        ("1_000", "not a plain decimal number"),
        ("  12.5 ", "not a plain decimal number"),
        ("1e-9", "not a plain decimal number"),
        ("\uff11\uff12", "not a plain decimal number"),  # full-width digits
        ("+1", "not a plain decimal number"),
        ("1.", "not a plain decimal number"),
    ],
)
def test_inexact_or_malformed_amounts_are_refused_with_a_reason(
    written: object, reason: str
) -> None:
    with pytest.raises(MoneyError, match=reason):
        parse_credits(written)


def test_formatting_uses_the_shortest_exact_form() -> None:
    assert format_credits(300) == "0.0000003"
    assert format_credits(10**9) == "1"
    assert format_credits(-1_500_000_000) == "-1.5"
    assert format_credits(0) == "0"


def test_a_zero_written_with_any_exponent_is_plain_zero() -> None:
    for zero in (Decimal("0E+999999999"), Decimal("-0.0E-5"), Decimal("0E-999999999")):
        parsed = parse_exact_decimal(zero)
        assert parsed == 0
        assert parsed.as_tuple().exponent == 0


def test_quantities_other_than_money_keep_their_exact_decimal() -> None:
    assert parse_exact_decimal("1000000.5") == Decimal("1000000.5")
    with pytest.raises(MoneyError):
        parse_exact_decimal("0.1234567891")
