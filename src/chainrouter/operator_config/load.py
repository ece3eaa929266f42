"""Reading an operator file: YAML to a validated `OperatorConfig`, or every problem with its path.

The YAML loader differs from PyYAML's safe loader in ways that protect money and intent:
numbers with a fraction are read as exact `Decimal`s (so `cost: 0.0000003` is exactly that); a
mapping that repeats a key is an error instead of silently keeping the last value; only `true`
and `false` are booleans, as in YAML 1.2 (YAML 1.1 also reads yes, no, on, off, y and n as
booleans, so that a key named `off` or a country `NO` would silently become `false`); and numbers
are YAML 1.2's: YAML 1.1 reads `0100` as octal 64 and `1:30` as base 60 (90), so a leading zero
is an error and base 60 is text. Anchors and aliases are refused, as is deep nesting.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import ValidationError

from chainrouter.operator_config.model import OperatorConfig, find_duplicates
from chainrouter.validation import describe_errors

MAX_FILE_BYTES = 16 * 1024 * 1024
# The model is 8 levels deep; composing is recursive, and deeper text reached Python's recursion
# limit (a traceback instead of an error).
MAX_DEPTH = 64
# No field takes more than 19 digits (2**63 - 1); Python converts at most 4,300 (a ValueError).
_MAX_INTEGER_DIGITS = 100


class ConfigFileError(Exception):
    """The file cannot be applied; `problems` lists each mistake as `path: message`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _composer_error(event: yaml.Event, problem: str) -> yaml.composer.ComposerError:
    # The pure-Python parser's events carry yaml.error.Mark (the stubs also allow libyaml's).
    return yaml.composer.ComposerError(None, None, problem, cast(yaml.Mark, event.start_mark))


class _ExactLoader(yaml.SafeLoader):
    _depth = 0  # of the node being composed: the document's root is 1

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in stubs
        # An alias repeats what its anchor names without the text growing: nested lists of them
        # grow exponentially (a 7 KB file became gigabytes). An operator file writes each entry out.
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            raise _composer_error(
                event,
                "anchors (&name) and aliases (*name) are not allowed: write each entry out in full",
            )
        if self._depth == MAX_DEPTH:
            raise _composer_error(event, f"nested more than {MAX_DEPTH} levels deep")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, AttributeError):
            # PyYAML's constructors fail so on text their tag cannot hold (2024-02-30,
            # !!float abc). Their messages may quote the text: only the tag is named.
            kind = node.tag.rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {kind}", node.start_mark
            ) from None


def _scalar(node: yaml.Node) -> yaml.ScalarNode:
    if not isinstance(node, yaml.ScalarNode):  # !!int or !!float on a list or mapping
        raise yaml.constructor.ConstructorError(
            None, None, "expected a single value, not a list or mapping", node.start_mark
        )
    return node


def _construct_decimal(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    scalar = _scalar(node)
    try:
        return Decimal(str(scalar.value).replace("_", ""))
    except InvalidOperation:
        # .inf / .nan and friends: keep PyYAML's reading; validation refuses them for money.
        return yaml.SafeLoader.construct_yaml_float(loader, scalar)


# YAML 1.2's integers: decimal, 0x hexadecimal and 0o octal (with PyYAML's `_` between digits).
_INTEGER = re.compile(r"^[-+]?(?:0|[1-9][0-9_]*|0x[0-9a-fA-F][0-9a-fA-F_]*|0o[0-7][0-7_]*)$")
# YAML 1.1 reads 0100 as octal (64), YAML 1.2 as 100: refused rather than either guessed.
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")
_LEADING_ZERO_TAG = "tag:chainrouter:leading-zero"
# PyYAML's floats without the base-60 form (190:20:30.15): that is text.
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    text = str(_scalar(node).value)
    if not _INTEGER.match(text):  # an explicit !!int tag on something else
        raise yaml.constructor.ConstructorError(
            None, None, "an integer is written in decimal, or as 0x... or 0o...", node.start_mark
        )
    if sum(c.isdigit() for c in text) > _MAX_INTEGER_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of more than {_MAX_INTEGER_DIGITS} digits", node.start_mark
        )
    return int(text.replace("_", ""), 0)


def _refuse_leading_zero(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None,
        None,
        "a number with a leading zero is octal in YAML 1.1 and decimal in YAML 1.2: write it "
        "without the zero (0o... for octal), or in quotes if it is text",
        node.start_mark,
    )


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if not isinstance(node, yaml.MappingNode):  # !!map on a single value or a list
        raise yaml.constructor.ConstructorError(None, None, "expected a mapping", node.start_mark)
    keys: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: no field is named so
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                "a key must be a single value, not a list or mapping",
                key_node.start_mark,
            )
        key = loader.construct_object(key_node)
        if key in keys:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        keys[key] = key_node
    return loader.construct_mapping(node)


_REPLACED_RESOLVERS = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
_ExactLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in _REPLACED_RESOLVERS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ExactLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_ExactLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INTEGER, list("-+0123456789"))
_ExactLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_ExactLoader.add_implicit_resolver(_LEADING_ZERO_TAG, _LEADING_ZERO, list("-+0"))
_ExactLoader.add_constructor(_LEADING_ZERO_TAG, _refuse_leading_zero)
_ExactLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_ExactLoader.add_constructor("tag:yaml.org,2002:float", _construct_decimal)
_ExactLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    """What is wrong and where, never PyYAML's excerpt of the line: that may hold a secret."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)  # a ReaderError: the character's code and position
    parts = [
        text + (f" at line {mark.line + 1}, column {mark.column + 1}" if mark else "")
        for text, mark in [(exc.context, exc.context_mark), (exc.problem, exc.problem_mark)]
        if text
    ]
    return ": ".join(parts)


def parse_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_ExactLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = _describe_yaml_error(exc)
        raise ConfigFileError([f"(document): not valid YAML: {problem}"]) from None


def validate_document(document: Any) -> OperatorConfig:
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigFileError(["(document): must be a mapping with chains, providers, customers"])
    try:
        config = OperatorConfig.model_validate(document)
    except ValidationError as exc:
        raise ConfigFileError(describe_errors(exc.errors())) from None
    duplicates = find_duplicates(config)
    if duplicates:
        raise ConfigFileError(duplicates)
    return config


def load_config_file(path: Path) -> OperatorConfig:
    if not path.is_file():
        raise ConfigFileError([f"(document): no such file: {path}"])
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigFileError([f"(document): larger than {MAX_FILE_BYTES} bytes"])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigFileError(["(document): not UTF-8 text"]) from None
    return validate_document(parse_yaml(text))
