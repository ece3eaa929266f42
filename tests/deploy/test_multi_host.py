"""The deployment recipe run on several hosts (docs/deployment.md): network namespaces made here
are the hosts, on one bridge; HAProxy with the rendered configuration in front of two routers
started as their rendered units start them, with the rendered environment, on PostgreSQL and on
a Redis with the rendered configuration. Under continuous load of distinct billed calls through
the balancer, one router is sent SIGTERM and started again, then Redis is stopped for 5 s, then
PostgreSQL is cut off for 3 s: no request fails, and the balance drops by exactly the price of
the calls answered, each written once.

This machine's root namespace is the data host (PostgreSQL, reached through a relay on the
bridge, and the anvil nodes); the test's own process is the clients."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, make_url, select

from chainrouter.deploy.render import load_site, render, write
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import anvil_binary, free_port, wait_until_answering
from tests.conftest import REPO_ROOT
from tests.router.conftest import CHAIN_A, api_key, provider, rpc, world_config
from tests.tcp_gate import TcpGate

PRICE = "0.000001"  # credits a call, every node alike: the balance's drop is exact
PRICE_NANO = 1_000
CLIENTS = 4


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@dataclass
class Hosts:
    """Network namespaces on one bridge; the root namespace is the bridge's own address."""

    tag: str
    subnet: str  # "10.54.N"
    made: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"crb{self.tag}"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    def make_bridge(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add(self, name: str, last: int) -> str:
        """A host named `name` at `subnet.last`; its address."""
        ns, outer = f"cr{self.tag}{name}", f"cv{self.tag}{name}"
        _ip("netns", "add", ns)
        self.made.append(ns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", outer, "master", self.bridge, "up")
        address = f"{self.subnet}.{last}"
        for args in (
            ("addr", "add", f"{address}/24", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "set", "lo", "up"),
        ):
            _ip("-n", ns, *args)
        return address

    def run(self, name: str, command: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """`command` on host `name` (its own process: signals reach it)."""
        ns = f"cr{self.tag}{name}"
        return subprocess.Popen(["ip", "netns", "exec", ns, *command], **kwargs)  # type: ignore[call-overload, no-any-return]

    def remove(self) -> None:
        for ns in self.made:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)


def _namespaces_or_skip() -> None:
    probe = f"cr{os.getpid()}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"network namespaces cannot be made here: {made.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], check=False)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed: no network namespaces")
    _namespaces_or_skip()
    tag = str(os.getpid() % 100_000)
    made = Hosts(tag, f"10.54.{os.getpid() % 200 + 20}")
    try:
        made.make_bridge()
        yield made
    finally:
        made.remove()


@dataclass
class Load:
    """Clients sending distinct billed calls through the balancer until stopped."""

    url: str
    answered: int = 0
    slowest_s: float = 0.0
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, index: int) -> None:
        n = 0
        with httpx.Client(timeout=10) as http:
            while not self._stop.is_set():
                n += 1
                address = f"0x{index:04x}{n:036x}"  # a new account each call: nothing cached
                started = time.monotonic()
                try:
                    answer = http.post(self.url, json=rpc("eth_getBalance", [address, "latest"]))
                    ok = answer.status_code == 200 and "result" in answer.json()
                    problem = "" if ok else f"{answer.status_code} {answer.text[:200]}"
                except (httpx.HTTPError, ValueError) as exc:
                    problem = repr(exc)
                took = time.monotonic() - started
                with self._lock:
                    self.slowest_s = max(self.slowest_s, took)
                    if problem:
                        self.failed.append(problem)
                    else:
                        self.answered += 1

    def stop(self) -> None:
        self._stop.set()


