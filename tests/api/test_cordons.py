"""Cordons in the management APIs (docs/integrity.md, "Audits"): the provider sees its node
cordoned with the reason and what of its answers was disputed, and may bring it back; the
administrator lists cordons and disputes and lifts a cordon; a node back is watched for a day.
The cordon is written as a router writes it (stores/sql/nodes.py, `write_cordons`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from chainrouter.domain.chains import Chain
from chainrouter.domain.records import CordonWrite, NodeChecksWrite
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.node_checks import write_node_checks
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


def test_the_provider_and_the_administrator_see_what_audits_and_proofs_found_of_a_node(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    """The counts as routers flush them (stores/sql/node_checks.py), two routers adding up."""
    mine = api.provider("mine")
    node_id = _node(api, mine, anvil.urls["a1"])
    fresh = _status(api, mine, node_id)["checks"]
    assert fresh == {
        "audits_passed": 0,
        "audits_failed": 0,
        "proofs_checked": 0,
        "proofs_failed": 0,
        "last_audit_passed_at": None,
        "last_audit_failed_at": None,
        "last_proof_checked_at": None,
        "last_proof_failed_at": None,
    }
    first = NodeChecksWrite(node_id, audits_passed=4, proofs_checked=2, last_audit_passed_at=1.8e9)
    second = NodeChecksWrite(
        node_id,
        audits_passed=1,
        audits_failed=1,
        last_audit_passed_at=1.7e9,
        last_audit_failed_at=1.8e9 + 60,
    )
    write_node_checks(api.engine, [first])
    write_node_checks(api.engine, [second])  # another router's flush
    _cordon(api, node_id)
    status = _status(api, mine, node_id)
    assert status["status"] == "cordoned"
    checks = status["checks"]
    assert (checks["audits_passed"], checks["audits_failed"]) == (5, 1)
    assert (checks["proofs_checked"], checks["proofs_failed"]) == (2, 0)
    assert checks["last_audit_passed_at"] == "2027-01-15T08:00:00Z"  # the later of the two
    assert checks["last_audit_failed_at"] == "2027-01-15T08:01:00Z"
    assert checks["last_proof_failed_at"] is None
    listed = api.client.get("/provider/nodes", headers=mine.headers).json()
    assert listed[0]["status"]["checks"] == checks
    [cordon] = api.client.get("/admin/cordons", headers=api.admin).json()
    assert cordon["checks"] == checks
    seen = api.client.get(f"/admin/nodes/{node_id}/status", headers=api.admin)
    assert seen.status_code == 200
    assert seen.json()["checks"] == checks
    assert seen.json()["cordon_reason"] == REASON
    assert api.client.get("/admin/nodes/999999/status", headers=api.admin).status_code == 404
    assert api.client.get(f"/admin/nodes/{node_id}/status", headers=mine.headers).status_code == 403


def test_the_providers_earnings_say_what_of_its_nodes_answers_was_disputed_in_all(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    mine, theirs = api.provider("mine"), api.provider("theirs")
    with api.engine.begin() as connection:
        upsert_chains(connection, [Chain(31338, "Anvil B", "anvilb", "Ether", "ETH", 18)])
    one, two = _node(api, mine, anvil.urls["a1"]), _node(api, mine, anvil.urls["a2"])
    other = _node(api, theirs, anvil.urls["b1"])
    earned = api.client.get("/provider/earnings", headers=mine.headers).json()
    assert earned["disputed"] == {"answers": 0, "credits": 0}
    _cordon(api, one, 3, 300)
    _cordon(api, two, 2, 250)
    _cordon(api, other, 7, 700)
    earned = api.client.get("/provider/earnings", headers=mine.headers).json()
    assert earned["disputed"] == {"answers": 5, "credits": 0.00000055}
