"""`make demo`: three anvil nodes on two chains, two providers, the router and the API, to try.

Everything lives in var/demo (database, generated operator file, logs) and is made anew on every
run. Ctrl-C stops everything this script started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from chainrouter.domain.credentials import SecretKind, generate_secret

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "var" / "demo"
# The fourth node is not in the operator file: the guide shows how to register it via the API.
ANVILS = [("18545", "31337"), ("18546", "31338"), ("18547", "31337"), ("18548", "31337")]
RPC_PORT, BACKUP_RPC_PORT, API_PORT = 8545, 8546, 8080


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(url: str, what: str, body: Any = None, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            response = httpx.post(url, json=body, timeout=1) if body else httpx.get(url, timeout=1)
            if response.status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"demo: {what} did not come up at {url}; see the logs in {WORK}")


def _write_config(secrets: dict[str, str]) -> Path:
    config = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
    for customer in config["customers"]:
        for key in customer.get("api_keys", []):
            key["secret"] = secrets[key["name"]]
        for token in customer.get("management_tokens", []):
            token["secret"] = secrets[token["label"]]
    path = WORK / "demo.yaml"
    # It holds every secret the demo made: readable by its owner only, from its first byte.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(args: list[str], env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "chainrouter.cli", *args], env=env, check=True)


def _stop_on_signal(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _start(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    # Each child leads a process group of its own, and is stopped as a group: anvil's npm
    # launcher runs the anvil binary as its own child, which must stop with it even when the
    # launcher itself has died.
    return subprocess.Popen(
        args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def _signal_group(child: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has already gone
        os.killpg(child.pid, signum)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every child's group (the routers write usage as they stop); SIGKILL to any
    group still there 15 s later. A group can outlive its leader: the anvil binary of a launcher
    that died."""
    for child in reversed(children):
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(child) for child in children):
        time.sleep(0.1)
    for child in children:
        _signal_group(child, signal.SIGKILL)
        child.wait()


