"""Which tools exist, and how they describe themselves: the thirteen RPC tools always, the four
customer tools with a management token, the seven provider tools when that token's customer is
linked to a provider. Schemas carry descriptions, ranges and enums; read-only tools say so."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from mcp.types import Tool

from chainrouter.companion.rpc_tools import refusal_reason
from tests.anvil import CHAIN_A, REPO_ROOT
from tests.companion.conftest import COMPANION_COMMAND, Service, companion, companion_env

pytestmark = pytest.mark.anyio

RPC_TOOLS = [
    "rpc_list_chains",
    "rpc_call",
    "rpc_get_block",
    "rpc_get_transaction",
    "rpc_get_transaction_receipt",
    "rpc_get_logs",
    "rpc_get_balance",
    "rpc_call_contract",
    "rpc_estimate_gas",
    "rpc_get_fee_data",
    "rpc_trace_transaction",
    "rpc_watch_heads",
    "rpc_watch_logs",
]
CUSTOMER_TOOLS = [
    "get_usage",
    "list_api_keys",
    "create_api_key",
    "update_api_key",
    "get_deposit_address",  # beside the spec's four: buying credits (docs/billing.md)
]
PROVIDER_TOOLS = [
    "provider_list_plans",
    "provider_get_plan_methods",
    "provider_get_node_status",
    "provider_upsert_plan_methods",
    "provider_upsert_node",
    "provider_upsert_ws_node",
    "provider_set_node_status",
]
WRITING_TOOLS = {
    "create_api_key",
    "update_api_key",
    "provider_upsert_plan_methods",
    "provider_upsert_node",
    "provider_upsert_ws_node",
    "provider_set_node_status",
}


async def _tools(env: dict[str, str]) -> dict[str, Tool]:
    async with companion(env) as session:
        listed = await session.list_tools()
    return {tool.name: tool for tool in listed.tools}


async def test_without_a_token_only_the_rpc_tools_exist(service: Service) -> None:
    assert list(await _tools(companion_env(service))) == RPC_TOOLS


async def test_a_customer_token_adds_the_customer_tools(service: Service) -> None:
    tools = await _tools(companion_env(service, SERVICE_MGMT_TOKEN=service.customer_token))
    assert list(tools) == RPC_TOOLS + CUSTOMER_TOOLS


async def test_a_provider_linked_token_adds_the_provider_tools(service: Service) -> None:
    tools = await _tools(companion_env(service, SERVICE_MGMT_TOKEN=service.provider_token))
    assert list(tools) == RPC_TOOLS + CUSTOMER_TOOLS + PROVIDER_TOOLS


async def test_a_tool_that_is_not_offered_is_an_error_naming_the_offered_ones(
    service: Service,
) -> None:
    async with companion(companion_env(service)) as session:
        result = await session.call_tool("get_usage", {})
    assert result.is_error
    assert "unknown tool 'get_usage'; the tools are rpc_call" in result.content[0].text  # type: ignore[union-attr]


async def test_tools_describe_themselves(service: Service) -> None:
    tools = await _tools(companion_env(service, SERVICE_MGMT_TOKEN=service.provider_token))
    for name, tool in tools.items():
        assert tool.description, name
        assert tool.title, name
        annotations = tool.annotations
        assert annotations is not None
        assert annotations.read_only_hint is (name not in WRITING_TOOLS), name
        assert "$ref" not in json.dumps(tool.input_schema), name
        assert tool.input_schema["type"] == "object"
    assert tools["update_api_key"].annotations.destructive_hint  # type: ignore[union-attr]
    assert tools["provider_set_node_status"].annotations.destructive_hint  # type: ignore[union-attr]
    assert not tools["create_api_key"].annotations.idempotent_hint  # type: ignore[union-attr]
    assert not tools["rpc_watch_heads"].annotations.idempotent_hint  # type: ignore[union-attr]

    def prop(tool: str, name: str) -> dict[str, Any]:
        schema: dict[str, Any] = tools[tool].input_schema["properties"][name]
        return schema

    assert (
        prop("rpc_list_chains", "limit")["default"],
        prop("rpc_list_chains", "limit")["maximum"],
    ) == (50, 500)
    assert prop("rpc_list_chains", "offset")["default"] == 0
    assert prop("rpc_get_logs", "toBlock")["default"] == "latest"
    assert tools["rpc_get_logs"].input_schema["required"] == ["chainId", "fromBlock"]
    assert prop("rpc_trace_transaction", "traceMethod")["enum"] == [
        "trace_transaction",
        "debug_traceTransaction",
    ]
    assert prop("rpc_trace_transaction", "allowFallback")["default"] is True
    assert prop("rpc_get_block", "includeTransactions")["default"] is False
    assert prop("rpc_call", "params")["type"] == "array"
    assert (
        prop("rpc_watch_logs", "limit")["maximum"],
        prop("rpc_watch_logs", "maxSeconds")["maximum"],
    ) == (1000, 120)
    assert tools["rpc_watch_heads"].input_schema["required"] == ["chainId"]
    assert (prop("get_usage", "limit")["default"], prop("get_usage", "limit")["maximum"]) == (
        20,
        100,
    )
    assert prop("get_usage", "granularity")["enum"] == ["day", "hour"]
    assert "from" in tools["get_usage"].input_schema["properties"]
    assert sorted(tools["create_api_key"].input_schema["required"]) == [
        "allowed_domains",
        "routing_strategy",
    ]
    assert prop("create_api_key", "routing_strategy")["enum"] == ["economy", "performance"]
    assert tools["update_api_key"].input_schema["required"] == ["api_key"]
    rows = prop("provider_upsert_plan_methods", "rows")
    assert (rows["minItems"], rows["maxItems"]) == (1, 500)
    assert "cost" in rows["items"]["properties"]
    assert prop("provider_set_node_status", "status")["enum"] == [
        "healthy",
        "disabled by provider",
        "provider-deleted",
    ]


def test_read_only_means_rpc_call_refuses_writes_but_not_reads() -> None:
    assert refusal_reason("eth_getStorageAt") is None
    assert refusal_reason("debug_traceCall") is None
    assert refusal_reason("debug_setHead") is not None


def _inspector(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The MCP Inspector's command line (npm @modelcontextprotocol/inspector), as a new user would
    try the server: the command and its -e variables exactly as an MCP client config holds them."""
    inspector = REPO_ROOT / "node_modules" / ".bin" / "mcp-inspector"
    variables = [
        arg
        for name, value in env.items()
        if name.startswith("SERVICE_")
        for arg in ("-e", f"{name}={value}")
    ]
    return subprocess.run(
        [str(inspector), "--cli", *variables, *COMPANION_COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO_ROOT,
    )


def test_a_stock_mcp_client_lists_and_calls_the_tools(service: Service) -> None:
    env = companion_env(service, SERVICE_MGMT_TOKEN=service.customer_token)
    listed = _inspector("--method", "tools/list", "--strict", env=env)
    assert listed.returncode == 0, listed.stderr
    names = [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
    assert names == RPC_TOOLS + CUSTOMER_TOOLS
    called = _inspector(
        "--method",
        "tools/call",
        "--tool-name",
        "rpc_get_balance",
        "--tool-arg",
        f"chainId={CHAIN_A}",
        "address=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "blockTag=earliest",
        env=env,
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["structuredContent"]["ether"] == "10000"
    assert result["structuredContent"]["batchId"]
