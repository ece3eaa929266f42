"""The OpenAPI 3.1 description: version 1.0.0, interactive docs served offline, and every
response the server gives (each route, success and error) valid against what it documents."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import Role
from chainrouter.domain.records import CordonWrite
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.nodes import write_cordons
from tests.anvil import AnvilNodes
from tests.api.conftest import MINING_CHAIN, ApiHarness, MiningNode


class DocumentedResponses:
    """Validates responses against the served description and records which operations ran."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.seen: set[tuple[str, str]] = set()

    def check(self, response: httpx.Response, template: str) -> httpx.Response:
        method = response.request.method.lower()
        operation = self.spec["paths"][template][method]
        status = str(response.status_code)
        assert status in operation["responses"], (
            f"{method} {template} answered undocumented {status}"
        )
        self.seen.add((method, template))
        if response.status_code == 204:
            return response
        pointer = "/".join(
            [
                "#/paths",
                template.replace("~", "~0").replace("/", "~1"),
                method,
                "responses",
                status,
                "content/application~1json/schema",
            ]
        )
        validator = Draft202012Validator({**self.spec, "$ref": pointer})
        errors = [
            f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(response.json())
        ]
        assert not errors, f"{method} {template} {status}: {errors[:3]}"
        return response


def test_the_description_is_openapi_3_1_version_1_0_0(api: ApiHarness) -> None:
    spec = api.client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert spec["info"]["version"] == "1.0.0"
    assert spec["components"]["securitySchemes"]["ManagementToken"] == {
        "type": "apiKey",
        "description": "A management token (crm_...). Administrators create them.",
        "in": "header",
        "name": "X-Api-Key",
    }
    for operation in (op for path in spec["paths"].values() for op in path.values()):
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                assert schema in (
                    {"$ref": "#/components/schemas/ErrorBody"},
                    {"$ref": "#/components/schemas/HealthOut"},
                ), (operation["summary"], status)


def test_interactive_docs_work_without_the_internet(api: ApiHarness) -> None:
    for page in ("/docs", "/redoc"):
        html = api.client.get(page)
        assert html.status_code == 200
        assert "cdn.jsdelivr" not in html.text
        assert "/openapi.json" in html.text
    assert api.client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200


