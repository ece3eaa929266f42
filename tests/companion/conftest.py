"""The companion as a user runs it: `chainrouter mcp` as a subprocess, driven over stdio by the
official MCP client, against a running chainrouter (two routers and the management API as
`chainrouter serve` processes on one database) with anvil upstreams.

The world: chains A (31337) and B (31338), one anvil each, and on each a contract deployment
whose constructor emits one log. Provider acme prices every method the tools use, except that
trace_transaction is priced on chain B only (so chain A exercises the trace fallback). Customer
dev has an API key, 10 credits and a management token; customer acme-ops has a token linked to
provider acme; customer broke has an API key and no credits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import CHAIN_A, CHAIN_B, anvil_binary, free_port, wait_until_answering
from tests.served import serve, stop, wait_healthy
from tests.tls_nodes import MINING_CHAIN, MiningNode, Tls

ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
# The provider tests register a node of this chain and price methods on it only, so that what
# they add never changes how the other tests' calls on chains A and B are routed.
SPARE_CHAIN = 31340  # anvil's first unlocked account
# The watch tests mine this chain's node (blocks, logs) and subscribe through its WebSocket:
# what they do never moves the blocks the other tests read on chains A and B.
WATCH_CHAIN = 31341
HEAD_PRICE, LOG_PRICE = "0.000002", "0.000003"
# The BIP-39 test mnemonic's account m/44'/60'/0' (tests/domain/test_deposit_address.py).
DEPOSIT_XPUB = (
    "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3"
    "yZdUsT8ddYM3PwnATt"
)
LOG_TOPIC = "0x" + "c0ffee" * 10 + "beef"
# Init code (55 bytes): store 42, emit LOG1(LOG_TOPIC) over it, copy the 10-byte runtime that
# follows (at offset 0x37) and return it. The runtime answers every call with 42.
_RUNTIME = "602a60005260206000f3"
DEPLOY_CODE = (
    "0x602a600052"  # MSTORE(0, 42)
    + "7f"
    + LOG_TOPIC[2:]  # PUSH32 topic
    + "60206000a1"  # LOG1(offset 0, size 32, topic)
    + "600a6037600039"  # CODECOPY(0, 0x37, 10)
    + "600a6000f3"  # RETURN(0, 10)
    + _RUNTIME
)

PRICES = {
    "eth_chainId": "0",
    "eth_blockNumber": "0.0000001",
    "eth_getBlockByNumber": "0.0000003",
    "eth_getBlockByHash": "0.0000003",
    "eth_getTransactionByHash": "0.0000003",
    "eth_getTransactionReceipt": "0.0000003",
    "eth_getLogs": "0.000001",
    "eth_getBalance": "0.0000002",
    "eth_getCode": "0.0000002",
    "eth_call": "0.0000005",
    "eth_estimateGas": "0.0000005",
    "eth_gasPrice": "0.0000001",
    "eth_maxPriorityFeePerGas": "0.0000001",
    "eth_feeHistory": "0.0000002",
    "debug_traceTransaction": "0.000002",
}


@dataclass(frozen=True)
class ChainFacts:
    chain_id: int
    node_url: str
    tx_hash: str
    contract: str
    block_number: int


@dataclass(frozen=True)
class Service:
    primary: str
    backup: str
    api: str
    api_key: str
    broke_api_key: str
    customer_token: str
    provider_token: str
    chains: dict[int, ChainFacts]
    spare_node_url: str  # an anvil of SPARE_CHAIN in no plan, for registration through the tools
    mining: MiningNode
    database_url: str


def _node_call(url: str, method: str, params: list[Any]) -> Any:
    body = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return body.json()["result"]


def _start_anvil(chain_id: int, processes: list[subprocess.Popen[bytes]]) -> str:
    port = free_port()
    processes.append(
        subprocess.Popen(
            [anvil_binary(), "--port", str(port), "--chain-id", str(chain_id), "--silent"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(url)
    return url


def _deploy(url: str, chain_id: int) -> ChainFacts:
    tx_hash = _node_call(url, "eth_sendTransaction", [{"from": ACCOUNT, "data": DEPLOY_CODE}])
    receipt = _node_call(url, "eth_getTransactionReceipt", [tx_hash])
    assert receipt["status"] == "0x1", receipt
    assert receipt["logs"][0]["topics"] == [LOG_TOPIC]
    return ChainFacts(
        chain_id, url, tx_hash, receipt["contractAddress"], int(receipt["blockNumber"], 16)
    )


def _world(secrets: dict[str, str], nodes: dict[int, str]) -> dict[str, Any]:
    methods: list[dict[str, Any]] = [
        {"method": method, "cost": Decimal(cost)} for method, cost in PRICES.items()
    ]
    trace = {"method": "trace_transaction", "cost": Decimal("0.000002"), "chain_id": CHAIN_B}
    methods.append(trace)
    for kind, price in (("newHeads", HEAD_PRICE), ("logs", LOG_PRICE)):
        methods.append(
            {
                "method": kind,
                "node_target_type": "ws",
                "cost": Decimal(price),
                "chain_id": WATCH_CHAIN,
            }
        )
    watch_node = nodes[WATCH_CHAIN].replace("http://", "ws://")
    return {
        "version": 1,
        "chains": [
            {
                "chain_id": chain_id,
                "name": name,
                "short_name": short,
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
            for chain_id, name, short in (
                (CHAIN_A, "Companion Alpha", "alpha"),
                (CHAIN_B, "Companion Beta", "beta"),
                (MINING_CHAIN, "Companion Mining", "mining"),
                (SPARE_CHAIN, "Companion Spare", "spare"),
                (WATCH_CHAIN, "Companion Watch", "watch"),
            )
        ],
        "providers": [
            {
                "slug": "acme",
                "name": "Acme Nodes",
                "plans": [
                    {
                        "name": "standard",
                        "methods": methods,
                        "nodes": [{"url": url, "chain_id": c} for c, url in nodes.items()],
                        "ws_nodes": [{"url": watch_node, "chain_id": WATCH_CHAIN}],
                    },
                    {"name": "spare", "methods": []},
                ],
            },
            {"slug": "rival", "name": "Rival", "plans": [{"name": "rival-plan", "methods": []}]},
        ],
        "customers": [
            {
                "email": "dev@companion.test",
                "name": "Companion Dev",
                "credits": [{"reference": "welcome", "amount": Decimal(10)}],
                "api_keys": [
                    {
                        "name": "main",
                        "secret": secrets["main"],
                        "allowed_domains": ["*"],
                        "routing_strategy": "economy",
                    }
                ],
                "management_tokens": [{"label": "console", "secret": secrets["console"]}],
            },
            {
                "email": "ops@acme.test",
                "name": "Acme Ops",
                "provider": "acme",
                "management_tokens": [{"label": "ops", "secret": secrets["ops"]}],
            },
            {
                "email": "broke@companion.test",
                "name": "Broke",
                "api_keys": [
                    {
                        "name": "broke",
                        "secret": secrets["broke"],
                        "allowed_domains": ["*"],
                        "routing_strategy": "economy",
                    }
                ],
            },
        ],
        # Deposits of chain A's coin buy credits (get_deposit_address; docs/billing.md).
        "payments": {
            "deposit_xpub": DEPOSIT_XPUB,
            "deposits": [{"chain_id": CHAIN_A, "asset": "native", "credits_per_unit": 2000}],
        },
    }


@pytest.fixture(scope="session")
def service(
    tmp_path_factory: pytest.TempPathFactory, tls: Tls, mining_anvil: MiningNode
) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("companion")
    anvils: list[subprocess.Popen[bytes]] = []
    servers: list[subprocess.Popen[bytes]] = []
    try:
        nodes = {
            chain_id: _start_anvil(chain_id, anvils) for chain_id in (CHAIN_A, CHAIN_B, WATCH_CHAIN)
        }
        spare = _start_anvil(SPARE_CHAIN, anvils)
        chains = {chain_id: _deploy(url, chain_id) for chain_id, url in nodes.items()}
        secrets = {
            "main": generate_secret(SecretKind.API_KEY),
            "broke": generate_secret(SecretKind.API_KEY),
            "console": generate_secret(SecretKind.MANAGEMENT_TOKEN),
            "ops": generate_secret(SecretKind.MANAGEMENT_TOKEN),
        }
        database_url = f"sqlite:///{work / 'service.db'}"
        engine = create_database_engine(database_url)
        migrate.upgrade(engine)
        apply_config(engine, validate_document(_world(secrets, nodes)))
        engine.dispose()
        ports = {"primary": free_port(), "backup": free_port(), "api": free_port()}
        env = {
            **os.environ,
            "CHAINROUTER_DATABASE_URL": database_url,
            "CHAINROUTER_API_PORT": str(ports["api"]),
            "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "1",
            "CHAINROUTER_LOG_LEVEL": "warning",
            # Registration screening dials the local anvils and the test CA's wss front.
            "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",
            "CHAINROUTER_OUTBOUND_CA_FILE": str(tls.ca_file),
        }
        started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        for name in ("primary", "backup"):
            log = work / f"{name}.log"
            process = serve("rpc", {**env, "CHAINROUTER_RPC_PORT": str(ports[name])}, log)
            started.append((f"http://127.0.0.1:{ports[name]}", process, log))
        api_log = work / "api.log"
        started.append((f"http://127.0.0.1:{ports['api']}", serve("api", env, api_log), api_log))
        servers.extend(process for _, process, _ in started)
        for url, process, log in started:
            wait_healthy(url, process, log)
        yield Service(
            primary=started[0][0],
            backup=started[1][0],
            api=started[2][0],
            api_key=secrets["main"],
            broke_api_key=secrets["broke"],
            customer_token=secrets["console"],
            provider_token=secrets["ops"],
            chains=chains,
            spare_node_url=spare,
            mining=mining_anvil,
            database_url=database_url,
        )
    finally:
        stop([*servers, *anvils])


def companion_env(service: Service, **overrides: str | None) -> dict[str, str]:
    """The variables a user puts in an MCP client's config; None removes one."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", ""),
        "SERVICE_API_KEY": service.api_key,
        "SERVICE_API_SERVER_URL": service.api,
        "SERVICE_BASE_URL": service.primary,
        "SERVICE_BACKUP_BASE_URL": service.backup,
        "SERVICE_TIMEOUT_MS": "5000",
    }
    if "PYTHONPATH" in os.environ:  # the code under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


COMPANION_COMMAND = [sys.executable, "-m", "chainrouter.cli", "mcp"]


@asynccontextmanager
async def companion(env: dict[str, str]) -> AsyncIterator[ClientSession]:
    """A `chainrouter mcp` subprocess and an initialised MCP client session on its stdio."""
    command, *args = COMPANION_COMMAND
    params = StdioServerParameters(command=command, args=args, env=env)
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def payload(result: CallToolResult) -> Any:
    """A tool result's JSON, which is the same in its text and its structured content."""
    text = result.content[0].text  # type: ignore[union-attr]
    if result.is_error:
        # An error's text is a message, then (for pass-through errors) a JSON line.
        last_line = text.rsplit("\n", 1)[-1]
        try:
            return json.loads(last_line)
        except ValueError:
            return None
    parsed = json.loads(text)
    assert parsed == result.structured_content
    return parsed


async def call_ok(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    """The payload of a call that must succeed."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return payload(result)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]
