"""The deployment recipe run on several hosts (docs/deployment.md): network namespaces made here
are the hosts, on one bridge; HAProxy with the rendered configuration in front of three routers
and the API, started as their rendered units start them, with the rendered environment; Redis
with the rendered configuration on a host of its own; the anvil nodes on another. Under
continuous load of distinct billed calls through the balancer, in turn: a rolling restart of the
three routers, `kill -9` of one router (started again), Redis stopped for 10 s, PostgreSQL cut off
for 30 s, one router cut off from Redis for 10 s. Each scenario's failed requests, slowest call
and balance drop are its own: the load pauses between them until the usage is written.

This machine's root namespace is the database host (PostgreSQL, reached through a relay on the
bridge that the test can cut) and the clients (the test's own threads)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import statistics
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
# Between a client's calls: the load stays continuous, and leaves the two cores room to start
# routers again quickly (a scenario lasts as long as a router takes to start).
THINK_S = 0.005


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
class Phase:
    """What the clients saw while one scenario ran."""

    name: str
    answered: int = 0
    failed: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    balance_drop_nano: int = 0


@dataclass
class Load:
    """Clients sending distinct billed calls through the balancer, phase after phase; paused
    between phases (every call of a phase finished before the next begins)."""

    url: str
    phase: Phase = field(default_factory=lambda: Phase("start"))
    _stop: threading.Event = field(default_factory=threading.Event)
    _go: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0

    def client(self, index: int) -> None:
        n = 0
        with httpx.Client(timeout=10) as http:
            while True:
                self._go.wait()
                with self._lock:
                    if self._stop.is_set():
                        return
                    if not self._go.is_set():
                        continue
                    self._in_flight += 1
                    phase = self.phase
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
                    self._in_flight -= 1
                    phase.latencies_s.append(took)
                    if problem:
                        phase.failed.append(problem)
                    else:
                        phase.answered += 1
                time.sleep(THINK_S)

    def begin(self, name: str) -> Phase:
        with self._lock:
            self.phase = Phase(name)
        self._go.set()
        return self.phase

    def pause(self) -> None:
        """Returns once no call is in flight."""
        with self._lock:
            self._go.clear()
        while True:
            with self._lock:
                if self._in_flight == 0:
                    return
            time.sleep(0.01)

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
        self._go.set()


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


def _balance(engine: Engine) -> int:
    with engine.connect() as connection:
        value: int = connection.execute(select(t.customers.c.balance_nano)).scalar_one()
    return value


FLUSH_S = 0.5  # the routers' usage flush interval here (CHAINROUTER_USAGE_FLUSH_INTERVAL_S)


def _settled_drop(engine: Engine, since: int, at_least: int, within_s: float = 15) -> int:
    """The balance's drop since `since` once it reaches `at_least` (or `within_s` passes), read
    again a flush later. What arrives later still counts in the next scenario's drop, or in the
    last check, and fails them."""
    deadline = time.monotonic() + within_s
    while since - _balance(engine) < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(FLUSH_S + 0.1)
    return since - _balance(engine)


def _partition(hosts: Hosts, name: str, peer: str, cut: bool) -> None:
    """Every packet between host `name` and `peer` dropped (or let through again): a network
    partition, silent, as a cable or a switch gone, not a refusal."""
    ns = f"cr{hosts.tag}{name}"
    action = "-A" if cut else "-D"
    for chain, side in (("OUTPUT", "-d"), ("INPUT", "-s")):
        subprocess.run(
            ["ip", "netns", "exec", ns, "iptables", action, chain, side, peer, "-j", "DROP"],
            check=True,
            capture_output=True,
        )


def _reaches(hosts: Hosts, name: str, redis: str) -> bool:
    """Whether host `name` gets an answer from the Redis at `redis` within a second."""
    ns = f"cr{hosts.tag}{name}"
    try:
        pong = subprocess.run(
            ["ip", "netns", "exec", ns, "redis-cli", "-h", redis, "ping"],
            capture_output=True,
            text=True,
            timeout=1,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return pong.stdout.strip() == "PONG"


@pytest.mark.timeout(240)
def test_three_routers_and_the_api_behind_haproxy_through_restarts_a_kill_and_outages(
    hosts: Hosts, postgresql_database_url: str, tmp_path: Path
) -> None:
    haproxy = shutil.which("haproxy")
    assert haproxy is not None, "scripts/services.sh installs HAProxy"
    redis_server = shutil.which("redis-server")
    assert redis_server is not None
    assert shutil.which("iptables") is not None, "the partition drops packets with iptables"
    balancer = hosts.add("bal", 10)
    routers = [hosts.add(f"r{i}", 10 + i) for i in (1, 2, 3)]
    api_host = hosts.add("api", 15)
    redis_host = hosts.add("red", 20)
    nodes_host = hosts.add("nod", 30)
    data = hosts.gateway
    processes: list[subprocess.Popen[bytes]] = []
    gate = None
    try:
        # The nodes' host: two nodes of one chain.
        nodes = []
        for _ in range(2):
            port = free_port()
            processes.append(
                hosts.run(
                    "nod",
                    [anvil_binary(), "--host", nodes_host, "--port", str(port), "--silent"],
                    stdout=subprocess.DEVNULL,
                )
            )
            nodes.append(f"http://{nodes_host}:{port}")
        # The database's host: PostgreSQL, through a relay on the bridge that can be cut.
        real = make_url(postgresql_database_url)
        gate = TcpGate(real.port or 5432, listen_host=data)
        engine = create_database_engine(postgresql_database_url)
        migrate.upgrade(engine)
        # A rate limit far above the load, so that every call takes its units from Redis (or,
        # Redis away, from the router's share of it).
        key = api_key("main", rate_limit=1_000_000, rate_limit_interval_sec=60)
        config = world_config(
            [provider("one", {"eth_getBalance": PRICE}, [(url, CHAIN_A) for url in nodes])], [key]
        )
        apply_config(engine, validate_document(config))
        for node in nodes:
            wait_until_answering(node)

        # The recipe, rendered for these hosts.
        database_url = real.set(host=data, port=gate.port).render_as_string(hide_password=False)
        site_toml = tmp_path / "site.toml"
        site_toml.write_text(
            f"routers = {routers!r}\n"
            f'api_hosts = ["{api_host}"]\n'
            f'database_url = "{database_url.replace("postgresql+psycopg", "postgresql")}"\n'
            f'redis_url = "redis://{redis_host}:6379/0"\n'
            f'cache_redis_url = "redis://{redis_host}:6379/1"\n'
            f'balancer_bind = "{balancer}"\n'
            f'install_dir = "{REPO_ROOT}"\n'
            "check_interval_ms = 500\n"
            "shutdown_grace_s = 10\n"
            "[extra_env]\n"
            # This site's nodes are on a private network; its checks are frequent, its usage
            # written every second (each scenario's drop is read before the next).
            'CHAINROUTER_OUTBOUND_ALLOW_PRIVATE = "true"\n'
            'CHAINROUTER_HEALTH_CHECK_INTERVAL_S = "1"\n'
            f'CHAINROUTER_USAGE_FLUSH_INTERVAL_S = "{FLUSH_S:g}"\n'
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

        def unit_command(role: str) -> list[str]:
            unit = files[f"systemd/chainrouter-{role}.service"]
            exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
            return shlex.split(exec_start.removeprefix("ExecStart="))

        def start_redis() -> subprocess.Popen[bytes]:
            started = hosts.run(
                "red",
                [redis_server, str(recipe / "redis" / "limits.conf"), "--dir", str(tmp_path)],
                stdout=subprocess.DEVNULL,
            )
            processes.append(started)
            _wait_redis(redis_host)
            return started

        def start(host: str, role: str) -> subprocess.Popen[bytes]:
            home = tmp_path / host  # its StateDirectory: the journal survives a restart
            home.mkdir(exist_ok=True)
            with (home / "service.log").open("ab") as log:  # the child keeps a copy
                started = hosts.run(
                    host, unit_command(role), env=environment, cwd=home, stdout=log, stderr=log
                )
            processes.append(started)
            return started

        redis = start_redis()
        running = [start(f"r{i}", "rpc") for i in (1, 2, 3)]
        start("api", "api")
        with (tmp_path / "haproxy.log").open("ab") as balancer_log:  # the child keeps a copy
            processes.append(
                hosts.run(
                    "bal",
                    [haproxy, "-db", "-f", str(recipe / "haproxy" / "haproxy.cfg")],
                    stdout=balancer_log,
                    stderr=balancer_log,
                )
            )
        for address in routers:
            _wait_healthy(f"http://{address}:8545")
        _wait_healthy(f"http://{api_host}:8080")
        front = f"http://{balancer}:8545"
        try:
            _wait_healthy(front)
            _wait_healthy(f"http://{balancer}:8080")  # the API's, through the balancer
        except AssertionError:
            raise AssertionError((tmp_path / "haproxy.log").read_text()[-3000:]) from None
        back_in_s = 3 * 0.5  # rise 2 checks of 500 ms, and the one in progress
        time.sleep(back_in_s)

        steps: list[str] = []

        def restart(index: int, how: signal.Signals) -> None:
            sent = time.monotonic()
            running[index].send_signal(how)
            code = running[index].wait(30)
            assert code == (0 if how is signal.SIGTERM else -signal.SIGKILL)
            stopped = time.monotonic()
            running[index] = start(f"r{index + 1}", "rpc")
            _wait_healthy(f"http://{routers[index]}:8545")
            steps.append(
                f"router {index + 1} {how.name}: stopped in {stopped - sent:.1f} s, "
                f"healthy {time.monotonic() - stopped:.1f} s later"
            )
            time.sleep(back_in_s)  # back in the balancer

        load = Load(f"{front}/rpc/{CHAIN_A}/{key['secret']}")
        clients = [threading.Thread(target=load.client, args=(i,)) for i in range(CLIENTS)]
        for client in clients:
            client.start()
        phases: list[Phase] = []
        balance = _balance(engine)
        api_during_cut = 0

        def scenario(name: str) -> Phase:
            phases.append(load.begin(name))
            return phases[-1]

        def settle() -> None:
            nonlocal balance
            load.pause()
            phase = phases[-1]
            drop = _settled_drop(engine, balance, phase.answered * PRICE_NANO)
            phase.balance_drop_nano = drop
            balance -= drop

        try:
            scenario("steady load")
            time.sleep(1)
            settle()
            scenario("rolling restart of the three routers (SIGTERM)")
            for index in range(3):
                restart(index, signal.SIGTERM)
            settle()
            scenario("kill -9 of router 2, started again")
            time.sleep(0.5)
            restart(1, signal.SIGKILL)
            settle()
            scenario("Redis stopped for 10 s")
            time.sleep(0.5)
            redis.send_signal(signal.SIGTERM)
            redis.wait(10)
            time.sleep(10)
            redis = start_redis()
            time.sleep(1)  # limits shared again (Redis asked again a second after a failure)
            settle()
            scenario("PostgreSQL cut off for 30 s")
            time.sleep(0.5)
            gate.shut()
            time.sleep(15)
            with contextlib.suppress(httpx.HTTPError):
                api_during_cut = httpx.get(f"http://{api_host}:8080/health", timeout=5).status_code
            time.sleep(15)
            gate.open()
            time.sleep(1)
            settle()
            scenario("router 3 cut off from Redis for 10 s")
            time.sleep(0.5)
            _partition(hosts, "r3", redis_host, cut=True)
            assert not _reaches(hosts, "r3", redis_host)
            assert _reaches(hosts, "r2", redis_host)  # the others still do
            time.sleep(9)
            _partition(hosts, "r3", redis_host, cut=False)
            assert _reaches(hosts, "r3", redis_host)
            time.sleep(1)
            settle()
        finally:
            load.stop()
            for client in clients:
                client.join(30)
        _wait_healthy(f"http://{balancer}:8080")  # the API back behind the balancer
        for router in running:  # twice: no balancer to wait for now (the drain delay ends)
            router.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        for router in running:
            router.send_signal(signal.SIGTERM)
        for router in running:
            assert router.wait(30) == 0  # the usage written at the stop
        late = balance - _balance(engine)

        steady = statistics.median(phases[0].latencies_s)
        for phase in phases:  # the figures docs/deployment.md quotes (pytest -s)
            print(
                f"multi-host: {phase.name}: {phase.answered} answered, {len(phase.failed)} "
                f"failed, slowest {max(phase.latencies_s):.3f} s (+"
                f"{max(phase.latencies_s) - steady:.3f} s over the steady median "
                f"{steady * 1000:.1f} ms), balance drop {phase.balance_drop_nano // PRICE_NANO} "
                f"calls' price"
            )
        print(f"multi-host: API /health during the PostgreSQL cut: {api_during_cut}")
        for step in steps:
            print(f"multi-host: {step}")
        for phase in phases:
            for problem in phase.failed:
                print(f"multi-host: {phase.name}: failed: {problem}")
        # Nothing billed after each scenario's drop was read: every drop is the scenario's own.
        assert late == 0
        assert api_during_cut == 503  # the API says it cannot serve; the balancer takes it out
        for phase in phases:
            assert phase.answered > 50, phase.name
            if phase.name.startswith("kill -9"):
                # The calls in flight on the killed router: the balancer sends them again to
                # another router (their connection closed before any answer), and the killed
                # router's journal bills those it metered before it died (replayed at its start).
                # So the drop may exceed the calls answered by those calls, at most one per
                # client; a call fails only if the balancer cannot send it again.
                assert len(phase.failed) <= CLIENTS, phase.failed
                extra = phase.balance_drop_nano - phase.answered * PRICE_NANO
                assert 0 <= extra <= CLIENTS * PRICE_NANO, extra
            else:
                assert phase.failed == [], (phase.name, phase.failed[:5])
                assert phase.balance_drop_nano == phase.answered * PRICE_NANO, phase.name
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
