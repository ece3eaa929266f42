"""The deployment recipe (docs/deployment.md): every file an installation of several machines
needs, rendered from one small description of it (`deploy/site.toml` is an example).

    python -m chainrouter.deploy.render SITE.toml OUT_DIR

writes, under OUT_DIR:
- `systemd/chainrouter-{rpc,api,watcher}.service` and `systemd/chainrouter.env`: the roles of
  `chainrouter serve`, one unit each, their settings in one environment file;
- `haproxy/haproxy.cfg`: the balancer in front of the N routers (and the API's hosts), checking
  `GET /health`, draining a router that says so, carrying WebSocket connections;
- `redis/limits.conf`, `redis/cache.conf`: two Redis instances, one per use, each with its
  memory bound and the eviction policy that use needs (docs/cache.md);
- `postgresql/chainrouter.conf`: the PostgreSQL settings the service relies on.

The timings that must agree across files are computed here, once: a router's drain delay is the
balancer's time to mark it down, the units' stop time-out covers drain, grace and the usage's
write, PostgreSQL's connections cover every process's pool. The multi-host test runs what this
renders (tests/deploy/test_multi_host.py).
"""

from __future__ import annotations

import argparse
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# SQLAlchemy's default pool: 5 kept, 10 more at a peak, per process (stores/sql/engine.py).
POOL_PER_PROCESS = 15
_STOP_MARGIN_S = 30  # the usage's write and the process's exit, after drain and grace


class SiteError(ValueError):
    """A site description that cannot be rendered; the message says which field."""


@dataclass(frozen=True, slots=True)
class Site:
    routers: tuple[str, ...]  # router hosts' addresses, one router each
    api_hosts: tuple[str, ...]
    database_url: str
    redis_url: str  # the limits' Redis
    cache_redis_url: str  # the answers' Redis
    watcher_host: str | None = None  # None: no deposit watcher
    rpc_port: int = 8545
    api_port: int = 8080
    rpc_workers: int = 1
    balancer_bind: str = "0.0.0.0"  # noqa: S104 (the balancer serves the world)
    balancer_rpc_port: int = 8545
    balancer_api_port: int = 8080
    check_interval_ms: int = 1000  # HAProxy's `inter`
    check_fall: int = 2  # failed checks before a server is out
    check_rise: int = 2  # passed checks before it is back in
    shutdown_grace_s: int = 30
    install_dir: str = "/opt/chainrouter"  # a checkout after `make setup`, or the image's
    user: str = "chainrouter"
    limits_redis_max_mb: int = 256
    cache_redis_max_mb: int = 1024
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def drain_delay_s(self) -> float:
        """Long enough for the balancer to see `fall` failed checks, plus one interval for the
        check in progress when the router started draining."""
        return (self.check_fall + 1) * self.check_interval_ms / 1000

    @property
    def stop_timeout_s(self) -> int:
        return math.ceil(self.drain_delay_s) + self.shutdown_grace_s + _STOP_MARGIN_S

    @property
    def database_connections(self) -> int:
        processes = len(self.routers) * self.rpc_workers + len(self.api_hosts)
        processes += 1 if self.watcher_host else 0
        # Migrations, psql and the operator's own tools: some room on top.
        return processes * POOL_PER_PROCESS + 20


_INT_FIELDS = (
    "rpc_port",
    "api_port",
    "rpc_workers",
    "balancer_rpc_port",
    "balancer_api_port",
    "check_interval_ms",
    "check_fall",
    "check_rise",
    "shutdown_grace_s",
    "limits_redis_max_mb",
    "cache_redis_max_mb",
)
_BOUNDS = {
    "rpc_port": (1, 65535),
    "api_port": (1, 65535),
    "balancer_rpc_port": (1, 65535),
    "balancer_api_port": (1, 65535),
    "rpc_workers": (1, 64),
    "check_interval_ms": (100, 60_000),
    "check_fall": (1, 10),
    "check_rise": (1, 10),
    "shutdown_grace_s": (1, 600),
    "limits_redis_max_mb": (16, 1_048_576),
    "cache_redis_max_mb": (16, 1_048_576),
}
_MAX_HOSTS = 64


