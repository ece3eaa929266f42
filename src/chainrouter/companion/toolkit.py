"""How a companion tool is declared and run.

A tool is a pydantic model of its arguments (which gives the input schema, with descriptions,
ranges and enums) and an async function from validated arguments to a JSON object. Argument
errors and expected failures come back as tool results flagged `isError`, written so that a model
can correct its call; they never echo argument values, which may be secrets.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar

import mcp.types as mcp
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

log = logging.getLogger("chainrouter.companion")

Result = dict[str, Any]
ArgsT = TypeVar("ArgsT", bound=BaseModel)


class Arguments(BaseModel):
    """Tool arguments: unknown names are refused, so a misspelt argument is never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CamelArguments(Arguments):
    """Arguments the spec names in camelCase (`chainId`, `blockTag`, ...). Instances come from
    `model_validate` only, so the aliases the mypy plugin cannot see are never needed in code."""

    model_config = ConfigDict(  # type: ignore[pydantic-alias]
        alias_generator=to_camel, validate_by_name=False
    )


class ToolError(Exception):
    """An expected failure: the message tells the model what happened; `payload`, when given, is
    the structured result (for example a router's JSON-RPC error, passed through unchanged)."""

    def __init__(self, message: str, payload: Result | None = None) -> None:
        super().__init__(message)
        self.payload = payload


@dataclass(frozen=True)
class ToolSpec(Generic[ArgsT]):
    name: str
    title: str
    description: str
    arguments: type[ArgsT]
    run: Callable[[ArgsT], Awaitable[Result]]
    read_only: bool = True
    idempotent: bool = True
    destructive: bool = False

    def definition(self) -> mcp.Tool:
        return mcp.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=input_schema(self.arguments),
            annotations=mcp.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=True,
            ),
        )

    async def call(self, raw: dict[str, Any]) -> mcp.CallToolResult:
        try:
            arguments = self.arguments.model_validate(raw)
        except ValidationError as exc:
            return error_result(describe_invalid_arguments(self.name, self.arguments, exc))
        try:
            result = await self.run(arguments)
        except ToolError as failure:
            return error_result(str(failure), failure.payload)
        except Exception:
            # A bug or an answer of a shape nobody expected: the model gets a plain statement,
            # the user's log gets the traceback.
            log.exception("tool %s failed unexpectedly", self.name)
            return error_result(f"{self.name} failed unexpectedly; the companion's log says why")
        return success_result(result)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema with every `$ref` written out in place: some MCP clients and model
    APIs do not follow references."""
    schema = model.model_json_schema(by_alias=True)
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                target = inline(definitions[reference.removeprefix("#/$defs/")])
                extra = {k: inline(v) for k, v in node.items() if k != "$ref"}
                return {**target, **extra}
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    inlined.pop("title", None)
    return inlined


def describe_invalid_arguments(tool: str, model: type[BaseModel], exc: ValidationError) -> str:
    accepted = sorted(field.alias or name for name, field in model.model_fields.items())
    lines = [f"{tool}: invalid arguments, nothing was sent."]
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            message = f"unknown argument; this tool takes {', '.join(accepted)}"
        elif error["type"] == "missing":
            message = "required"
        else:
            message = error["msg"].removeprefix("Value error, ")
        lines.append(f"- {where}: {message}")
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """JSON-ready values: exact decimals become decimal strings, never floats."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def success_result(result: Result) -> mcp.CallToolResult:
    plain = _plain(result)
    return mcp.CallToolResult(
        content=[mcp.TextContent(text=json.dumps(plain, ensure_ascii=False))],
        structured_content=plain,
    )


def error_result(message: str, payload: Result | None = None) -> mcp.CallToolResult:
    text = message if payload is None else f"{message}\n{json.dumps(_plain(payload))}"
    return mcp.CallToolResult(
        content=[mcp.TextContent(text=text)],
        structured_content=None if payload is None else _plain(payload),
        is_error=True,
    )