@pytest.mark.parametrize("backend", ["every route"])
def test_every_route_answers_what_it_documents(
    api: ApiHarness,
    https_anvil: dict[str, str],
    anvil: AnvilNodes,
    mining_anvil: MiningNode,
    backend: str,
) -> None:
    c = api.client
    docs = DocumentedResponses(c.get("/openapi.json").json())
    check = docs.check
    admin = api.admin
    # Public lists, empty and then not.
    check(c.get("/health"), "/health")
    for path in (
        "/chains",
        "/chains/ws",
        "/prices",
        "/prices/ws",
        "/prices/ws/holding",
        "/prices/cache",
    ):
        check(c.get(path), path)
    # Customers, tokens, credits.
    customer = check(
        c.post("/admin/customers", json={"name": "Doc", "email": "doc@example.com"}, headers=admin),
        "/admin/customers",
    ).json()
    check(
        c.post("/admin/customers", json={"name": "Doc", "email": "doc@example.com"}, headers=admin),
        "/admin/customers",
    )
    check(c.get("/admin/customers", headers=admin), "/admin/customers")
    check(
        c.get(f"/admin/customers/{customer['id']}", headers=admin), "/admin/customers/{customer_id}"
    )
    check(c.get("/admin/customers/999", headers=admin), "/admin/customers/{customer_id}")
    token = check(
        c.post(f"/admin/customers/{customer['id']}/tokens", json={"label": "t"}, headers=admin),
        "/admin/customers/{customer_id}/tokens",
    ).json()
    me = {"X-Api-Key": token["token"]}
    check(
        c.get(f"/admin/customers/{customer['id']}/tokens", headers=admin),
        "/admin/customers/{customer_id}/tokens",
    )
    check(c.get("/admin/customers", headers=me), "/admin/customers")
    check(c.get("/admin/customers"), "/admin/customers")
    credits_path = "/admin/customers/{customer_id}/credits"
    body = {"kind": "purchase", "amount": "5", "reference": "p1"}
    check(
        c.post(f"/admin/customers/{customer['id']}/credits", json=body, headers=admin), credits_path
    )
    check(
        c.post(f"/admin/customers/{customer['id']}/credits", json=body, headers=admin), credits_path
    )
    check(
        c.post(f"/admin/customers/{customer['id']}/credits", json={"kind": "x"}, headers=admin),
        credits_path,
    )
    check(c.get(f"/admin/customers/{customer['id']}/credits", headers=admin), credits_path)
    # Providers, plans, prices.
    provider = check(
        c.post("/admin/providers", json={"slug": "doc", "name": "Doc"}, headers=admin),
        "/admin/providers",
    ).json()
    check(c.get("/admin/providers", headers=admin), "/admin/providers")
    check(
        c.put(
            f"/admin/customers/{customer['id']}/provider",
            json={"provider_id": provider["id"]},
            headers=admin,
        ),
        "/admin/customers/{customer_id}/provider",
    )
    plan = check(
        c.post(
            f"/admin/providers/{provider['id']}/plans",
            json={"name": "p", "quota": "10"},
            headers=admin,
        ),
        "/admin/providers/{provider_id}/plans",
    ).json()
    check(
        c.get(f"/admin/providers/{provider['id']}/plans", headers=admin),
        "/admin/providers/{provider_id}/plans",
    )
    check(
        c.patch(f"/admin/plans/{plan['id']}", json={"price": "1.5"}, headers=admin),
        "/admin/plans/{plan_id}",
    )
    methods = check(
        c.post(
            f"/admin/plans/{plan['id']}/methods",
            json=[{"method": "eth_call", "cost": "0.1"}],
            headers=admin,
        ),
        "/admin/plans/{plan_id}/methods",
    ).json()
    check(
        c.get(f"/admin/plans/{plan['id']}/methods", headers=admin), "/admin/plans/{plan_id}/methods"
    )
    check(
        c.delete(f"/admin/plans/{plan['id']}/methods/{methods[0]['id']}", headers=admin),
        "/admin/plans/{plan_id}/methods/{method_id}",
    )
    # API keys and usage.
    key = check(
        c.post(
            "/api-keys", json={"allowed_domains": ["*"], "routing_strategy": "economy"}, headers=me
        ),
        "/api-keys",
    ).json()
    check(c.post("/api-keys", json={}, headers=me), "/api-keys")
    check(c.get("/api-keys", headers=me), "/api-keys")
    check(c.get("/api-keys"), "/api-keys")
    check(c.patch(f"/api-keys/{key['id']}", json={"name": "n"}, headers=me), "/api-keys/{key_id}")
    check(c.patch("/api-keys/999", json={"name": "n"}, headers=me), "/api-keys/{key_id}")
    check(
        c.post("/api-keys/lookup", json={"api_key": key["api_key"]}, headers=me), "/api-keys/lookup"
    )
    every = (
        "summary,balance,by_chain,by_api_key,by_api_key_chain,top_methods,time_series,by_scenario,"
        "time_series_by_chain,time_series_by_method,time_series_by_api_key,"
        "time_series_by_scenario,failures"
    )
    check(c.get("/usage", params={"include": every}, headers=me), "/usage")
    check(c.get("/latency", headers=me), "/latency")
    check(c.get("/latency", params={"chain_id": "x"}, headers=me), "/latency")
    check(c.get("/usage", params={"group_by": "api_key,chain"}, headers=me), "/usage")
    check(c.get("/usage", params={"include": "nope"}, headers=me), "/usage")
    check(c.get("/usage", params={"api_key_id": 999}, headers=me), "/usage")
    # Submissions and their review.
    agent_token = api.customer("Agent", role=Role.AGENT)
    chain_request = check(
        c.post(
            "/chains/requests",
            json={"name": "A", "chain_id": 31337, "rpc_urls": [https_anvil["a1"]]},
        ),
        "/chains/requests",
    ).json()
    check(
        c.post(
            "/chains/requests", json={"name": "A", "chain_id": 1, "rpc_urls": [https_anvil["a1"]]}
        ),
        "/chains/requests",
    )
    check(c.post("/chains/requests", json={"name": "A"}), "/chains/requests")
    check(
        c.post("/chains/requests", json={"name": "A"}, headers={"X-Api-Key": "crm_x"}),
        "/chains/requests",
    )
    for _ in range(4):
        c.post(
            "/chains/requests",
            json={"name": "A", "chain_id": 31337, "rpc_urls": [https_anvil["a1"]]},
        )
    check(
        c.post(
            "/chains/requests",
            json={"name": "A", "chain_id": 31337, "rpc_urls": [https_anvil["a1"]]},
        ),
        "/chains/requests",
    )
    node_request = check(
        c.post(
            "/nodes/requests",
            json={"name": "n", "url": https_anvil["a2"]},
            headers=agent_token.headers,
        ),
        "/nodes/requests",
    ).json()
    check(c.get("/admin/chain-requests", headers=admin), "/admin/chain-requests")
    check(c.get("/admin/node-requests", headers=admin), "/admin/node-requests")
    check(
        c.post(
            f"/admin/chain-requests/{chain_request['id']}/approve",
            json={"native_currency_symbol": "ETH"},
            headers=admin,
        ),
        "/admin/chain-requests/{request_id}/approve",
    )
    check(
        c.post(f"/admin/chain-requests/{chain_request['id']}/reject", json={}, headers=admin),
        "/admin/chain-requests/{request_id}/reject",
    )
    check(
        c.post(
            f"/admin/node-requests/{node_request['id']}/approve",
            json={"plan_id": plan["id"]},
            headers=admin,
        ),
        "/admin/node-requests/{request_id}/approve",
    )
    check(
        c.post(f"/admin/node-requests/{node_request['id']}/reject", json={}, headers=admin),
        "/admin/node-requests/{request_id}/reject",
    )
    # Provider routes, with the customer now linked to the provider.
    check(c.get("/provider/plans", headers=me), "/provider/plans")
    plan_methods = "/provider/plans/{plan_id}/methods"
    check(c.get(f"/provider/plans/{plan['id']}/methods", headers=me), plan_methods)
    check(
        c.post(
            f"/provider/plans/{plan['id']}/methods",
            json=[{"method": "eth_call", "cost": "0"}],
            headers=me,
        ),
        plan_methods,
    )
    check(c.get("/provider/plans/999/methods", headers=me), plan_methods)
    check(c.get("/provider/plans", headers=agent_token.headers), "/provider/plans")
    node_body = {"plan_id": plan["id"], "url": anvil.urls["a1"]}
    node = check(c.put("/provider/nodes", json=node_body, headers=me), "/provider/nodes").json()
    check(
        c.put("/provider/nodes", json={**node_body, "url": anvil.urls["b1"]}, headers=me),
        "/provider/nodes",
    )
    check(c.put("/provider/nodes", json={"url": 5}, headers=me), "/provider/nodes")
    # A rise with notice: the price list shows it scheduled.
    raise_price = [{"method": "eth_call", "cost": "0.5"}]
    check(
        c.post(f"/provider/plans/{plan['id']}/methods", json=raise_price, headers=me), plan_methods
    )
    scheduled = check(c.get("/prices"), "/prices").json()
    assert {p["next_cost"] for p in scheduled} == {0.5}
    with api.engine.begin() as connection:
        upsert_chains(connection, [Chain(MINING_CHAIN, "Mining", "m", "Ether", "ETH", 18)])
    purge = "/admin/chains/{chain_id}/cache/purge"
    check(c.post(f"/admin/chains/{MINING_CHAIN}/cache/purge", headers=admin), purge)
    check(c.post("/admin/chains/424242/cache/purge", headers=admin), purge)
    check(c.post("/admin/chains/0/cache/purge", headers=admin), purge)
    ws_body = {"plan_id": plan["id"], "chain_id": MINING_CHAIN, "url": mining_anvil.wss}
    check(c.put("/provider/nodes/ws", json=ws_body, headers=me), "/provider/nodes/ws")
    status_path = "/provider/nodes/{node_id}/status"
    check(c.get(f"/provider/nodes/{node['node']['id']}/status", headers=me), status_path)
    check(c.get("/provider/nodes/9999/status", headers=me), status_path)
    set_body = {"node_id": node["node"]["id"], "status": "disabled by provider"}
    check(c.post("/provider/nodes/status", json=set_body, headers=me), "/provider/nodes/status")
    # Cordons: a router's write, then the administrator's list and lift (tests/api/test_cordons).
    write_cordons(api.engine, [CordonWrite(node["node"]["id"], "audit: outvoted", 1.8e9, 2, 9)])
    check(c.get("/provider/nodes/{}/status".format(node["node"]["id"]), headers=me), status_path)
    check(c.get("/admin/cordons", headers=admin), "/admin/cordons")
    check(c.get("/admin/cordons", params={"limit": 0}, headers=admin), "/admin/cordons")
    lift = "/admin/nodes/{node_id}/lift-cordon"
    check(c.post(f"/admin/nodes/{node['node']['id']}/lift-cordon", headers=admin), lift)
    check(c.post(f"/admin/nodes/{node['node']['id']}/lift-cordon", headers=admin), lift)
    check(c.post("/admin/nodes/99999/lift-cordon", headers=admin), lift)
    status = "/admin/nodes/{node_id}/status"
    check(c.get(f"/admin/nodes/{node['node']['id']}/status", headers=admin), status)
    check(c.get("/admin/nodes/99999/status", headers=admin), status)
    check(c.get(f"/admin/nodes/{node['node']['id']}/status", headers=me), status)
    check(c.get("/provider/nodes", headers=me), "/provider/nodes")
    check(c.get("/provider/nodes", params={"limit": 0}, headers=me), "/provider/nodes")
    check(c.get("/provider/earnings", headers=me), "/provider/earnings")
    check(
        c.get("/provider/earnings", params={"granularity": "week"}, headers=me),
        "/provider/earnings",
    )
    # The caller's own account and tokens; sign-up (off here).
    check(c.get("/account", headers=me), "/account")
    check(c.get("/account"), "/account")
    check(c.patch("/account", json={"low_balance_alert": "1.5"}, headers=me), "/account")
    check(c.patch("/account", json={"low_balance_alert": "-1"}, headers=me), "/account")
    own = check(c.post("/tokens", json={"label": "own"}, headers=me), "/tokens").json()
    check(c.post("/tokens", json={"label": "own"}, headers=me), "/tokens")
    check(c.post("/tokens", json={}, headers=me), "/tokens")
    check(c.get("/tokens", headers=me), "/tokens")
    check(c.post(f"/tokens/{own['id']}/revoke", headers=me), "/tokens/{token_id}/revoke")
    check(c.post("/tokens/99999/revoke", headers=me), "/tokens/{token_id}/revoke")
    check(c.post("/signup", json={"name": "S", "email": "s@example.com"}), "/signup")
    check(c.post("/signup", json={"name": "S"}), "/signup")
    check(
        c.post(f"/admin/tokens/{token['id']}/revoke", headers=admin),
        "/admin/tokens/{token_id}/revoke",
    )
    check(c.get("/chains"), "/chains")
    # Buying credits, none offered here (tests/payments has them offered).
    check(c.get("/billing/options", headers=admin), "/billing/options")
    address = "/billing/deposit-address"
    check(c.get(address, params={"chain_id": 31337}, headers=admin), address)
    check(c.get(address, params={"chain_id": "x"}, headers=admin), address)
    qr = "/billing/deposit-qr"
    check(c.get(qr, params={"chain_id": 31337, "asset": "native"}, headers=admin), qr)
    check(c.get("/billing/deposits", headers=admin), "/billing/deposits")
    check(c.get("/billing/purchases", headers=admin), "/billing/purchases")
    check(c.post("/billing/checkout", json={"credits": 5}, headers=admin), "/billing/checkout")
    check(c.post("/billing/checkout", json={"credits": 5}), "/billing/checkout")
    check(c.post("/webhooks/stripe", content=b"{}"), "/webhooks/stripe")
    check(c.get("/admin/billing/summary", headers=admin), "/admin/billing/summary")
    check(c.get("/admin/billing/summary", headers=me), "/admin/billing/summary")
    check(c.get("/admin/billing/deposits", headers=admin), "/admin/billing/deposits")
    operations = {(m, p) for p, item in docs.spec["paths"].items() for m in item}
    assert operations - docs.seen == set()
