"""Turning pydantic validation errors into short messages with a path into the document.

Used by every place that validates input given by a person (settings, the operator file), so that
they all read the same: `providers[1].plans[0].methods[3].cost: must be >= 0`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic_core import ErrorDetails

_MESSAGES: dict[str, str] = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "missing": "is required",
    "extra_forbidden": "is not a known field",
    "string_too_short": "must have at least {min_length} character(s)",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} items",
    "enum": "must be one of: {expected}",
    "literal_error": "must be one of: {expected}",
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be a whole number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "datetime_parsing": "must be an RFC 3339 date-time",
    "datetime_from_date_parsing": "must be an RFC 3339 date-time",
    "datetime_type": "must be an RFC 3339 date-time",
    "timezone_aware": "must carry a time zone (for example Z)",
    "url_parsing": "must be a URL",
    "url_scheme": "must be a URL with scheme {expected_schemes}",
}


def error_message(error: ErrorDetails) -> str:
    template = _MESSAGES.get(error["type"])
    if template is not None:
        try:
            return template.format(**(error.get("ctx") or {}))
        except (KeyError, IndexError):
            pass
    return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def format_path(loc: Sequence[int | str]) -> str:
    """`("providers", 1, "plans", 0, "cost")` -> `providers[1].plans[0].cost`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(document)"


def describe_errors(errors: Iterable[ErrorDetails], prefix: Sequence[int | str] = ()) -> list[str]:
    return [f"{format_path([*prefix, *err['loc']])}: {error_message(err)}" for err in errors]
