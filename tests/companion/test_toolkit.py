"""How a tool runs, in process: arguments validated against the model, results as JSON text and
structured content alike, expected failures and crashes both turned into error results."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pydantic import Field

from chainrouter.companion.evm_values import to_block_tag, to_quantity, wei_to_ether, wei_to_gwei
from chainrouter.companion.management_calls import credits_as_strings
from chainrouter.companion.toolkit import (
    MAX_RESULT_BYTES,
    CamelArguments,
    Result,
    ToolError,
    ToolSpec,
    error_result,
    input_schema,
    success_result,
)
from chainrouter.contracts.provider import WsNodeIn

pytestmark = pytest.mark.anyio


class EchoArgs(CamelArguments):
    chain_id: int = Field(ge=1)
    secret_value: str = ""


async def _echo(args: EchoArgs) -> Result:
    if args.chain_id == 2:
        raise ToolError("two is refused", {"why": "test"})
    if args.chain_id == 3:
        raise RuntimeError("a bug")
    return {"chainId": args.chain_id, "amount": Decimal("0.000000001")}


ECHO = ToolSpec("echo", "Echo", "Echoes.", EchoArgs, _echo)


async def test_a_result_is_the_same_json_as_text_and_structured_content() -> None:
    result = await ECHO.call({"chainId": 1})
    assert not result.is_error
    assert result.structured_content == {"chainId": 1, "amount": "0.000000001"}
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]


async def test_expected_failures_and_crashes_are_error_results() -> None:
    refused = await ECHO.call({"chainId": 2})
    assert refused.is_error
    assert refused.structured_content == {"why": "test"}
    crashed = await ECHO.call({"chainId": 3})
    assert crashed.is_error
    assert crashed.content[0].text == "echo failed unexpectedly; the companion's log says why"  # type: ignore[union-attr]


@pytest.mark.parametrize("filler", ['"', "é", "\u2028", "\U0001f600", "\\"])
def test_a_result_of_escapes_and_wide_characters_is_cut_within_the_result_bound(
    filler: str,
) -> None:
    for result in (
        success_result({"batchId": "b-1", "result": [filler * 1000] * 1000}),
        error_result(filler * 20_000, {"batchId": "b-1", "error": {"data": filler * 10**6}}),
    ):
        text = result.content[0].text  # type: ignore[union-attr]
        assert len(text.encode()) <= MAX_RESULT_BYTES + 16 * 1024 + 100
        cut = json.loads(text.rsplit("\n", 1)[-1])
        assert cut == result.structured_content
        assert cut["batchId"] == "b-1"
        assert cut["truncated"]["bytes"] > MAX_RESULT_BYTES
        assert len(json.dumps(cut, ensure_ascii=False).encode()) <= MAX_RESULT_BYTES
    assert "[cut: the message was " in text


async def test_invalid_arguments_never_echo_their_values() -> None:
    result = await ECHO.call({"chainId": "zero", "secretValue": 5, "extra": "crk_secret"})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error
    assert "- chainId: Input should be a valid integer" in text
    assert "- extra: unknown argument; this tool takes chainId, secretValue" in text
    assert "zero" not in text
    assert "crk_secret" not in text


def test_schemas_have_no_references_left() -> None:
    schema = input_schema(WsNodeIn)
    assert "$ref" not in json.dumps(schema)
    assert "$defs" not in schema
    assert schema["required"] == ["plan_id", "chain_id", "url"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, "0x0"), ("21000", "0x5208"), ("0x05208", "0x5208"), (2**256 - 1, hex(2**256 - 1))],
)
def test_quantities_are_normalised_to_json_rpc_hex(value: object, expected: str) -> None:
    assert to_quantity(value) == expected


@pytest.mark.parametrize("value", [-1, 2**256, "1.5", "0xg", True, None, 1.0])
def test_bad_quantities_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        to_quantity(value)


def test_block_tags_and_units() -> None:
    assert to_block_tag(" Latest ") == "latest"
    assert to_block_tag(16) == "0x10"
    assert wei_to_ether(1_500_000_000_000_000_000) == "1.5"
    assert wei_to_ether(1) == "0.000000000000000001"
    assert wei_to_gwei(10**9) == "1"
    assert wei_to_gwei(2**256 - 1).startswith("115792089237316195423570985008687907853")


def test_credits_from_the_api_become_strings_and_nothing_else_does() -> None:
    answer = {"cost": 0, "price": Decimal("0.1"), "id": 7, "active": True, "rows": [{"cost": 2}]}
    assert credits_as_strings(answer) == {
        "cost": "0",
        "price": "0.1",
        "id": 7,
        "active": True,
        "rows": [{"cost": "2"}],
    }
