"""Customer tools with a management token: usage and balance (exact decimals, the 30-day default
and 90-day maximum window), and API keys: listed without secrets, created with the secret shown
once, updated by their secret, with effect on the routers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from chainrouter.domain.credentials import hash_secret
from chainrouter.stores.sql.api_keys import find_api_key_by_hash
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.usage import write_usage
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A
from tests.companion.conftest import (
    ACCOUNT,
    Service,
    call_ok,
    companion,
    companion_env,
    error_text,
    payload,
)

pytestmark = pytest.mark.anyio


def _env(service: Service, **overrides: str | None) -> dict[str, str]:
    return companion_env(service, SERVICE_MGMT_TOKEN=service.customer_token, **overrides)


async def test_usage_reports_calls_made_through_the_tools_to_the_exact_credit(
    service: Service,
) -> None:
    async with companion(_env(service)) as session:
        before = await call_ok(session, "get_usage", {})
        assert set(before) >= {"period", "summary", "balance"}
        for _ in range(3):  # eth_getBalance costs 0.0000002
            await call_ok(session, "rpc_get_balance", {"chainId": CHAIN_A, "address": ACCOUNT})
        for _ in range(100):
            after = await call_ok(session, "get_usage", {})
            if after["summary"]["request_count"] >= before["summary"]["request_count"] + 3:
                break
            await asyncio.sleep(0.2)
    assert after["summary"]["request_count"] == before["summary"]["request_count"] + 3
    spent = Decimal(after["summary"]["credits_consumed"]) - Decimal(
        before["summary"]["credits_consumed"]
    )
    assert spent == Decimal("0.0000006")
    assert Decimal(before["balance"]["credits"]) - Decimal(after["balance"]["credits"]) == spent
    window = datetime.fromisoformat(after["period"]["to"]) - datetime.fromisoformat(
        after["period"]["from"]
    )
    assert window == timedelta(days=30)


async def test_usage_sections_grouping_and_filters_reach_the_report(service: Service) -> None:
    async with companion(_env(service)) as session:
        sections = await call_ok(
            session,
            "get_usage",
            {"include": ["by_chain", "top_methods"], "chainId": CHAIN_A, "limit": 1},
        )
        grouped = await call_ok(
            session,
            "get_usage",
            {"groupBy": "method", "include": ["balance"], "granularity": "hour"},
        )
        as_text = await call_ok(session, "get_usage", {"include": "summary,by_scenario"})
    assert set(sections) == {"customer_id", "period", "by_chain", "top_methods"}
    assert [row["chain_id"] for row in sections["by_chain"]] == [str(CHAIN_A)]
    assert len(sections["top_methods"]) == 1
    assert "groups" in grouped
    assert "balance" not in grouped  # groupBy overrides include
    assert set(as_text) == {"customer_id", "period", "summary", "by_scenario"}


async def test_usage_grouped_by_day_has_every_day_whatever_the_limit(service: Service) -> None:
    """A day grouping is a run of days, not a ranking: `limit` must not cut its newest days."""
    engine = create_database_engine(service.database_url)
    try:
        with engine.connect() as connection:
            key = find_api_key_by_hash(connection, hash_secret(service.api_key))
        assert key is not None
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        days = [today - timedelta(days=back) for back in range(3, 28)]  # 25 days of calls
        call = (key.customer_id, key.id, CHAIN_A, "eth_chainId", "first_choice")
        rows = {(*call, int(day.timestamp()), 0): [1, 0] for day in days}
        write_usage(engine, rows, {}, reference="companion:day-groups")  # free: no balance change
    finally:
        engine.dispose()
    async with companion(_env(service)) as session:
        grouped = await call_ok(session, "get_usage", {"groupBy": "day", "limit": 1})
    listed = {row["day"] for row in grouped["groups"]}
    assert {d.date().isoformat() for d in days} <= listed


async def test_usage_windows_follow_the_limits(service: Service) -> None:
    now = datetime.now(UTC)
    async with companion(_env(service)) as session:
        from_only = await call_ok(
            session, "get_usage", {"from": (now - timedelta(days=2)).isoformat()}
        )
        too_long = await session.call_tool(
            "get_usage",
            {"from": (now - timedelta(days=91)).isoformat(), "to": now.isoformat()},
        )
        backwards = await session.call_tool(
            "get_usage", {"from": now.isoformat(), "to": (now - timedelta(days=1)).isoformat()}
        )
        naive = await session.call_tool("get_usage", {"from": "2026-11-01T00:00:00"})
        too_many = await session.call_tool("get_usage", {"limit": 101})
        unknown = await session.call_tool("get_usage", {"include": ["everything"]})
        open_start = await session.call_tool(
            "get_usage", {"to": (now - timedelta(days=200)).isoformat()}
        )
    assert datetime.fromisoformat(from_only["period"]["to"]) - now < timedelta(minutes=1)
    assert "the window may span at most 90 days" in error_text(too_long)
    assert "`from` must be before `to`" in error_text(backwards)
    assert "- from: Input should have timezone info" in error_text(naive)
    assert "- limit: Input should be less than or equal to 100" in error_text(too_many)
    assert "- include.0: Input should be 'summary', 'balance'" in error_text(unknown)
    # `to` alone: the window is the 30 days before it, which is fine however old.
    assert not open_start.is_error


async def test_keys_are_listed_without_secrets(service: Service) -> None:
    async with companion(_env(service)) as session:
        result = await session.call_tool("list_api_keys", {})
    listed = payload(result)["apiKeys"]
    main = next(key for key in listed if key["name"] == "main")
    assert set(main) == {
        "id",
        "name",
        "key_hint",
        "active",
        "allowed_domains",
        "routing_strategy",
        "rate_limit",
        "rate_limit_interval_sec",
        "max_price_per_call",
        "verified",
        "created_at",
        "updated_at",
    }
    assert main["key_hint"].endswith(service.api_key[-4:])
    assert service.api_key not in result.content[0].text  # type: ignore[union-attr]


async def _wait_for_router(env: dict[str, str], *, works: bool) -> Any:
    """Routers apply key changes within about a second."""
    for _ in range(50):
        async with companion(env) as session:
            result = await session.call_tool(
                "rpc_call", {"chainId": CHAIN_A, "method": "eth_chainId"}
            )
        if result.is_error is not works:
            return result
        await asyncio.sleep(0.3)
    return result


async def test_a_created_key_works_on_the_routers_and_is_updated_by_its_secret(
    service: Service,
) -> None:
    async with companion(_env(service)) as session:
        created = await call_ok(
            session,
            "create_api_key",
            {"allowed_domains": ["*"], "routing_strategy": "performance", "name": "agent"},
        )
        secret = created["api_key"]
        assert secret.startswith("crk_")
        assert created["routing_strategy"] == "performance"
        assert "only time the secret is shown" in created["notice"]
        listed = await call_ok(session, "list_api_keys", {})
        assert secret not in str(listed)

        new_key_env = companion_env(service, SERVICE_API_KEY=secret)
        served = await _wait_for_router(new_key_env, works=True)
        assert payload(served)["result"] == hex(CHAIN_A)

        updated = await call_ok(
            session, "update_api_key", {"api_key": secret, "name": "agent-off", "active": False}
        )
        assert (updated["id"], updated["name"], updated["active"]) == (
            created["id"],
            "agent-off",
            False,
        )
        refused = await _wait_for_router(new_key_env, works=False)
        assert payload(refused)["httpStatus"] == 401

        nothing = await session.call_tool("update_api_key", {"api_key": secret})
        stranger = await session.call_tool(
            "update_api_key", {"api_key": "crk_" + "z" * 43, "active": True}
        )
        no_domains = await session.call_tool(
            "create_api_key", {"allowed_domains": [], "routing_strategy": "economy"}
        )
    assert "give at least one of name, active" in error_text(nothing)
    assert payload(stranger)["httpStatus"] == 404
    assert "the management API refused POST /api-keys/lookup: HTTP 404" in error_text(stranger)
    assert "- allowed_domains: List should have at least 1 item" in error_text(no_domains)


async def test_an_api_answer_of_an_unexpected_shape_is_a_tool_error(
    service: Service, upstream: FaultyUpstream
) -> None:
    # The fault-injecting upstream answers every path with a JSON-RPC result: valid JSON, and
    # nothing like what the management API sends. Nothing may be sent on the strength of it.
    path = "/ok/not-an-api"
    env = _env(service, SERVICE_API_SERVER_URL=upstream.url(path))
    async with companion(env) as session:
        odd = await session.call_tool(
            "update_api_key", {"api_key": service.api_key, "active": True}
        )
        listed = await session.call_tool("list_api_keys", {})
        still_serving = await call_ok(
            session, "rpc_call", {"chainId": CHAIN_A, "method": "eth_chainId"}
        )
    assert error_text(odd) == (
        "the management API answered POST /api-keys/lookup with an unexpected shape"
    )
    assert upstream.requests[f"{path}/api-keys/lookup"] == 1
    assert [p for p in upstream.requests if p.startswith(path)] == [
        f"{path}/provider/plans",  # the start-up probe
        f"{path}/api-keys/lookup",
        f"{path}/api-keys",
    ]
    assert "GET /api-keys with an unexpected shape" in error_text(listed)
    assert still_serving["result"] == hex(CHAIN_A)