def load_site(document: dict[str, Any]) -> Site:
    """A `Site` from a parsed TOML document; `SiteError` names the first bad field."""
    known = set(Site.__dataclass_fields__)
    unknown = sorted(set(document) - known)
    if unknown:
        raise SiteError(f"unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {}
    for name in ("routers", "api_hosts"):
        hosts = document.get(name)
        if not isinstance(hosts, list) or not hosts or len(hosts) > _MAX_HOSTS:
            raise SiteError(f"{name}: a list of 1 to {_MAX_HOSTS} host addresses")
        values[name] = tuple(_host(name, host) for host in hosts)
    for name in ("database_url", "redis_url", "cache_redis_url"):
        value = document.get(name)
        if not isinstance(value, str) or not value:
            raise SiteError(f"{name}: required, a URL")
        values[name] = value
    if not values["database_url"].startswith(("postgresql://", "postgres://")):
        raise SiteError("database_url: several machines share PostgreSQL (postgresql://...)")
    for name in ("redis_url", "cache_redis_url"):
        if not values[name].startswith(("redis://", "rediss://")):
            raise SiteError(f"{name}: must start with redis:// or rediss://")
    if document.get("watcher_host") is not None:
        values["watcher_host"] = _host("watcher_host", document["watcher_host"])
    for name in _INT_FIELDS:
        if name in document:
            value = document[name]
            low, high = _BOUNDS[name]
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SiteError(f"{name}: an integer from {low} to {high}")
            values[name] = value
    for name in ("balancer_bind", "install_dir", "user"):
        if name in document:
            value = document[name]
            if not isinstance(value, str) or not value or any(c.isspace() for c in value):
                raise SiteError(f"{name}: a non-empty string without spaces")
            values[name] = value
    extra = document.get("extra_env", {})
    if not isinstance(extra, dict) or not all(
        isinstance(k, str) and k.startswith("CHAINROUTER_") and isinstance(v, str) and "\n" not in v
        for k, v in extra.items()
    ):
        raise SiteError("extra_env: a table of CHAINROUTER_* names to one-line strings")
    values["extra_env"] = dict(extra)
    return Site(**values)


def _host(name: str, host: object) -> str:
    if not isinstance(host, str) or not host or any(c.isspace() or c in "#;" for c in host):
        raise SiteError(f"{name}: {host!r} is not a host address")
    return host


def render(site: Site) -> dict[str, str]:
    """Relative path -> content, every file of the recipe."""
    files = {
        "systemd/chainrouter.env": _environment(site),
        "systemd/chainrouter-rpc.service": _unit(site, "rpc", "the RPC router"),
        "systemd/chainrouter-api.service": _unit(site, "api", "the management API"),
        "haproxy/haproxy.cfg": _haproxy(site),
        "redis/limits.conf": _redis(site, "limits"),
        "redis/cache.conf": _redis(site, "cache"),
        "postgresql/chainrouter.conf": _postgresql(site),
    }
    if site.watcher_host:
        files["systemd/chainrouter-watcher.service"] = _unit(site, "watcher", "the deposit watcher")
    return files


_HEADER = "# Rendered by chainrouter.deploy.render from a site description: edit that, not this.\n"


def _environment(site: Site) -> str:
    values = {
        "CHAINROUTER_DATABASE_URL": site.database_url,
        "CHAINROUTER_REDIS_URL": site.redis_url,
        "CHAINROUTER_CACHE_REDIS_URL": site.cache_redis_url,
        # The routers' own budget of answers in that Redis: three quarters of its memory, the
        # rest for what Redis keeps besides the bytes counted (docs/cache.md).
        "CHAINROUTER_CACHE_REDIS_MAX_BYTES": str(site.cache_redis_max_mb * 3 // 4 * 1024 * 1024),
        # Every host listens on its own address; the balancer is the only way in from outside.
        "CHAINROUTER_RPC_HOST": "0.0.0.0",  # noqa: S104
        "CHAINROUTER_RPC_PORT": str(site.rpc_port),
        "CHAINROUTER_RPC_WORKERS": str(site.rpc_workers),
        "CHAINROUTER_API_HOST": "0.0.0.0",  # noqa: S104
        "CHAINROUTER_API_PORT": str(site.api_port),
        "CHAINROUTER_DRAIN_DELAY_S": f"{site.drain_delay_s:g}",
        "CHAINROUTER_SHUTDOWN_GRACE_S": str(site.shutdown_grace_s),
        # Relative to the units' working directory, the state directory systemd makes.
        "CHAINROUTER_USAGE_JOURNAL_DIR": "usage-journal",
        "CHAINROUTER_LOG_FORMAT": "json",
        **site.extra_env,
    }
    lines = [f"{name}={value}" for name, value in values.items()]
    return (
        _HEADER
        + "# Secrets (the database password): root's, mode 0600 (systemd reads it as root).\n"
        + ("\n".join(lines) + "\n")
    )


def _unit(site: Site, role: str, what: str) -> str:
    return f"""{_HEADER}[Unit]
Description=chainrouter: {what}
Documentation=file://{site.install_dir}/docs/deployment.md
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
User={site.user}
Group={site.user}
EnvironmentFile=/etc/chainrouter/chainrouter.env
ExecStart={site.install_dir}/.venv/bin/chainrouter serve --role {role}
# SIGTERM drains: /health answers 503 for the drain delay, then what is in flight finishes
# within the grace and the usage is written. This covers all three.
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec={site.stop_timeout_s}
Restart=always
RestartSec=2
# The usage journal lives here: a router killed without warning replays it at its next start.
StateDirectory=chainrouter
WorkingDirectory=/var/lib/chainrouter
LimitNOFILE=65536
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ReadWritePaths=/var/lib/chainrouter

[Install]
WantedBy=multi-user.target
"""


def _haproxy(site: Site) -> str:
    inter = site.check_interval_ms
    checks = f"inter {inter}ms fall {site.check_fall} rise {site.check_rise}"
    routers = "\n".join(
        f"    server router{i} {host}:{site.rpc_port} check"
        for i, host in enumerate(site.routers, 1)
    )
    apis = "\n".join(
        f"    server api{i} {host}:{site.api_port} check"
        for i, host in enumerate(site.api_hosts, 1)
    )
    bind = site.balancer_bind
    return f"""{_HEADER}global
    # Two descriptors a connection (client and router): raise it with the host's file limit.
    maxconn 8000
    log stdout format raw local0 warning

defaults
    mode http
    log global
    option dontlognull
    # The client's address for the free tier's limits: the routers trust this hop
    # (CHAINROUTER_TRUSTED_PROXIES, the balancer's address, in extra_env).
    option forwardfor
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # An upgraded WebSocket connection may stay quiet for long between notifications.
    timeout tunnel 1h
    timeout http-keep-alive 10s
    # A router that closes a kept connection as it stops has not read the request sent on it:
    # that request goes to another router. (Only failures before any answer; never a timeout,
    # which may have reached a node.)
    retries 3
    retry-on conn-failure empty-response
    option redispatch 1

frontend rpc
    bind {bind}:{site.balancer_rpc_port}
    default_backend routers

frontend api
    bind {bind}:{site.balancer_api_port}
    default_backend api

backend routers
    balance leastconn
    # A router answers 503 from the moment it drains (SIGTERM) and while it cannot serve; it
    # keeps serving meanwhile, so the connections already open finish there.
    option httpchk
    http-check send meth GET uri /health
    http-check expect status 200
    default-server {checks}
    http-reuse safe
{routers}

backend api
    balance roundrobin
    option httpchk
    http-check send meth GET uri /health
    http-check expect status 200
    default-server {checks}
{apis}
"""


def _redis(site: Site, use: str) -> str:
    if use == "limits":
        policy = "noeviction"
        memory = site.limits_redis_max_mb
        why = (
            "# Rate limits: an evicted bucket would let its callers in again, so nothing is\n"
            "# evicted; a full Redis refuses writes and the routers fall back to per-process\n"
            "# shares of each limit (docs/deployment.md). Buckets expire with their window.\n"
        )
    else:
        policy = "allkeys-lru"
        memory = site.cache_redis_max_mb
        why = (
            "# Answers: the least recently used pushed out for room (docs/cache.md). The chains'\n"
            "# finality epochs are read every second, so LRU keeps them; lost all the same, the\n"
            "# routers write them back.\n"
        )
    reach = "# Reachable from the routers' network only: firewall the port from the rest.\n"
    return f"""{_HEADER}{why}{reach}bind 0.0.0.0
protected-mode no
port 6379
maxmemory {memory}mb
maxmemory-policy {policy}
# Nothing here outlives a restart that matters: limits refill, answers are asked again.
save ""
appendonly no
tcp-keepalive 60
timeout 0
"""


def _postgresql(site: Site) -> str:
    return f"""{_HEADER}# Include from postgresql.conf (include_dir 'conf.d').
listen_addresses = '*'
# Every router worker, API and watcher process keeps a pool of up to {POOL_PER_PROCESS}.
max_connections = {site.database_connections}
# A transaction left open by a process that hangs must not hold rows (balances) for long.
idle_in_transaction_session_timeout = '60s'
# Usage rows are written in batches every few seconds; a commit waits for its WAL flush.
synchronous_commit = on
# The routers read the catalogue every sync interval; keep the working set in memory.
shared_buffers = '512MB'
"""


def write(files: dict[str, str], out: Path) -> None:
    for relative, content in files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chainrouter.deploy.render",
        description="Render the deployment recipe (docs/deployment.md) from a site description.",
    )
    parser.add_argument("site", type=Path, help="the site description (TOML)")
    parser.add_argument("out", type=Path, help="the directory to write the files into")
    args = parser.parse_args(argv)
    try:
        site = load_site(tomllib.loads(args.site.read_text()))
    except (OSError, tomllib.TOMLDecodeError, SiteError) as exc:
        print(f"{args.site}: {exc}", file=sys.stderr)
        return 2
    files = render(site)
    write(files, args.out)
    for relative in files:
        print(args.out / relative)
    return 0


if __name__ == "__main__":
    sys.exit(main())
