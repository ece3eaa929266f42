"""`chainrouter mcp`: the companion MCP server, over stdio.

It keeps no state between calls. At start it reads its configuration and, when a management token
is configured, asks the management API once whether the token's customer is linked to a provider:
that decides whether the provider tools exist. stdout carries the MCP protocol only; every log
line goes to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import anyio
import mcp.types as mcp
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from chainrouter.companion.account_tools import account_tools
from chainrouter.companion.billing_tools import billing_tools
from chainrouter.companion.config import CompanionConfig, ConfigError, load_config
from chainrouter.companion.provider_tools import provider_tools
from chainrouter.companion.remote import (
    ManagementClient,
    RouterClient,
    ServiceUnavailableError,
    build_http_client,
)
from chainrouter.companion.rpc_tools import rpc_tools
from chainrouter.companion.toolkit import ToolSpec, error_result
from chainrouter.companion.watch_tools import watch_tools

log = logging.getLogger("chainrouter.companion")

EXIT_CONFIG = 2

INSTRUCTIONS = (
    "Tools of the chainrouter JSON-RPC service. rpc_* tools read EVM chains through the "
    "service's routers (read-only; every result carries the batchId to quote to support); "
    "rpc_watch_* hold a WebSocket for a bounded time to collect new heads or logs. "
    "Customer tools (usage, API keys) and provider tools appear when the configured management "
    "token allows them. Credits are exact decimal strings; 1 credit = 1 USD."
)


async def provider_linked(management: ManagementClient) -> bool:
    """Whether the token's customer is linked to a provider. A token the API refuses stops the
    server (it is a configuration mistake); an API that cannot be reached leaves the provider
    tools out, with a warning, rather than taking the RPC tools down too."""
    try:
        answer = await management.request("GET", "/provider/plans")
    except ServiceUnavailableError as exc:
        log.warning("provider tools are off until a restart: %s", exc)
        return False
    if answer.status == 200:
        return True
    if answer.status == 401:
        raise ConfigError(
            f"SERVICE_MGMT_TOKEN was refused by the management API at {management.base_url} "
            "(missing, invalid or revoked token)"
        )
    if answer.status != 403:
        log.warning(
            "provider tools are off until a restart: %s answered HTTP %d",
            management.base_url,
            answer.status,
        )
    return False


def build_server(tools: Sequence[ToolSpec[Any]]) -> Server[Any]:
    by_name = {tool.name: tool for tool in tools}
    definitions = [tool.definition() for tool in tools]

    async def list_tools(
        _ctx: Any, _params: mcp.PaginatedRequestParams | None
    ) -> mcp.ListToolsResult:
        return mcp.ListToolsResult(tools=definitions)

    async def call_tool(_ctx: Any, params: mcp.CallToolRequestParams) -> mcp.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return error_result(
                f"unknown tool {params.name!r}; the tools are {', '.join(sorted(by_name))}"
            )
        return await tool.call(params.arguments or {})

    return Server(
        "chainrouter",
        version=version("chainrouter"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _serve(config: CompanionConfig) -> None:
    async with build_http_client(config) as http:
        router = RouterClient(config, http)
        management = ManagementClient(config, http)
        tools = rpc_tools(router, management) + watch_tools(config)
        if config.management_token is not None:
            tools += account_tools(management) + billing_tools(management)
            if await provider_linked(management):
                tools += provider_tools(management)
        backup = config.backup_router_url or "none (retries go to the primary)"
        log.info(
            "serving %d tools over stdio; router %s, backup %s, management API %s",
            len(tools),
            config.router_url,
            backup,
            config.api_server_url,
        )
        server = build_server(tools)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `chainrouter mcp` and `chainrouter-mcp`; returns the exit code."""
    del argv  # configuration comes from the environment, as MCP clients pass it
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    # httpx logs every request URL at INFO, and router URLs carry the API key.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        config = load_config(os.environ)
        anyio.run(_serve, config)
    except ConfigError as exc:
        print(f"chainrouter mcp: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        pass
    return 0


def console_main() -> None:
    sys.exit(main())
