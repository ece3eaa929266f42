"""The deployment recipe (chainrouter/deploy/render.py): one site description renders every
file, the timings agree across them, HAProxy and systemd accept what it writes, and a bad
description is refused with the field it got wrong."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from chainrouter.deploy.render import Site, SiteError, load_site, main, render
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "deploy" / "site.toml"


def example() -> Site:
    return load_site(tomllib.loads(EXAMPLE.read_text()))


def test_the_example_site_renders_a_unit_per_role_the_balancer_and_both_redis() -> None:
    files = render(example())
    assert sorted(files) == [
        "haproxy/haproxy.cfg",
        "postgresql/chainrouter.conf",
        "redis/cache.conf",
        "redis/limits.conf",
        "systemd/chainrouter-api.service",
        "systemd/chainrouter-rpc.service",
        "systemd/chainrouter-watcher.service",
        "systemd/chainrouter.env",
    ]
    for role in ("rpc", "api", "watcher"):
        assert f"serve --role {role}\n" in files[f"systemd/chainrouter-{role}.service"]


def test_no_watcher_host_means_no_watcher_unit() -> None:
    document = tomllib.loads(EXAMPLE.read_text())
    del document["watcher_host"]
    assert "systemd/chainrouter-watcher.service" not in render(load_site(document))


def test_every_router_is_a_checked_server_of_the_balancer() -> None:
    config = render(example())["haproxy/haproxy.cfg"]
    routers = config.split("\nbackend routers\n")[1].split("\nbackend api\n")[0]
    assert re.findall(r"server router\d+ (\S+) check", routers) == [
        "10.0.0.11:8545",
        "10.0.0.12:8545",
    ]
    assert "http-check send meth GET uri /health" in routers
    assert "http-check expect status 200" in routers
    assert "timeout tunnel" in config  # WebSocket connections outlive the request timeouts


def test_a_router_drains_longer_than_the_balancer_takes_to_mark_it_down() -> None:
    site = example()
    files = render(site)
    check = re.search(r"inter (\d+)ms fall (\d+)", files["haproxy/haproxy.cfg"])
    assert check is not None
    marked_down_s = int(check[1]) * int(check[2]) / 1000
    drain = re.search(r"CHAINROUTER_DRAIN_DELAY_S=(\S+)", files["systemd/chainrouter.env"])
    assert drain is not None
    assert float(drain[1]) > marked_down_s
    grace = re.search(r"CHAINROUTER_SHUTDOWN_GRACE_S=(\d+)", files["systemd/chainrouter.env"])
    stop = re.search(r"TimeoutStopSec=(\d+)", files["systemd/chainrouter-rpc.service"])
    assert grace is not None
    assert stop is not None
    # systemd kills nothing that is still within its drain and grace.
    assert int(stop[1]) > float(drain[1]) + int(grace[1])


def test_each_redis_has_its_memory_bound_and_the_eviction_its_use_needs() -> None:
    files = render(example())
    assert "maxmemory 256mb\nmaxmemory-policy noeviction\n" in files["redis/limits.conf"]
    assert "maxmemory 1024mb\nmaxmemory-policy allkeys-lru\n" in files["redis/cache.conf"]


def test_postgresql_has_room_for_every_process_pool() -> None:
    conf = render(example())["postgresql/chainrouter.conf"]
    found = re.search(r"max_connections = (\d+)", conf)
    assert found is not None
    # 2 routers x 2 workers, 1 API, 1 watcher: 6 processes of up to 15 connections each.
    assert int(found[1]) >= 6 * 15


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"routers": []}, "routers: a list of 1 to 64"),
        ({"routers": ["10.0.0.1 #"]}, "routers: '10.0.0.1 #' is not a host address"),
        ({"database_url": "sqlite:///x.db"}, "database_url: several machines share PostgreSQL"),
        ({"redis_url": "http://r"}, "redis_url: must start with redis://"),
        ({"check_fall": 0}, "check_fall: an integer from 1 to 10"),
        ({"rpc_port": True}, "rpc_port: an integer from 1 to 65535"),
        ({"extra_env": {"PATH": "/x"}}, "extra_env: a table of CHAINROUTER_"),
        ({"routres": ["h"]}, "unknown field 'routres'"),
    ],
)
def test_a_bad_site_description_names_its_field(change: dict[str, object], problem: str) -> None:
    document = {**tomllib.loads(EXAMPLE.read_text()), **change}
    with pytest.raises(SiteError, match=re.escape(problem)):
        load_site(document)


def test_the_command_writes_the_files_or_exits_2_on_a_bad_description(tmp_path: Path) -> None:
    assert main([str(EXAMPLE), str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "haproxy" / "haproxy.cfg").read_text() == render(example())[
        "haproxy/haproxy.cfg"
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text('routers = "one"\n')
    assert main([str(bad), str(tmp_path / "never")]) == 2
    assert not (tmp_path / "never").exists()


def test_haproxy_accepts_the_rendered_configuration(tmp_path: Path) -> None:
    path = tmp_path / "haproxy.cfg"
    path.write_text(render(example())["haproxy/haproxy.cfg"])
    haproxy = shutil.which("haproxy")
    assert haproxy is not None, "scripts/services.sh installs HAProxy"
    checked = subprocess.run(
        [haproxy, "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_systemd_accepts_the_rendered_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "Debian's systemd package has it"
    for name, content in render(example()).items():
        if name.endswith(".service"):
            unit = tmp_path / Path(name).name
            # The unit's own paths do not exist here: only its syntax and directives count.
            unit.write_text(content.replace("/opt/chainrouter/.venv/bin/chainrouter", "/bin/true"))
    checked = subprocess.run(
        [analyze, "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [
        line
        for line in (checked.stdout + checked.stderr).splitlines()
        # What this machine lacks (a user, a boot target), not what the units say.
        if line.strip() and "chainrouter" in line and "user" not in line.lower()
    ]
    assert problems == []


def test_the_routers_budget_of_answers_fits_within_the_answers_redis() -> None:
    """The routers keep the answers within CHAINROUTER_CACHE_REDIS_MAX_BYTES themselves; in the
    recipe's Redis of its own for answers, that budget leaves a quarter of its maxmemory for
    what Redis keeps besides (docs/cache.md)."""
    site = example()
    files = render(site)
    budget = re.search(r"CHAINROUTER_CACHE_REDIS_MAX_BYTES=(\d+)", files["systemd/chainrouter.env"])
    assert budget is not None
    assert int(budget[1]) == site.cache_redis_max_mb * 1024 * 1024 * 3 // 4
