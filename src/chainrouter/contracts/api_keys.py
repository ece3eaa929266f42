"""Bodies of `POST /api-keys`, `PATCH /api-keys/{id}` and `POST /api-keys/lookup`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator

from chainrouter.domain.enums import RoutingStrategy
from chainrouter.operator_config.model import (
    AllowedDomain,
    Credits,
    KeyRateInterval,
    KeyRateLimit,
    NoControls,
)

Domains = Annotated[
    list[AllowedDomain],
    Field(
        min_length=1,
        max_length=100,
        description="Host names allowed to use the key: app.example.com, *.example.com "
        "(subdomains) or * (any origin, and requests without Origin or Referer).",
    ),
]
KeyName = Annotated[
    StrictStr, Field(max_length=200, description="A label for the key."), NoControls
]
Strategy = Annotated[
    RoutingStrategy,
    Field(description="economy: cheapest route first; performance: fastest route first."),
]

MaxPrice = Annotated[
    Credits,
    Field(
        ge=0,
        description="The most one call may cost, in credits (exact); a call no route serves "
        "within it is refused (HTTP 422, -32013), never billed; 0: no cap.",
    ),
]
SpendAlert = Annotated[
    Credits,
    Field(
        ge=0,
        description="Credits per UTC day: spending more raises an alert (GET /account, the "
        "dashboard); 0: none. Nothing is refused: the rate limit bounds spend.",
    ),
]


Verified = Annotated[
    StrictBool,
    Field(
        description="Every answer the chain lets the router prove is proven before it is "
        "served (X-Verified: proof), whatever the chain's own setting; the proofs' extra node "
        'calls make such calls slower (docs/integrity.md, "Verified answers").'
    ),
]


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allowed_domains: Domains
    routing_strategy: Strategy
    name: KeyName = ""
    rate_limit: KeyRateLimit = 0
    rate_limit_interval_sec: KeyRateInterval = 1
    spend_alert: SpendAlert = 0
    verified: Verified = False
    max_price_per_call: MaxPrice = 0


class ApiKeyUpdate(BaseModel):
    """Fields left out keep their stored value."""

    model_config = ConfigDict(extra="forbid")

    name: KeyName | None = None
    active: StrictBool | None = Field(default=None, description="false stops the key at once.")
    allowed_domains: Domains | None = None
    routing_strategy: Strategy | None = None
    rate_limit: KeyRateLimit | None = None
    rate_limit_interval_sec: KeyRateInterval | None = None
    spend_alert: SpendAlert | None = None
    verified: Verified | None = None
    max_price_per_call: MaxPrice | None = None

    @model_validator(mode="after")
    def _no_nulls(self) -> ApiKeyUpdate:
        nulls = [name for name in self.model_fields_set if getattr(self, name) is None]
        if nulls:
            raise ValueError(f"{', '.join(sorted(nulls))} may be left out but not null")
        return self


ApiKeySecret = Annotated[
    StrictStr,
    Field(max_length=200, description="The full secret of one of your keys."),
    NoControls,
]


class ApiKeyLookup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: ApiKeySecret
