"""Untrusted JSON through the standard library, without trusting how deep it recurses.

`json` is used where exactness matters (integers of any size, decimals), and its C decoder
recurses once per nesting level, stopping at Python's recursion limit. A process whose limit was
raised (a library may raise it: py_ecc sets 100,000) runs out of C stack first and dies on a
document of nested brackets. orjson stops at `MAX_DEPTH` levels whatever the limit, so a
document it finds deeper is refused before `json` sees it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_DEPTH = 1024  # orjson's own


def loads(document: bytes | str, **options: Any) -> Any:
    """`json.loads(document, **options)`, refusing a document nested deeper than MAX_DEPTH with
    the JSONDecodeError every caller of json.loads already handles."""
    try:
        orjson.loads(document)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            text = document if isinstance(document, str) else document.decode("utf-8", "replace")
            raise json.JSONDecodeError(
                f"nested more than {MAX_DEPTH} levels deep", text, exc.pos
            ) from None
        # Anything else orjson refuses, json judges for itself (it reads more than orjson does).
    return json.loads(document, **options)
