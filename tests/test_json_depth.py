"""Untrusted JSON read with the standard library (exact integers and decimals) is refused past
1,024 levels of nesting, whatever Python's recursion limit: json's decoder recursed until the C
stack ran out in a process whose limit a library had raised (py_ecc sets 100,000), and the
process died."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chainrouter import json_depth

_UNDER_A_RAISED_LIMIT = """
import json, sys
sys.setrecursionlimit(100_000)  # as py_ecc does on import
from chainrouter import json_depth
from chainrouter.catalog.parse import CatalogFormatError, parse_catalog
from chainrouter.jsonrpc.envelope import load_json_exactly
deep = b"[" * 200_000 + b"]" * 200_000
try:
    parse_catalog(deep)
except CatalogFormatError as exc:
    print("catalog:", exc)
try:
    load_json_exactly(deep)
except Exception as exc:
    print("rpc:", type(exc).__name__)
try:
    json_depth.loads(deep)
except json.JSONDecodeError as exc:
    print("api:", exc.msg)
"""


def test_a_document_nested_past_the_bound_is_refused_even_under_a_raised_recursion_limit() -> None:
    child = subprocess.run(
        [sys.executable, "-c", _UNDER_A_RAISED_LIMIT], capture_output=True, text=True, check=False
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "catalog: not a chain catalog: nested too deeply" in child.stdout
    assert "rpc: " in child.stdout
    assert "api: nested more than 1024 levels deep" in child.stdout


def test_within_the_bound_the_standard_librarys_reading_is_kept() -> None:
    nested = "[" * 500 + "123456789012345678901234567890" + "]" * 500
    value = json_depth.loads(nested)
    for _ in range(500):
        value = value[0]
    assert value == 123456789012345678901234567890  # exact, as json reads it
    with pytest.raises(json.JSONDecodeError, match="1024 levels"):
        json_depth.loads("[" * 1025 + "]" * 1025)
    with pytest.raises(json.JSONDecodeError):
        json_depth.loads("[1,")  # what orjson refuses otherwise, json judges
