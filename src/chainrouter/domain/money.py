"""Exact money: credits are held as integer nano-credits (1 credit = 10**9 nano = 1 USD).

Binary floats never touch money. Values arrive as decimal strings or integers, are converted to
integer nano-credits once, and are rendered back as exact decimal strings.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

NANO_PER_CREDIT = 10**9
CREDIT_DECIMALS = 9

# Largest amount a signed 64-bit column holds, in whole credits: about 9.2 billion.
MAX_NANO = 2**63 - 1
_MAX_INTEGER_DIGITS = 18


class MoneyError(ValueError):
    """A value that cannot be an exact credit amount; the message is shown to the user."""


class BalanceOutOfRangeError(MoneyError):
    """A change that would take a balance past what a 64-bit column holds; nothing was written."""

    def __init__(self) -> None:
        limit = format_credits(MAX_NANO)
        super().__init__(f"would take the balance beyond the largest one held, +/-{limit} credits")


_PLAIN_DECIMAL = re.compile(r"-?[0-9]{1,40}(\.[0-9]{1,40})?", re.ASCII)


def parse_credits(value: object) -> int:
    """Convert a credit amount (decimal string, int or Decimal) to nano-credits, exactly.

    Floats are refused because their decimal value is not what the user wrote: write "0.1", not 0.1.
    """
    result = int(parse_exact_decimal(value) * NANO_PER_CREDIT)
    if abs(result) > MAX_NANO:
        raise MoneyError("is too large")
    return result


def parse_exact_decimal(value: object, places: int = CREDIT_DECIMALS) -> Decimal:
    """A finite decimal with at most `places` decimal places, from a string, int or Decimal."""
    if isinstance(value, bool):
        raise MoneyError("must be a decimal number, not a boolean")
    if isinstance(value, float):
        raise MoneyError(
            'must be written as a decimal string (for example "0.0000003"), not a float'
        )
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, Decimal):
        amount = value
    elif isinstance(value, str):
        # Plain ASCII decimals only: Decimal() itself also takes "1_000", " 1 ", "1e3" and
        # full-width digits, none of which a person means as an amount of money.
        if not _PLAIN_DECIMAL.fullmatch(value):
            raise MoneyError(f"{value[:40]!r} is not a plain decimal number such as 12.5")
        try:
            amount = Decimal(value)
        except InvalidOperation:
            raise MoneyError(f"{value[:40]!r} is not a decimal number") from None
    else:
        raise MoneyError("must be a decimal number")
    if not amount.is_finite():
        raise MoneyError("must be a finite decimal number")
    # Checked before quantizing: a huge exponent would overflow the decimal context.
    if amount != 0 and amount.adjusted() > _MAX_INTEGER_DIGITS:
        raise MoneyError("is too large")
    if not amount:  # 0E+999999999 is zero too, but no database column holds its exponent
        return Decimal(0)
    if amount != amount.quantize(Decimal(1).scaleb(-places), rounding="ROUND_DOWN"):
        raise MoneyError(f"has more than {places} decimal places")
    return amount


def format_credits(nano: int) -> str:
    """Render nano-credits as the shortest exact decimal string ("0.0000003", "12", "-1.5")."""
    sign = "-" if nano < 0 else ""
    whole, frac = divmod(abs(nano), NANO_PER_CREDIT)
    if frac == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{frac:09d}".rstrip("0")


def credits_decimal(nano: int) -> Decimal:
    """The exact Decimal value of an amount in nano-credits."""
    return Decimal(nano).scaleb(-CREDIT_DECIMALS)
