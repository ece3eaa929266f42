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

# What one tool call gives an agent, as JSON (docs/mcp-companion.md): an agent's context holds a
# few hundred KB, a router's answer up to 32 MiB. Larger results are cut (`bounded`).
MAX_RESULT_BYTES = 256 * 1024
_MAX_MESSAGE_BYTES = 16 * 1024  # an error's message, before its payload
_SHORT_FIELD = 200  # top-level strings kept in a cut result (a batch id, a method name)


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


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _prefix(text: str, room: int) -> str:
    """The longest start of `text` whose JSON string (quotes left out) is at most `room`
    bytes."""
    part = text.encode()[:room].decode(errors="ignore")
    # Escapes make the JSON longer than the text; each character dropped saves at least a byte.
    while (excess := len(_json(part).encode()) - 2 - room) > 0:
        part = part[:-excess]
    return part


def bounded(result: Result) -> Result:
    """`result`, or when its JSON is larger than MAX_RESULT_BYTES, its short top-level fields
    (batchId, chainId, method, ...), its size and the start of its JSON as text: a router answers
    up to 32 MiB, which would flood an agent's context."""
    size = len(_json(result).encode())
    if size <= MAX_RESULT_BYTES:
        return result
    kept = {
        name: value
        for name, value in result.items()
        if value is None
        or isinstance(value, bool | int)
        or (isinstance(value, str) and len(value) <= _SHORT_FIELD)
    }
    note = (
        f"the answer was {size} bytes of JSON, more than the {MAX_RESULT_BYTES} a tool returns, "
        "so it was cut: `partial` is its start, as text that does not parse. Ask for less (a "
        "smaller block range or page, fewer fields, a narrower call)."
    )
    cut: Result = {
        **kept,
        "truncated": {"bytes": size, "limit": MAX_RESULT_BYTES, "note": note},
        "partial": "",
    }
    cut["partial"] = _prefix(_json(result), MAX_RESULT_BYTES - len(_json(cut).encode()))
    return cut


def success_result(result: Result) -> mcp.CallToolResult:
    plain = bounded(_plain(result))
    return mcp.CallToolResult(
        content=[mcp.TextContent(text=_json(plain))],
        structured_content=plain,
    )


def error_result(message: str, payload: Result | None = None) -> mcp.CallToolResult:
    # A router's error message and data are passed through, and may be as large as an answer.
    size = len(message.encode())
    if size > _MAX_MESSAGE_BYTES:
        start = message.encode()[:_MAX_MESSAGE_BYTES].decode(errors="ignore")
        message = f"{start} [cut: the message was {size} bytes]"
    plain = None if payload is None else bounded(_plain(payload))
    text = message if plain is None else f"{message}\n{_json(plain)}"
    return mcp.CallToolResult(
        content=[mcp.TextContent(text=text)], structured_content=plain, is_error=True
    )
