"""Bodies of the provider routes: node registration, node status, method price rows."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    WithJsonSchema,
    field_validator,
)

from chainrouter.domain.enums import NodeSource, NodeStatus
from chainrouter.domain.urls import normalise_url, refuse_userinfo
from chainrouter.management.admin import MAX_METHOD_ROWS
from chainrouter.operator_config.model import (
    ChainId,
    MethodPriceSpec,
    NoControls,
    NodeCapabilitiesSpec,
    NonNegativeInt,
    PositiveInt,
    RowId,
    TargetType,
    UrlLength,
)

# Stored and compared in their one spelling (domain/urls.py): `HTTP://Host:80` is `http://host/`;
# owned by identity (no credentials, which are refused, nor query).
# That spelling's length is checked too: percent-encoding can make it longer than the column.
NodeUrl = Annotated[
    StrictStr,
    Field(max_length=2048, pattern=r"^[hH][tT][tT][pP][sS]?://", description="http(s):// URL."),
    NoControls,
    AfterValidator(refuse_userinfo),
    AfterValidator(normalise_url),
    UrlLength,
]
WsUrl = Annotated[
    StrictStr,
    Field(max_length=2048, pattern=r"^[wW][sS][sS]://", description="A wss:// URL."),
    NoControls,
    AfterValidator(refuse_userinfo),
    AfterValidator(normalise_url),
    UrlLength,
]
NodeKind = Literal["http", "ws"]

MethodPriceRows = Annotated[
    list[MethodPriceSpec],
    Field(
        min_length=1,
        max_length=MAX_METHOD_ROWS,
        description=f"1 to {MAX_METHOD_ROWS} rows; a row with the identity (vm, method, "
        "node_target_type, chain_id) of an existing row re-prices it.",
    ),
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HttpNodeIn(_In):
    plan_id: RowId = Field(description="One of your plans.")
    url: NodeUrl = Field(description="The node's public JSON-RPC endpoint.")
    vm: Literal["evm"] = "evm"
    rate_limit: NonNegativeInt = Field(
        default=0, description="Requests per interval; 0: unlimited."
    )
    rate_limit_interval_sec: PositiveInt = 1
    source: NodeSource = NodeSource.PROVIDER
    node_target_type: TargetType = Field(
        default="full", description="Which of your plan's prices apply, e.g. full or archive."
    )
    capabilities: NodeCapabilitiesSpec | None = Field(
        default=None,
        description="What the node can answer: state and block history kept, tracing, its own "
        "eth_getLogs range and batch limits. Optional; screening verifies what it can and "
        "refuses a declaration it finds untrue.",
    )


class WsNodeIn(_In):
    plan_id: RowId = Field(description="One of your plans.")
    chain_id: ChainId
    url: WsUrl = Field(description="The node's public wss:// endpoint.")


class NodeStatusIn(_In):
    node_id: RowId
    # The schema offers the statuses one may set; `cordoned` is the audits' and proofs' alone.
    status: Annotated[
        NodeStatus,
        WithJsonSchema(
            {
                "type": "string",
                "enum": [
                    status.value for status in NodeStatus if status is not NodeStatus.CORDONED
                ],
            }
        ),
    ] = Field(
        description="healthy, disabled by provider or provider-deleted. healthy also brings a "
        "cordoned node back, watched (audited at the higher rate) for a day."
    )
    kind: NodeKind = Field(default="http", description="http or ws node.")

    @field_validator("status")
    @classmethod
    def _not_cordoned(cls, value: NodeStatus) -> NodeStatus:
        if value is NodeStatus.CORDONED:
            raise ValueError("only an audit or a failed proof cordons a node")
        return value
