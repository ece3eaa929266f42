"""Retries: HTTP 429, HTTP 5xx, timeouts and network errors are retried with backoff, alternating
between the primary and the backup router, up to SERVICE_RETRY_ATTEMPTS extra attempts; nothing
else is retried. The fault-injecting upstream plays a broken router and counts what it gets."""

from __future__ import annotations

from typing import Any

import pytest

from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, free_port
from tests.companion.conftest import Service, companion, companion_env, error_text, payload

pytestmark = pytest.mark.anyio

CHAIN_ID_CALL = {"chainId": CHAIN_A, "method": "eth_chainId"}


def _hits(upstream: FaultyUpstream, prefix: str) -> int:
    return sum(count for path, count in upstream.requests.items() if path.startswith(prefix))


async def _chain_id(env: dict[str, str]) -> Any:
    async with companion(env) as session:
        return await session.call_tool("rpc_call", CHAIN_ID_CALL)


async def test_a_router_that_is_down_is_skipped_for_the_backup(service: Service) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    answer = payload(await _chain_id(companion_env(service, SERVICE_BASE_URL=dead)))
    assert answer["result"] == hex(CHAIN_A)
    assert answer["batchId"]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_429_and_5xx_are_retried_on_the_backup(
    service: Service, upstream: FaultyUpstream, status: int
) -> None:
    broken = f"/status/{status}/primary-{status}"
    env = companion_env(service, SERVICE_BASE_URL=upstream.url(broken))
    answer = payload(await _chain_id(env))
    assert answer["result"] == hex(CHAIN_A)
    assert _hits(upstream, broken) == 1


async def test_a_router_that_does_not_answer_in_time_is_retried(
    service: Service, upstream: FaultyUpstream
) -> None:
    slow = "/sleep/4000/primary"
    env = companion_env(service, SERVICE_BASE_URL=upstream.url(slow), SERVICE_TIMEOUT_MS="1000")
    answer = payload(await _chain_id(env))
    assert answer["result"] == hex(CHAIN_A)
    assert _hits(upstream, slow) == 1


async def test_attempts_alternate_primary_backup_primary_until_the_budget_is_spent(
    service: Service, upstream: FaultyUpstream
) -> None:
    primary, backup = "/status/503/both-down-p", "/status/502/both-down-b"
    env = companion_env(
        service,
        SERVICE_BASE_URL=upstream.url(primary),
        SERVICE_BACKUP_BASE_URL=upstream.url(backup),
        SERVICE_RETRY_ATTEMPTS="3",
    )
    result = await _chain_id(env)
    text = error_text(result)
    assert "no router answered after 4 attempt(s)" in text
    assert "HTTP 503" in text
    assert "HTTP 502" in text
    assert (_hits(upstream, primary), _hits(upstream, backup)) == (2, 2)
    assert payload(result)["batchId"] is None


async def test_both_routers_unreachable_is_one_clear_error(service: Service) -> None:
    env = companion_env(
        service,
        SERVICE_BASE_URL=f"http://127.0.0.1:{free_port()}",
        SERVICE_BACKUP_BASE_URL=f"http://127.0.0.1:{free_port()}",
        SERVICE_RETRY_ATTEMPTS="2",
    )
    text = error_text(await _chain_id(env))
    assert "no router answered after 3 attempt(s)" in text
    assert text.count("connection failed") == 3
    assert service.api_key not in text  # failures name the router, never the keyed URL


async def test_without_retries_one_attempt_is_made(
    service: Service, upstream: FaultyUpstream
) -> None:
    broken = "/status/503/no-retries"
    env = companion_env(service, SERVICE_BASE_URL=upstream.url(broken), SERVICE_RETRY_ATTEMPTS="0")
    assert "after 1 attempt(s)" in error_text(await _chain_id(env))
    assert _hits(upstream, broken) == 1


async def test_without_a_backup_retries_go_to_the_primary(
    service: Service, upstream: FaultyUpstream
) -> None:
    broken = "/status/429/only-primary"
    env = companion_env(
        service, SERVICE_BASE_URL=upstream.url(broken), SERVICE_BACKUP_BASE_URL=None
    )
    error_text(await _chain_id(env))
    assert _hits(upstream, broken) == 3  # the default: two extra attempts


@pytest.mark.parametrize("path", ["/status/400/not-retried", "/garbage/not-retried"])
async def test_other_answers_are_not_retried(
    service: Service, upstream: FaultyUpstream, path: str
) -> None:
    env = companion_env(service, SERVICE_BASE_URL=upstream.url(path))
    text = error_text(await _chain_id(env))
    assert "eth_chainId: the router answered HTTP" in text
    assert _hits(upstream, path) == 1


async def test_a_json_rpc_error_is_an_answer_and_is_not_retried(
    service: Service, upstream: FaultyUpstream
) -> None:
    path = "/rpc-error/primary"
    env = companion_env(service, SERVICE_BASE_URL=upstream.url(path))
    result = await _chain_id(env)
    assert payload(result)["error"] == {"code": 3, "message": "execution reverted", "data": "0x"}
    assert _hits(upstream, path) == 1
