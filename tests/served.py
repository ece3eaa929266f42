"""`chainrouter serve` processes for tests that use the service as its users do: started with
an environment, their output in a log file, waited for until `/health` says ready."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx


def serve(role: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`chainrouter serve --role ROLE` with `env`, its output in `log`. No audits unless `env`
    asks: an audit asks another node at random, which tests counting node calls would see."""
    env = {"CHAINROUTER_AUDIT_RATE": "0", **env}
    with log.open("wb") as output:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "chainrouter.cli", "serve", "--role", role],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until `url/health` answers 200 (30 s at most); the log's end in the error otherwise."""
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"{url} stopped: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy: {log.read_text()[-2000:]}")


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Terminate them all, then wait for each (killed after 15 s)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
