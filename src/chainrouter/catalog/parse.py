"""Parsing the ethereum-lists `chains.json` format into `Chain` objects.

A catalog is a JSON array of entries. Entries that cannot be used are reported and skipped; one
bad entry never stops the others. Fields this service does not use are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from chainrouter import json_depth
from chainrouter.domain.chains import MAX_CHAIN_ID, Chain, Explorer
from chainrouter.domain.enums import ChainStatus
from chainrouter.operator_config.model import Line, NoControls
from chainrouter.validation import describe_errors

# Every string refuses control characters (PostgreSQL text cannot hold NUL): an entry with one
# is skipped like any other malformed entry, and the others are imported.
_Name = Annotated[StrictStr, Field(min_length=1, max_length=200), NoControls]


class _Currency(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls]
    symbol: Annotated[StrictStr, Field(min_length=1, max_length=40), NoControls]
    decimals: Annotated[StrictInt, Field(ge=0, le=255)]


class _Explorer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: Annotated[StrictStr, Field(max_length=200), NoControls] = ""
    url: Annotated[StrictStr, Field(min_length=1, max_length=2048), NoControls]
    standard: Line | None = None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: _Name
    chain: Annotated[StrictStr, Field(max_length=100), NoControls] | None = None
    chainId: Annotated[StrictInt, Field(ge=1, le=MAX_CHAIN_ID)]  # noqa: N815 - the file's name
    shortName: Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls]  # noqa: N815
    nativeCurrency: _Currency  # noqa: N815
    infoURL: Annotated[StrictStr, Field(max_length=2048), NoControls] | None = None  # noqa: N815
    icon: Annotated[StrictStr, Field(max_length=200), NoControls] | None = None
    status: ChainStatus = ChainStatus.ACTIVE
    explorers: list[_Explorer] = Field(default_factory=list)
    rpc: list[Annotated[StrictStr, Field(max_length=2048), NoControls]] = Field(
        default_factory=list
    )

    def to_chain(self) -> Chain:
        return Chain(
            chain_id=self.chainId,
            name=self.name,
            short_name=self.shortName,
            network=self.chain or None,
            native_currency_name=self.nativeCurrency.name,
            native_currency_symbol=self.nativeCurrency.symbol,
            native_currency_decimals=self.nativeCurrency.decimals,
            info_url=self.infoURL or None,
            icon=self.icon or None,
            status=self.status,
            explorers=tuple(Explorer(e.name, e.url, e.standard) for e in self.explorers),
            public_rpc_urls=tuple(self.rpc),
        )


@dataclass(frozen=True, slots=True)
class EntryProblem:
    """Why entry number `index` (0-based position in the array) was skipped."""

    index: int
    chain_id: object
    reason: str

    def __str__(self) -> str:
        which = f"entry {self.index}"
        if self.chain_id is not None:
            which += f" (chainId {self.chain_id!r})"
        return f"{which}: {self.reason}"


@dataclass(slots=True)
class ParsedCatalog:
    chains: list[Chain] = field(default_factory=list)
    problems: list[EntryProblem] = field(default_factory=list)


class CatalogFormatError(ValueError):
    """The document as a whole is not a chain catalog (not JSON, or not an array)."""


# No field takes more than 19 digits (2**63 - 1); Python converts at most 4,300, and a longer
# integer made json.loads fail the whole document.
_MAX_INTEGER_DIGITS = 100


class _LongInteger(int):
    """A JSON integer too long to convert, kept as its first digits: as far beyond every bound, so
    that validation refuses it in its own entry, and named by its length in messages."""

    digits: int

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits <= _MAX_INTEGER_DIGITS:
        return int(text)
    value = _LongInteger(text[: _MAX_INTEGER_DIGITS + 1])
    value.digits = digits
    return value


def parse_catalog(document: bytes | str) -> ParsedCatalog:
    try:
        data = json_depth.loads(document, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("nested more than"):
            raise CatalogFormatError(
                f"not a chain catalog: nested too deeply ({exc.msg})"
            ) from None
        raise CatalogFormatError(f"not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise CatalogFormatError(f"not valid JSON: {exc}") from None
    except RecursionError:  # within orjson's depth, but past a recursion limit set lower
        raise CatalogFormatError("not a chain catalog: nested too deeply") from None
    if not isinstance(data, list):
        raise CatalogFormatError("a chain catalog is a JSON array of chain entries")
    return parse_entries(data)


def parse_entries(entries: list[Any]) -> ParsedCatalog:
    result = ParsedCatalog()
    seen: dict[int, int] = {}
    for index, raw in enumerate(entries):
        chain_id = raw.get("chainId") if isinstance(raw, dict) else None
        if not isinstance(raw, dict):
            result.problems.append(EntryProblem(index, None, "an entry must be a JSON object"))
            continue
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError as exc:
            reason = "; ".join(describe_errors(exc.errors()))
            result.problems.append(EntryProblem(index, chain_id, reason))
            continue
        if entry.chainId in seen:
            reason = f"duplicate chainId, already given by entry {seen[entry.chainId]}"
            result.problems.append(EntryProblem(index, chain_id, reason))
            continue
        seen[entry.chainId] = index
        result.chains.append(entry.to_chain())
    return result
