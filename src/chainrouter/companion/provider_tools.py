"""The seven provider tools, offered when the management token's customer is linked to a
provider. They mirror the provider routes and take the same bodies (`chainrouter.contracts`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chainrouter.companion.management_calls import management_list, management_object
from chainrouter.companion.remote import ManagementClient
from chainrouter.companion.toolkit import Arguments, CamelArguments, Result, ToolSpec
from chainrouter.contracts.provider import (
    HttpNodeIn,
    MethodPriceRows,
    NodeKind,
    NodeStatusIn,
    WsNodeIn,
)
from chainrouter.domain.money import credits_decimal
from chainrouter.operator_config.model import MethodPriceSpec


class PlanArgs(CamelArguments):
    plan_id: int = Field(ge=1, le=2**63 - 1, description="One of your plans (provider_list_plans).")


class PlanMethodsArgs(PlanArgs):
    rows: MethodPriceRows


class NodeStatusArgs(CamelArguments):
    node_id: int = Field(ge=1, le=2**63 - 1, description="One of your nodes.")
    kind: NodeKind = Field(default="http", description="http node or ws (WebSocket) node.")


def _row_body(row: MethodPriceSpec) -> dict[str, Any]:
    """A validated row as the route takes it: the cost back as an exact decimal string."""
    body = row.model_dump(mode="json", exclude_none=True)
    body["cost"] = format(credits_decimal(row.cost), "f")
    return body


class ProviderTools:
    def __init__(self, management: ManagementClient) -> None:
        self._management = management

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await management_object(self._management, method, path, **kwargs)

    async def _rows(self, method: str, path: str, **kwargs: Any) -> Any:
        return await management_list(self._management, method, path, **kwargs)

    async def list_plans(self, _: Arguments) -> Result:
        return {"plans": await self._rows("GET", "/provider/plans")}

    async def plan_methods(self, args: PlanArgs) -> Result:
        rows = await self._rows("GET", f"/provider/plans/{args.plan_id}/methods")
        return {"planId": args.plan_id, "methods": rows}

    async def node_status(self, args: NodeStatusArgs) -> Result:
        path = f"/provider/nodes/{args.node_id}/status"
        status: Result = await self._call("GET", path, params={"kind": args.kind})
        return status

    async def upsert_methods(self, args: PlanMethodsArgs) -> Result:
        rows = await self._rows(
            "POST",
            f"/provider/plans/{args.plan_id}/methods",
            body=[_row_body(row) for row in args.rows],
        )
        return {"planId": args.plan_id, "methods": rows}

    async def upsert_node(self, args: HttpNodeIn) -> Result:
        node: Result = await self._call("PUT", "/provider/nodes", body=args.model_dump(mode="json"))
        return node

    async def upsert_ws_node(self, args: WsNodeIn) -> Result:
        body = args.model_dump(mode="json")
        node: Result = await self._call("PUT", "/provider/nodes/ws", body=body)
        return node

    async def set_node_status(self, args: NodeStatusIn) -> Result:
        body = args.model_dump(mode="json")
        status: Result = await self._call("POST", "/provider/nodes/status", body=body)
        return status


def provider_tools(management: ManagementClient) -> list[ToolSpec[Any]]:
    tools = ProviderTools(management)
    return [
        ToolSpec(
            "provider_list_plans",
            "List your plans",
            "Your provider's plans with their terms (read only; administrators set them).",
            Arguments,
            tools.list_plans,
        ),
        ToolSpec(
            "provider_get_plan_methods",
            "Get a plan's method prices",
            "The method price rows of one of your plans.",
            PlanArgs,
            tools.plan_methods,
        ),
        ToolSpec(
            "provider_get_node_status",
            "Get a node's status",
            "Whether one of your nodes is in sync and its status (healthy, pending check, out "
            "of sync, failing, disabled by provider).",
            NodeStatusArgs,
            tools.node_status,
        ),
        ToolSpec(
            "provider_upsert_plan_methods",
            "Price plan methods",
            "Add or re-price 1 to 500 method rows of one of your plans, all or none; returns "
            'all rows of the plan. Write costs as decimal strings ("0.0000003"): credits, '
            "1 credit = 1 USD, at most 9 decimal places.",
            PlanMethodsArgs,
            tools.upsert_methods,
            read_only=False,
        ),
        ToolSpec(
            "provider_upsert_node",
            "Register an HTTP node",
            "Register or update (by URL) an HTTP(S) JSON-RPC node on one of your plans. The "
            "service screens it first (chain ID, block height, latest block) and refuses it "
            "when a mandatory test fails.",
            HttpNodeIn,
            tools.upsert_node,
            read_only=False,
        ),
        ToolSpec(
            "provider_upsert_ws_node",
            "Register a WebSocket node",
            "Register or update (by URL) a wss:// node on one of your plans; it must deliver "
            "a newHeads subscription before it is stored.",
            WsNodeIn,
            tools.upsert_ws_node,
            read_only=False,
        ),
        ToolSpec(
            "provider_set_node_status",
            "Enable, disable or delete a node",
            "Set one of your nodes to healthy (enable), disabled by provider, or "
            "provider-deleted (final).",
            NodeStatusIn,
            tools.set_node_status,
            read_only=False,
            destructive=True,
        ),
    ]
