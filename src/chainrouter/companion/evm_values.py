"""Argument types for EVM values, checked before anything is sent, and the conversions models
need most: decimal numbers to hex quantities, wei to ether."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from chainrouter.operator_config.model import ChainId

_QUANTITY = re.compile(r"^0x[0-9a-f]{1,64}$")
_MAX_QUANTITY = 2**256 - 1
BLOCK_TAGS = ("latest", "earliest", "pending", "safe", "finalized")

Chain = Annotated[ChainId, Field(description='EIP-155 chain ID, e.g. 1 or "0x1".')]

Address = Annotated[
    str,
    Field(
        pattern=r"^0x[0-9a-fA-F]{40}$", description="20-byte address, 0x-prefixed (40 hex digits)."
    ),
]
Hash32 = Annotated[
    str, Field(pattern=r"^0x[0-9a-fA-F]{64}$", description="32-byte hash, 0x + 64 hex digits.")
]
# A log filter's parts, as eth_getLogs and eth_subscribe("logs") take them.
Addresses = Address | Annotated[list[Address], Field(min_length=1, max_length=100)]
Topic = Hash32 | None | Annotated[list[Hash32], Field(min_length=1, max_length=100)]
HexData = Annotated[
    str,
    Field(
        pattern=r"^0x([0-9a-fA-F]{2})*$",
        max_length=262_146,
        description="Bytes as 0x-prefixed hex (an even number of digits).",
    ),
]


def to_quantity(value: Any) -> str:
    """A non-negative integer as the JSON-RPC hex quantity: from an int, a decimal string or a hex
    string (leading zeros dropped, as JSON-RPC requires)."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true or false")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            number = int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise ValueError(
                'must be a non-negative integer: decimal ("21000") or hex ("0x5208")'
            ) from None
    else:
        raise ValueError("must be an integer or a decimal or 0x-hex string")
    if not 0 <= number <= _MAX_QUANTITY:
        raise ValueError("must be between 0 and 2**256 - 1")
    return hex(number)


_QUANTITY_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^(0x[0-9a-fA-F]+|[0-9]+)$"},
    ],
    "description": "Non-negative integer: a number, a decimal string or a 0x-hex string.",
}
Quantity = Annotated[str, BeforeValidator(to_quantity), WithJsonSchema(_QUANTITY_SCHEMA)]


def to_block_tag(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in BLOCK_TAGS:
        return value.strip().lower()
    try:
        return to_quantity(value)
    except ValueError:
        raise ValueError(
            f"must be one of {', '.join(BLOCK_TAGS)} or a block number (decimal or 0x-hex)"
        ) from None


_BLOCK_TAG_SCHEMA = {
    "anyOf": [
        {"type": "string", "enum": list(BLOCK_TAGS)},
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^(0x[0-9a-fA-F]+|[0-9]+)$"},
    ],
    "description": f"{', '.join(BLOCK_TAGS)}, or a block number (decimal or 0x-hex).",
}
BlockTag = Annotated[str, BeforeValidator(to_block_tag), WithJsonSchema(_BLOCK_TAG_SCHEMA)]


def quantity_value(value: Any) -> int | None:
    """The integer of a hex quantity in a node's answer; None when it is not one."""
    if isinstance(value, str) and _QUANTITY.match(value.lower()):
        return int(value, 16)
    return None


def _scaled(wei: int, decimals: int) -> str:
    """Exact at any size (Decimal arithmetic would round past 28 digits); no trailing zeros."""
    whole, fraction = divmod(wei, 10**decimals)
    digits = str(fraction).rjust(decimals, "0").rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def wei_to_ether(wei: int) -> str:
    """Exact, without trailing zeros: 1500000000000000000 -> "1.5"."""
    return _scaled(wei, 18)


def wei_to_gwei(wei: int) -> str:
    return _scaled(wei, 9)
