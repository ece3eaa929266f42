"""Cordons in the management APIs (docs/integrity.md, "Audits"): the provider sees its node
cordoned with the reason and what of its answers was disputed, and may bring it back; the
administrator lists cordons and disputes and lifts a cordon; a node back is watched for a day.
The cordon is written as a router writes it (stores/sql/nodes.py, `write_cordons`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from chainrouter.domain.chains import Chain
from chainrouter.domain.records import CordonWrite
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.nodes import write_cordons
from tests.anvil import AnvilNodes
from tests.api.conftest import ApiHarness, ProviderAccount

REASON = "audit: its eth_getBalance answer on chain 31337 was outvoted by 2 nodes of providers 2, 3"


def _node(api: ApiHarness, who: ProviderAccount, url: str) -> int:
    with api.engine.begin() as connection:
        upsert_chains(connection, [Chain(31337, "Anvil", "anvil", "Ether", "ETH", 18)])
    body = {"plan_id": who.plan_ids[0], "url": url}
    node_id: int = api.client.put("/provider/nodes", json=body, headers=who.headers).json()["node"][
        "id"
    ]
    return node_id


def _cordon(
    api: ApiHarness, node_id: int, calls: int = 3, nano: int = 300, reason: str = REASON
) -> None:
    write_cordons(api.engine, [CordonWrite(node_id, reason, 1.8e9, calls, nano)])


def _status(api: ApiHarness, who: ProviderAccount, node_id: int) -> Any:
    return api.client.get(f"/provider/nodes/{node_id}/status", headers=who.headers).json()


def test_the_provider_sees_its_node_cordoned_with_the_reason_and_its_disputed_answers(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    mine = api.provider("mine")
    node_id = _node(api, mine, anvil.urls["a1"])
    with api.engine.connect() as connection:
        before = read_config_version(connection)
    _cordon(api, node_id)
    with api.engine.connect() as connection:
        assert read_config_version(connection) > before  # routers drop it at their next poll
    status = _status(api, mine, node_id)
    assert status["status"] == "cordoned"
    assert status["cordon_reason"] == REASON
    assert (status["disputed_answers"], status["disputed_credits"]) == (3, 0.0000003)
    listed = api.client.get("/provider/nodes", headers=mine.headers).json()
    assert listed[0]["status"]["status"] == "cordoned"
    # Only an audit or a failed proof cordons; the provider brings it back with `healthy`.
    refused = api.client.post(
        "/provider/nodes/status",
        json={"node_id": node_id, "status": "cordoned"},
        headers=mine.headers,
    )
    assert refused.status_code == 422
    back = api.client.post(
        "/provider/nodes/status",
        json={"node_id": node_id, "status": "healthy"},
        headers=mine.headers,
    )
    assert back.status_code == 200
    after = _status(api, mine, node_id)
    assert after["cordon_reason"] is None
    assert after["disputed_answers"] == 3  # what was disputed stays told
    cordons = api.client.get("/admin/cordons", headers=api.admin).json()
    watched = datetime.fromisoformat(cordons[0]["watched_until"])
    assert watched > datetime.now(UTC) + timedelta(hours=23)


def test_the_administrator_lists_cordons_and_lifts_one(api: ApiHarness, anvil: AnvilNodes) -> None:
    mine = api.provider("mine")
    node_id = _node(api, mine, anvil.urls["a1"])
    other = _node(api, mine, anvil.urls["a2"])
    assert api.client.get("/admin/cordons", headers=api.admin).json() == []
    _cordon(api, node_id)
    _cordon(api, node_id, 2, 200, reason="")  # another router's disputes of it add up
    [listed] = api.client.get("/admin/cordons", headers=api.admin).json()
    assert listed["node_id"] == node_id
    assert listed["provider_id"] == mine.provider_id
    assert (listed["status"], listed["reason"]) == ("cordoned", REASON)
    assert (listed["disputed_answers"], listed["disputed_credits"]) == (5, 0.0000005)
    assert listed["cordoned_at"].startswith("2027-01-15")
    assert api.client.post(f"/admin/nodes/{other}/lift-cordon", headers=api.admin).status_code == (
        409
    )
    assert api.client.post("/admin/nodes/999999/lift-cordon", headers=api.admin).status_code == 404
    lifted = api.client.post(f"/admin/nodes/{node_id}/lift-cordon", headers=api.admin)
    assert lifted.status_code == 200
    assert (lifted.json()["status"], lifted.json()["reason"]) == ("healthy", None)
    assert _status(api, mine, node_id)["status"] != "cordoned"
    # Still listed: its answers were disputed once.
    assert [c["node_id"] for c in api.client.get("/admin/cordons", headers=api.admin).json()] == [
        node_id
    ]
    customer = api.customer("Someone")
    assert api.client.get("/admin/cordons", headers=customer.headers).status_code == 403
