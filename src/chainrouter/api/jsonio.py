"""JSON in and out with exact decimals.

Request bodies are parsed with decimal numbers kept as `Decimal`, so `"amount": 0.1` means one
tenth exactly. Responses render `Decimal` as a JSON number with exactly its digits (orjson
fragments), so `0.0000003` credits never turns into a binary float on the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from chainrouter import json_depth

JSON = "application/json"


class ExactJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json_depth.loads(await self.body(), parse_float=Decimal)
        return self._json


class ExactJsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def exact_handler(request: Request) -> Response:
            return await handler(ExactJsonRequest(request.scope, request.receive))

        return exact_handler


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        text = format(value, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return orjson.Fragment(text or "0")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode(content: Any, *, exclude_none: bool = False) -> bytes:
    """`exclude_none` leaves out absent optional parts (the usage report's sections)."""
    if isinstance(content, BaseModel):
        content = content.model_dump(mode="python", by_alias=True, exclude_none=exclude_none)
    elif isinstance(content, list):
        content = [
            item.model_dump(mode="python", by_alias=True, exclude_none=exclude_none)
            if isinstance(item, BaseModel)
            else item
            for item in content
        ]
    return orjson.dumps(content, default=_default, option=orjson.OPT_UTC_Z)


def respond(
    content: Any,
    status_code: int = 200,
    *,
    headers: dict[str, str] | None = None,
    exclude_none: bool = False,
) -> Response:
    body = encode(content, exclude_none=exclude_none)
    return Response(body, status_code=status_code, media_type=JSON, headers=headers)