def _wait_healthy(url: str, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not become healthy")


def _wait_redis(address: str) -> None:
    for _ in range(100):
        pong = subprocess.run(
            ["redis-cli", "-h", address, "ping"],
            capture_output=True,
            text=True,
            check=False,
        )
        if pong.stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    raise AssertionError("Redis did not start")


@pytest.mark.timeout(150)
def test_two_routers_behind_haproxy_lose_no_request_through_a_restart_and_outages(
    hosts: Hosts, postgresql_database_url: str, tmp_path: Path
) -> None:
    haproxy = shutil.which("haproxy")
    assert haproxy is not None, "scripts/services.sh installs HAProxy"
    redis_server = shutil.which("redis-server")
    assert redis_server is not None
    balancer = hosts.add("bal", 10)
    routers = [hosts.add("r1", 11), hosts.add("r2", 12)]
    redis_host = hosts.add("red", 20)
    data = hosts.gateway
    processes: list[subprocess.Popen[bytes]] = []
    gate = None
    try:
        # The data host: two nodes of one chain, PostgreSQL through a relay on the bridge.
        nodes = []
        for _ in range(2):
            port = free_port()
            processes.append(
                subprocess.Popen(
                    [anvil_binary(), "--host", data, "--port", str(port), "--silent"],
                    stdout=subprocess.DEVNULL,
                )
            )
            nodes.append(f"http://{data}:{port}")
        for node in nodes:
            wait_until_answering(node)
        real = make_url(postgresql_database_url)
        gate = TcpGate(real.port or 5432, listen_host=data)
        engine = create_database_engine(postgresql_database_url)
        migrate.upgrade(engine)
        key = api_key("main")
        config = world_config(
            [provider("one", {"eth_getBalance": PRICE}, [(url, CHAIN_A) for url in nodes])], [key]
        )
        apply_config(engine, validate_document(config))

        # The recipe, rendered for these hosts.
        database_url = real.set(host=data, port=gate.port).render_as_string(hide_password=False)
        site_toml = tmp_path / "site.toml"
        site_toml.write_text(
            f"routers = {routers!r}\n"
            f'api_hosts = ["{data}"]\n'
            f'database_url = "{database_url.replace("postgresql+psycopg", "postgresql")}"\n'
            f'redis_url = "redis://{redis_host}:6379/0"\n'
            f'cache_redis_url = "redis://{redis_host}:6379/1"\n'
            f'balancer_bind = "{balancer}"\n'
            f'install_dir = "{REPO_ROOT}"\n'
            "check_interval_ms = 500\n"
            "shutdown_grace_s = 10\n"
            "[extra_env]\n"
            # This site's nodes are on a private network; its checks are frequent.
            'CHAINROUTER_OUTBOUND_ALLOW_PRIVATE = "true"\n'
            'CHAINROUTER_HEALTH_CHECK_INTERVAL_S = "1"\n'
            'CHAINROUTER_LOG_LEVEL = "warning"\n'
        )
        files = render(load_site(tomllib.loads(site_toml.read_text())))
        recipe = tmp_path / "recipe"
        write(files, recipe)
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")},
            **dict(
                line.split("=", 1)
                for line in files["systemd/chainrouter.env"].splitlines()
                if line and not line.startswith("#")
            ),
        }
        unit = files["systemd/chainrouter-rpc.service"]
        exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
        command = shlex.split(exec_start.removeprefix("ExecStart="))

        def start_redis() -> subprocess.Popen[bytes]:
            started = hosts.run(
                "red",
                [redis_server, str(recipe / "redis" / "limits.conf"), "--dir", str(tmp_path)],
                stdout=subprocess.DEVNULL,
            )
            processes.append(started)
            _wait_redis(redis_host)
            return started

        def start_router(index: int) -> subprocess.Popen[bytes]:
            home = tmp_path / f"router{index}"  # its StateDirectory
            home.mkdir(exist_ok=True)
            with (home / "router.log").open("ab") as log:  # the child keeps a copy
                return hosts.run(
                    f"r{index + 1}", command, env=environment, cwd=home, stdout=log, stderr=log
                )

        redis = start_redis()
        running = [start_router(0), start_router(1)]
        processes.extend(running)
        for address in routers:
            _wait_healthy(f"http://{address}:8545")
        with (tmp_path / "haproxy.log").open("ab") as balancer_log:  # the child keeps a copy
            processes.append(
                hosts.run(
                    "bal",
                    [haproxy, "-db", "-f", str(recipe / "haproxy" / "haproxy.cfg")],
                    stdout=balancer_log,
                    stderr=balancer_log,
                )
            )
        front = f"http://{balancer}:8545"
        try:
            _wait_healthy(front)
        except AssertionError:
            raise AssertionError((tmp_path / "haproxy.log").read_text()[-3000:]) from None
        time.sleep(1.5)  # both routers checked up by the balancer
        before = _balance(engine)

        load = Load(f"{front}/rpc/{CHAIN_A}/{key['secret']}")
        clients = [threading.Thread(target=load.client, args=(i,)) for i in range(CLIENTS)]
        for client in clients:
            client.start()
        try:
            time.sleep(1)
            # A rolling restart's step: router 1 drains and stops, then starts again.
            running[0].send_signal(signal.SIGTERM)
            assert running[0].wait(30) == 0
            running[0] = start_router(0)
            processes.append(running[0])
            _wait_healthy(f"http://{routers[0]}:8545")
            time.sleep(1.5)  # back in the balancer (rise 2 x 500 ms)
            # Redis away for 5 s.
            redis.send_signal(signal.SIGTERM)
            redis.wait(10)
            time.sleep(5)
            redis = start_redis()
            time.sleep(1.5)  # limits shared again
            # PostgreSQL away for 3 s: served from the snapshot, usage kept for later.
            gate.shut()
            time.sleep(3)
            gate.open()
            time.sleep(1.5)
        finally:
            load.stop()
            for client in clients:
                client.join(30)
        for router in running:  # twice: no balancer to wait for now (the drain delay ends)
            router.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        for router in running:
            router.send_signal(signal.SIGTERM)
        for router in running:
            assert router.wait(30) == 0  # the usage written at the stop
        print(  # the figures docs/deployment.md quotes (pytest -s)
            f"multi-host: {load.answered} calls answered, {len(load.failed)} failed, "
            f"slowest {load.slowest_s:.3f} s"
        )
        assert load.failed == []
        assert load.answered > 100
        assert before - _balance(engine) == load.answered * PRICE_NANO
        redis.send_signal(signal.SIGTERM)
        redis.wait(10)
        engine.dispose()
    finally:
        # SIGTERM first: anvil's launcher passes it on to the node (a kill would orphan it).
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if gate is not None:
            gate.shut()


def _balance(engine: Engine) -> int:
    with engine.connect() as connection:
        value: int = connection.execute(select(t.customers.c.balance_nano)).scalar_one()
    return value
