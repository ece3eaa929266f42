"""Management writes limited per token: every POST, PUT, PATCH or DELETE through a management
token, whatever its role and route, counts against that token's budget; past it, HTTP 429 with
Retry-After and nothing written. Reads are not counted. With Redis, the API processes share it
(issue 52; docs/security.md, "Bounds")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from httpx import Response
from sqlalchemy import func, select

from chainrouter.stores.sql import schema as t
from tests.api.conftest import ApiFactory, ApiHarness, Customer
from tests.api.test_openapi import DocumentedResponses
from tests.redis_servers import PrivateRedis


def _refused(answer: Response, limit: int) -> None:
    assert answer.status_code == 429, answer.text
    assert 1 <= int(answer.headers["Retry-After"]) <= 67  # the window, and one slot of it
    assert answer.json() == {
        "error": {
            "code": "rate_limited",
            "message": f"at most {limit} writes per 60 s per management token",
        }
    }


def _keys(api: ApiHarness, customer: Customer) -> int:
    with api.engine.connect() as connection:
        count: int = connection.execute(
            select(func.count()).where(t.api_keys.c.customer_id == customer.id)
        ).scalar_one()
    return count


def _new_key(api: ApiHarness, customer: Customer, **headers: str) -> Response:
    body: dict[str, Any] = {"allowed_domains": ["*"], "routing_strategy": "economy"}
    return api.client.post("/api-keys", json=body, headers={**customer.headers, **headers})


def test_a_customer_tokens_writes_past_its_budget_are_refused_and_its_reads_are_not(
    make_api: ApiFactory,
) -> None:
    api = make_api(api_writes_per_token=3)
    docs = DocumentedResponses(api.client.get("/openapi.json").json())
    customer = api.customer()
    made = _new_key(api, customer)
    assert made.status_code == 201, made.text
    secret, key_id = made.json()["api_key"], made.json()["id"]
    renamed = api.client.patch(f"/api-keys/{key_id}", json={"name": "n"}, headers=customer.headers)
    assert renamed.status_code == 200, renamed.text
    assert _new_key(api, customer).status_code == 201
    _refused(docs.check(_new_key(api, customer), "/api-keys"), 3)
    renaming = api.client.patch(f"/api-keys/{key_id}", json={"name": "m"}, headers=customer.headers)
    _refused(docs.check(renaming, "/api-keys/{key_id}"), 3)
    assert _keys(api, customer) == 2  # nothing of the refused writes was written
    # Reads go on: lists, and the lookup that takes its secret in a POST body.
    assert api.client.get("/api-keys", headers=customer.headers).status_code == 200
    assert api.client.get("/account", headers=customer.headers).status_code == 200
    found = api.client.post("/api-keys/lookup", json={"api_key": secret}, headers=customer.headers)
    assert found.status_code == 200, found.text
    # The budget is the token's: another token of the same customer has its own.
    issued = api.client.post(
        f"/admin/customers/{customer.id}/tokens", json={"label": "second"}, headers=api.admin
    )
    assert issued.status_code == 201, issued.text
    second = Customer(customer.id, issued.json()["token"], customer.email)
    assert _new_key(api, second).status_code == 201


def test_administrator_and_provider_writes_count_on_every_route_alike(
    make_api: ApiFactory,
) -> None:
    """One budget per token across routes: an administrator's creating, re-pricing and
    deleting, a provider's node and price writes, and a write a route then refuses."""
    api = make_api(api_writes_per_token=7)
    provider = api.provider("acme")  # 5 writes of the administrator's
    plan = provider.plan_ids[0]
    methods = api.client.post(
        f"/admin/plans/{plan}/methods",
        json=[{"method": "eth_call", "cost": "0.000001"}],
        headers=api.admin,
    )
    assert methods.status_code == 200, methods.text
    refused_by_route = api.client.post("/admin/providers", json={"slug": "!"}, headers=api.admin)
    assert refused_by_route.status_code == 422  # the 7th write: counted all the same
    _refused(
        api.client.delete(
            f"/admin/plans/{plan}/methods/{methods.json()[0]['id']}", headers=api.admin
        ),
        7,
    )
    assert api.client.get(f"/admin/plans/{plan}/methods", headers=api.admin).status_code == 200
    # The provider's own token: price rows and node status are writes too.
    price = [{"method": "eth_call", "cost": "0.0000005"}]
    for _ in range(7):
        answer = api.client.post(
            f"/provider/plans/{plan}/methods", json=price, headers=provider.headers
        )
        assert answer.status_code == 200, answer.text
    _refused(
        api.client.post(
            "/provider/nodes/status",
            json={"node_id": 1, "status": "disabled by provider"},
            headers=provider.headers,
        ),
        7,
    )
    # A submission with an administrator's token skips the per-IP limit, not the token's.
    chain = {"name": "X", "chain_id": 777, "rpc_urls": ["https://rpc.example"]}
    _refused(api.client.post("/chains/requests", json=chain, headers=api.admin), 7)


@pytest.fixture
def shared_redis() -> Iterator[PrivateRedis]:
    redis = PrivateRedis()
    yield redis
    redis.stop()


def test_with_redis_the_api_processes_share_each_tokens_budget(
    make_api: ApiFactory, shared_redis: PrivateRedis
) -> None:
    # A Redis slower than its time-out has each process limit on its own share (test_redis_
    # trouble.py): not what this test is about, and a loaded machine can be that slow at 0.1 s.
    shared = {"redis_url": shared_redis.url, "redis_timeout_s": 3.0}
    first = make_api(api_writes_per_token=4, **shared)
    second = make_api(api_writes_per_token=4, **shared)
    customer = first.customer()  # the administrator's writes: another token's budget
    for api in (first, second, first, second):
        assert _new_key(api, customer).status_code == 201
    _refused(_new_key(first, customer), 4)
    _refused(_new_key(second, customer), 4)
    assert shared_redis.keys("chainrouter:rl:mgmt-writes:*")
    assert _keys(first, customer) == 4


def test_the_description_says_which_operations_the_write_budget_refuses(api: ApiHarness) -> None:
    spec = api.client.get("/openapi.json").json()
    limited = {
        (method, path)
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if "429" in operation["responses"]
    }
    assert {
        ("post", "/api-keys"),
        ("patch", "/api-keys/{key_id}"),
        ("post", "/provider/nodes/status"),
        ("delete", "/admin/plans/{plan_id}/methods/{method_id}"),
        ("patch", "/account"),
    } <= limited
    # Reads, and routes without a token (beside their per-IP limits), are not.
    assert ("get", "/api-keys") not in limited
    assert ("post", "/api-keys/lookup") not in limited
    assert ("post", "/webhooks/stripe") not in limited
