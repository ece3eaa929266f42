"""Provider tools with a provider-linked token: plans and their prices, exact to the nano-credit;
HTTP and WebSocket nodes registered after the service screens them; node status read and set.
Another provider's plan is 404, as the API says it."""

from __future__ import annotations

import pytest
from mcp.client.session import ClientSession

from tests.anvil import free_port
from tests.companion.conftest import (
    SPARE_CHAIN,
    Service,
    call_ok,
    companion,
    companion_env,
    error_text,
    payload,
)
from tests.tls_nodes import MINING_CHAIN

pytestmark = pytest.mark.anyio


def _env(service: Service) -> dict[str, str]:
    return companion_env(service, SERVICE_MGMT_TOKEN=service.provider_token)


async def _plans(session: ClientSession) -> dict[str, int]:
    plans = (await call_ok(session, "provider_list_plans", {}))["plans"]
    return {plan["name"]: plan["id"] for plan in plans}


async def test_plans_and_their_method_prices_are_read(service: Service) -> None:
    async with companion(_env(service)) as session:
        plans = await _plans(session)
        assert set(plans) == {"standard", "spare"}
        methods = await call_ok(session, "provider_get_plan_methods", {"planId": plans["standard"]})
        rival = await session.call_tool("provider_get_plan_methods", {"planId": 999_999})
    by_method = {row["method"]: row for row in methods["methods"]}
    assert by_method["eth_getLogs"]["cost"] == "0.000001"
    assert by_method["trace_transaction"]["chain_id"] == "31338"
    assert payload(rival)["httpStatus"] == 404


async def test_method_prices_are_written_exactly_and_floats_are_refused(service: Service) -> None:
    async with companion(_env(service)) as session:
        spare = (await _plans(session))["spare"]
        written = await call_ok(
            session,
            "provider_upsert_plan_methods",
            {
                "planId": spare,
                "rows": [
                    {"method": "eth_getStorageAt", "cost": "0.000000301", "chain_id": SPARE_CHAIN},
                    {"method": "eth_getCode", "cost": 0, "chain_id": hex(SPARE_CHAIN)},
                ],
            },
        )
        as_float = await session.call_tool(
            "provider_upsert_plan_methods",
            {"planId": spare, "rows": [{"method": "eth_blockNumber", "cost": 0.0000003}]},
        )
        too_fine = await session.call_tool(
            "provider_upsert_plan_methods",
            {"planId": spare, "rows": [{"method": "eth_blockNumber", "cost": "0.0000000001"}]},
        )
        too_many = await session.call_tool(
            "provider_upsert_plan_methods",
            {
                "planId": spare,
                "rows": [
                    {"method": f"m{i}", "cost": "1", "chain_id": SPARE_CHAIN} for i in range(501)
                ],
            },
        )
        none = await session.call_tool(
            "provider_upsert_plan_methods", {"planId": spare, "rows": []}
        )
    rows = {row["method"]: row for row in written["methods"]}
    assert rows["eth_getStorageAt"]["cost"] == "0.000000301"
    assert (rows["eth_getCode"]["cost"], rows["eth_getCode"]["chain_id"]) == ("0", str(SPARE_CHAIN))
    assert "not a float" in error_text(as_float)
    assert "- rows.0.cost:" in error_text(too_fine)
    assert "- rows: List should have at most 500 items" in error_text(too_many)
    assert "- rows: List should have at least 1 item" in error_text(none)


async def test_an_http_node_is_screened_registered_disabled_and_enabled(service: Service) -> None:
    async with companion(_env(service)) as session:
        spare = (await _plans(session))["spare"]
        registered = await call_ok(
            session, "provider_upsert_node", {"plan_id": spare, "url": service.spare_node_url}
        )
        node_id = registered["node"]["id"]
        assert registered["status"] == "healthy"
        assert registered["node"]["chain_id"] == str(SPARE_CHAIN)
        status = await call_ok(session, "provider_get_node_status", {"nodeId": node_id})
        assert status["node_id"] == node_id
        disabled = await call_ok(
            session,
            "provider_set_node_status",
            {"node_id": node_id, "status": "disabled by provider"},
        )
        assert disabled["status"] == "disabled by provider"
        enabled = await call_ok(
            session, "provider_set_node_status", {"node_id": node_id, "status": "healthy"}
        )
        assert enabled["status"] != "disabled by provider"
        dead = f"http://127.0.0.1:{free_port()}"
        unscreened = await session.call_tool(
            "provider_upsert_node", {"plan_id": spare, "url": dead}
        )
        not_ours = await session.call_tool(
            "provider_upsert_node", {"plan_id": 999_999, "url": service.spare_node_url}
        )
        private_key = await session.call_tool(
            "provider_get_node_status", {"nodeId": 999_999, "kind": "http"}
        )
    assert payload(unscreened)["httpStatus"] == 400
    assert payload(unscreened)["error"]["code"] == "screening_failed"
    assert payload(not_ours)["httpStatus"] == 404
    assert payload(private_key)["httpStatus"] == 404


async def test_a_websocket_node_must_deliver_new_heads(service: Service) -> None:
    async with companion(_env(service)) as session:
        spare = (await _plans(session))["spare"]
        registered = await call_ok(
            session,
            "provider_upsert_ws_node",
            {"plan_id": spare, "chain_id": MINING_CHAIN, "url": service.mining.wss},
        )
        status = await call_ok(
            session,
            "provider_get_node_status",
            {"nodeId": registered["node_ws"]["id"], "kind": "ws"},
        )
        plain_ws = await session.call_tool(
            "provider_upsert_ws_node",
            {"plan_id": spare, "chain_id": MINING_CHAIN, "url": "ws://127.0.0.1:1"},
        )
    assert registered["status"] == "healthy"
    assert status["node_id"] == registered["node_ws"]["id"]
    assert "- url: String should match pattern" in error_text(plain_ws)