def _running(child: subprocess.Popen[bytes]) -> bool:
    """Whether anything of `child`'s group still runs; reaps the leader once it has ended."""
    if child.poll() is None:
        return True
    try:
        os.killpg(child.pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    # Stopped like Ctrl-C by a supervisor's SIGTERM and by a closed terminal's SIGHUP: the
    # processes it started lead groups of their own, which no signal to the demo's group reaches.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on_signal)
    anvil = ROOT / "node_modules" / ".bin" / "anvil"
    if not anvil.exists():
        raise SystemExit("demo: anvil is missing; `make setup` installs it with npm")
    ports = [*(int(a) for a, _ in ANVILS), RPC_PORT, BACKUP_RPC_PORT, API_PORT]
    busy = [p for p in ports if _port_taken(p)]
    if busy:
        raise SystemExit(f"demo: ports {busy} are in use; stop what uses them and retry")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": f"sqlite:///{WORK / 'demo.db'}",
        "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "5",
        # The demo's nodes are local anvils; in production screening refuses such addresses.
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",
        # Anyone may make an account in the demo's dashboard, with a credit to try it out.
        "CHAINROUTER_SIGNUP_ENABLED": "true",
        "CHAINROUTER_SIGNUP_FREE_CREDITS": "1",
        # The deposit watcher (serve --role all starts it with a key): a quick round, so that a
        # deposit is credited within a second of its second confirmation.
        "CHAINROUTER_DEPOSIT_WATCH_INTERVAL_S": "0.25",
    }
    secrets = {
        "demo-economy": generate_secret(SecretKind.API_KEY),
        "demo-performance": generate_secret(SecretKind.API_KEY),
        "demo-console": generate_secret(SecretKind.MANAGEMENT_TOKEN),
        "demo-admin": generate_secret(SecretKind.MANAGEMENT_TOKEN),
        "demo-provider": generate_secret(SecretKind.MANAGEMENT_TOKEN),
        "demo-watcher": generate_secret(SecretKind.API_KEY),
    }
    env["CHAINROUTER_DEPOSIT_WATCH_API_KEY"] = secrets["demo-watcher"]
    _run(["migrate"], env)
    _run(["apply", str(_write_config(secrets))], env)

    children: list[subprocess.Popen[bytes]] = []
    try:
        for port, chain_id in ANVILS:
            children.append(
                _start(
                    [str(anvil), "--port", port, "--chain-id", chain_id, "--block-time", "2"],
                    WORK / f"anvil-{port}.log",
                )
            )
        for port, _ in ANVILS:
            _wait_for(
                f"http://127.0.0.1:{port}",
                f"anvil on {port}",
                {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"},
            )
        serve = [sys.executable, "-m", "chainrouter.cli", "serve", "--role"]
        children.append(_start([*serve, "all"], WORK / "chainrouter.log", env))
        # The backup router: the same program again, on the same database.
        children.append(
            _start(
                [*serve, "rpc"],
                WORK / "chainrouter-backup.log",
                {**env, "CHAINROUTER_RPC_PORT": str(BACKUP_RPC_PORT)},
            )
        )
        _wait_for(f"http://127.0.0.1:{RPC_PORT}/health", "the RPC router")
        _wait_for(f"http://127.0.0.1:{BACKUP_RPC_PORT}/health", "the backup RPC router")
        _wait_for(f"http://127.0.0.1:{API_PORT}/health", "the management API")
        _print_guide(secrets)
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        raise SystemExit(f"demo: a process stopped unexpectedly; see the logs in {WORK}")
    except KeyboardInterrupt:
        print("\nstopping the demo ...")
    finally:
        # A second Ctrl-C must not cut the clean stop short (the router writes usage on exit).
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        _stop(children)


def _mcp_config(secrets: dict[str, str]) -> str:
    config = {
        "mcpServers": {
            "chainrouter": {
                "command": str(ROOT / ".venv" / "bin" / "chainrouter-mcp"),
                "env": {
                    "SERVICE_API_KEY": secrets["demo-economy"],
                    "SERVICE_MGMT_TOKEN": secrets["demo-console"],
                    "SERVICE_BASE_URL": f"http://127.0.0.1:{RPC_PORT}",
                    "SERVICE_BACKUP_BASE_URL": f"http://127.0.0.1:{BACKUP_RPC_PORT}",
                    "SERVICE_API_SERVER_URL": f"http://127.0.0.1:{API_PORT}",
                },
            }
        }
    }
    return json.dumps(config, indent=2).replace("\n", "\n  ")


def _deposit_address(token: str) -> str:
    """The demo customer's deposit address on chain 31337, as the dashboard shows it."""
    answer = httpx.get(
        f"http://127.0.0.1:{API_PORT}/billing/deposit-address",
        params={"chain_id": 31337},
        headers={"X-Api-Key": token},
        timeout=10,
    )
    address: str = answer.json()["address"]
    return address


def _print_guide(secrets: dict[str, str]) -> None:
    key = secrets["demo-economy"]
    deposit = _deposit_address(secrets["demo-console"])
    url_a = f"http://127.0.0.1:{RPC_PORT}/rpc/31337/{key}"
    url_b = f"http://127.0.0.1:{RPC_PORT}/rpc/31338/{key}"
    cast = ROOT / "node_modules" / ".bin" / "cast"
    print(
        f"""
chainrouter demo is running
  RPC router      http://127.0.0.1:{RPC_PORT}   (chains 31337 and 31338, three anvil nodes)
  backup router   http://127.0.0.1:{BACKUP_RPC_PORT}   (the same program again, same database)
  spare node      http://127.0.0.1:18548   (chain 31337, not registered: see "Provider token")
  management API  http://127.0.0.1:{API_PORT}   (interactive docs: http://127.0.0.1:{API_PORT}/docs)
  WebSocket       ws://127.0.0.1:{RPC_PORT}/rpc/{{chainId}}/{{key}}   (newHeads, logs, pending txs)
  dashboard       http://127.0.0.1:{API_PORT}/dashboard   (sign in with the customer or provider
                  token below, or create an account there with 1 free credit)
  providers       thrifty (cheap: 18545, 18546) and swift (dearer: 18547)
  customer        dev@demo.example, 10 credits

API keys (shown once; the database keeps only their hashes):
  economy      {key}
  performance  {secrets["demo-performance"]}

Try:
  curl -s -X POST {url_a} \\
    -H 'content-type: application/json' \\
    -d '{{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}}' -i

  {cast} block-number --rpc-url {url_a}
  {cast} balance 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 --ether --rpc-url {url_b}

  # a batch, with one call the plans do not price:
  curl -s -X POST {url_a} -H 'content-type: application/json' -d \\
    '[{{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}},
      {{"jsonrpc":"2.0","id":2,"method":"debug_traceCall","params":[]}}]'

  # WebSocket: heads as they are mined (every 2 s), each notification billed; any client works
  # with ws://127.0.0.1:{RPC_PORT}/rpc/31337/{{key}} (ethers WebSocketProvider, viem webSocket)
  {ROOT / ".venv" / "bin" / "python"} -m websockets ws://127.0.0.1:{RPC_PORT}/rpc/31337/{key}
  # then type: {{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}}

  # the free tier, no key (60 calls a minute per IP):
  curl -s -X POST http://127.0.0.1:{RPC_PORT}/rpc/evm/31337 \\
    -H 'content-type: application/json' -d '{{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}}'

Management tokens (header X-Api-Key; "Authorize" on the /docs page):
  customer       {secrets["demo-console"]}
  administrator  {secrets["demo-admin"]}

  curl -s http://127.0.0.1:{API_PORT}/api-keys -H 'X-Api-Key: {secrets["demo-console"]}'
  curl -s 'http://127.0.0.1:{API_PORT}/usage?include=summary,balance,by_chain,top_methods' \\
    -H 'X-Api-Key: {secrets["demo-console"]}'
  curl -s -X POST http://127.0.0.1:{API_PORT}/api-keys -H 'X-Api-Key: {secrets["demo-console"]}' \\
    -H 'content-type: application/json' \\
    -d '{{"allowed_domains":["*"],"routing_strategy":"performance","name":"mine"}}'
  curl -s http://127.0.0.1:{API_PORT}/prices

Buy credits with chain 31337's coin (1 ETH = 2000 credits; docs/billing.md). The customer's
deposit address, also on the dashboard's "Buy credits" page with a QR code:
  {deposit}

  {cast} send {deposit} --value 0.01ether \
    --from 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 --unlocked --rpc-url http://127.0.0.1:18545
  # pending until 2 blocks (about 4 s), then 20 credits more:
  curl -s http://127.0.0.1:{API_PORT}/billing/deposits -H 'X-Api-Key: {secrets["demo-console"]}'
  curl -s http://127.0.0.1:{API_PORT}/account -H 'X-Api-Key: {secrets["demo-console"]}'
  # the operator's view of money in:
  curl -s http://127.0.0.1:{API_PORT}/admin/billing/summary -H 'X-Api-Key: {secrets["demo-admin"]}'

Provider token (thrifty; the /provider routes):
  {secrets["demo-provider"]}

  # register the fourth anvil (port 18548, not yet in any plan) as a node of thrifty's plan 1;
  # it is screened first, and routers use it within a second:
  curl -s -X PUT http://127.0.0.1:{API_PORT}/provider/nodes \\
    -H 'X-Api-Key: {secrets["demo-provider"]}' -H 'content-type: application/json' \\
    -d '{{"plan_id":1,"url":"http://127.0.0.1:18548"}}'
  curl -s http://127.0.0.1:{API_PORT}/provider/nodes/4/status \\
    -H 'X-Api-Key: {secrets["demo-provider"]}'

Companion MCP server for an AI agent (docs/mcp-companion.md); an MCP client config:
  {_mcp_config(secrets)}

  # or try it from the terminal with the MCP Inspector's command line:
  {ROOT / "node_modules" / ".bin" / "mcp-inspector"} --cli -e SERVICE_API_KEY={key} \\
    -e SERVICE_BACKUP_BASE_URL=http://127.0.0.1:{BACKUP_RPC_PORT} \\
    {ROOT / ".venv" / "bin" / "chainrouter"} mcp --method tools/call --tool-name rpc_get_fee_data \\
    --tool-arg chainId=31337

Usage is written every 5 s to {WORK / "demo.db"} (tables usage_aggregates, credit_ledger).
Logs: {WORK}. Stop with Ctrl-C.
""",
        flush=True,
    )


if __name__ == "__main__":
    main()
