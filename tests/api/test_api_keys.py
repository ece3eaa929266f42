"""Customer API keys: create (secret once), list (hint), partial update, lookup by secret,
isolation between customers, and changes reaching a router."""

from __future__ import annotations

import inspect
import json
import re
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.management.api_keys import ROUTED_COLUMNS
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.snapshot import load_router_snapshot
from tests.api.conftest import ApiHarness

KEY_FIELDS = {
    "id",
    "customer_id",
    "name",
    "X-Hint",
    "key_hint",
    "allowed_domains",
    "routing_strategy",
    "active",
    "bypass_credit_check",
    "rate_limit",
    "rate_limit_interval_sec",
    "spend_alert",
    "verified",
    "max_price_per_call",
    "spent_today",
    "created_at",
    "updated_at",
}


def test_create_returns_the_secret_once_and_list_shows_a_hint(api: ApiHarness) -> None:
    customer = api.customer()
    created = api.create_key(
        customer, allowed_domains=["App.Example.com", "*.example.org"], name="web"
    )
    assert set(created) == KEY_FIELDS | {"api_key"}
    assert created["api_key"].startswith("crk_")
    assert created["allowed_domains"] == ["app.example.com", "*.example.org"]
    assert created["routing_strategy"] == "economy"
    assert created["active"] is True
    assert created["bypass_credit_check"] is False
    assert (created["rate_limit"], created["rate_limit_interval_sec"]) == (0, 1)  # no limit
    assert created["customer_id"] == customer.id
    listed = api.client.get("/api-keys", headers=customer.headers)
    assert listed.status_code == 200
    [item] = listed.json()
    assert set(item) == KEY_FIELDS
    assert item["X-Hint"] == item["key_hint"] == f"crk_...{created['api_key'][-4:]}"
    assert created["api_key"] not in listed.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"routing_strategy": "economy"}, "allowed_domains"),
        ({"allowed_domains": [], "routing_strategy": "economy"}, "allowed_domains"),
        ({"allowed_domains": ["*"]}, "routing_strategy"),
        ({"allowed_domains": ["*"], "routing_strategy": "fastest"}, "routing_strategy"),
        (
            {"allowed_domains": ["https://app.example.com"], "routing_strategy": "economy"},
            "allowed_domains[0]",
        ),
        ({"allowed_domains": ["a*b.com"], "routing_strategy": "economy"}, "allowed_domains[0]"),
        ({"allowed_domains": ["*"], "routing_strategy": "economy", "name": 5}, "name"),
        ({"allowed_domains": ["*"], "routing_strategy": "economy", "secret": "x"}, "secret"),
        ({"allowed_domains": "*", "routing_strategy": "economy"}, "allowed_domains"),
        ({"allowed_domains": ["*"], "routing_strategy": "economy", "rate_limit": -1}, "rate_limit"),
        (
            {"allowed_domains": ["*"], "routing_strategy": "economy", "rate_limit": 1_000_001},
            "rate_limit",
        ),
        (
            {"allowed_domains": ["*"], "routing_strategy": "economy", "rate_limit": "10"},
            "rate_limit",
        ),
        (
            {"allowed_domains": ["*"], "routing_strategy": "economy", "rate_limit": 2.5},
            "rate_limit",
        ),
        (
            {"allowed_domains": ["*"], "routing_strategy": "economy", "rate_limit_interval_sec": 0},
            "rate_limit_interval_sec",
        ),
        (
            {
                "allowed_domains": ["*"],
                "routing_strategy": "economy",
                "rate_limit_interval_sec": 86_401,
            },
            "rate_limit_interval_sec",
        ),
    ],
)
def test_invalid_key_bodies_are_422_naming_the_field(
    api: ApiHarness, body: dict[str, Any], field: str
) -> None:
    customer = api.customer()
    response = api.client.post("/api-keys", json=body, headers=customer.headers)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert field in [detail["field"] for detail in error["details"]], error


def test_control_characters_in_key_names_are_422_naming_the_field(api: ApiHarness) -> None:
    """PostgreSQL text cannot hold NUL (SQLite stores it): a key named "a\0" would be a 500."""
    customer = api.customer()
    key = api.create_key(customer)
    for method, path, body in [
        ("post", "/api-keys", {"allowed_domains": ["*"], "routing_strategy": "economy"}),
        ("patch", f"/api-keys/{key['id']}", {}),
    ]:
        response = api.client.request(
            method, path, json={**body, "name": "a\u0000b"}, headers=customer.headers
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"] == [
            {"field": "name", "message": "must not contain control characters"}
        ]


def test_a_customer_holds_a_bounded_number_of_keys(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chainrouter.management import api_keys

    monkeypatch.setattr(api_keys, "MAX_KEYS_PER_CUSTOMER", 2)
    customer = api.customer()
    api.create_key(customer)
    api.create_key(customer)
    third = api.client.post(
        "/api-keys",
        json={"allowed_domains": ["*"], "routing_strategy": "economy"},
        headers=customer.headers,
    )
    assert third.status_code == 409
    assert "at most 2 API keys" in third.json()["error"]["message"]
    assert api.create_key(api.customer("Someone else"))["active"] is True


def test_keys_created_at_once_cannot_pass_the_bound_together(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chainrouter.domain.enums import RoutingStrategy
    from chainrouter.management import api_keys
    from chainrouter.management.errors import ConflictError

    monkeypatch.setattr(api_keys, "MAX_KEYS_PER_CUSTOMER", 5)
    customer = api.customer()

    def create(number: int) -> bool:
        try:
            api_keys.create_api_key(
                api.engine,
                customer.id,
                name=f"k{number}",
                allowed_domains=["*"],
                routing_strategy=RoutingStrategy.ECONOMY,
            )
        except ConflictError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(create, range(30)))
    assert created.count(True) == 5
    assert len(api.client.get("/api-keys", headers=customer.headers).json()) == 5


def test_a_body_that_is_not_json_is_400(api: ApiHarness) -> None:
    customer = api.customer()
    response = api.client.post(
        "/api-keys",
        content=b"{not json",
        headers={**customer.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_patch_changes_only_the_given_fields(api: ApiHarness) -> None:
    customer = api.customer()
    key = api.create_key(customer, name="before", allowed_domains=["a.example.com"])
    patched = api.client.patch(
        f"/api-keys/{key['id']}", json={"name": "after"}, headers=customer.headers
    )
    assert patched.status_code == 200
    body = patched.json()
    assert body["name"] == "after"
    assert body["allowed_domains"] == ["a.example.com"]
    assert body["active"] is True
    assert body["updated_at"] >= key["updated_at"]
    patched = api.client.patch(
        f"/api-keys/{key['id']}",
        json={
            "active": False,
            "allowed_domains": ["b.example.com"],
            "routing_strategy": "performance",
        },
        headers=customer.headers,
    ).json()
    assert (patched["name"], patched["active"], patched["allowed_domains"]) == (
        "after",
        False,
        ["b.example.com"],
    )
    assert patched["routing_strategy"] == "performance"
    limited = api.client.patch(
        f"/api-keys/{key['id']}",
        json={"rate_limit": 50, "rate_limit_interval_sec": 10},
        headers=customer.headers,
    ).json()
    assert (limited["rate_limit"], limited["rate_limit_interval_sec"]) == (50, 10)
    assert limited["name"] == "after"
    patched = api.client.patch(
        f"/api-keys/{key['id']}", json={"rate_limit": 0}, headers=customer.headers
    ).json()
    assert (patched["rate_limit"], patched["rate_limit_interval_sec"]) == (0, 10)
    unchanged = api.client.patch(f"/api-keys/{key['id']}", json={}, headers=customer.headers)
    assert unchanged.status_code == 200
    assert unchanged.json() == patched


def test_a_key_asks_for_verified_answers_and_can_stop(api: ApiHarness) -> None:
    customer = api.customer()
    assert api.create_key(customer)["verified"] is False  # the chain's setting decides
    key = api.create_key(customer, verified=True)
    assert key["verified"] is True
    [listed] = [
        k
        for k in api.client.get("/api-keys", headers=customer.headers).json()
        if k["id"] == key["id"]
    ]
    assert listed["verified"] is True
    patched = api.client.patch(
        f"/api-keys/{key['id']}", json={"verified": False}, headers=customer.headers
    ).json()
    assert (patched["verified"], patched["name"]) == (False, key["name"])


@pytest.mark.parametrize(
    "body",
    [
        {"allowed_domains": []},
        {"name": None},
        {"active": "yes"},
        {"routing_strategy": "cheap"},
        {"api_key": "crk_x"},
        {"bypass_credit_check": True},
        {"rate_limit": None},
        {"rate_limit": -5},
        {"rate_limit_interval_sec": 0},
        {"verified": "yes"},
        {"verified": None},
    ],
)
def test_invalid_patches_are_422(api: ApiHarness, body: dict[str, Any]) -> None:
    customer = api.customer()
    key = api.create_key(customer)
    response = api.client.patch(f"/api-keys/{key['id']}", json=body, headers=customer.headers)
    assert response.status_code == 422, response.text


def test_another_customers_key_is_404_and_never_changes(api: ApiHarness) -> None:
    owner, other = api.customer("Owner"), api.customer("Other")
    key = api.create_key(owner, name="mine")
    for key_id in (key["id"], 999_999):
        response = api.client.patch(
            f"/api-keys/{key_id}", json={"name": "stolen"}, headers=other.headers
        )
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"no API key {key_id}"
    assert api.client.get("/api-keys", headers=other.headers).json() == []
    assert api.client.get("/api-keys", headers=owner.headers).json()[0]["name"] == "mine"


def test_lookup_by_secret_finds_only_your_own_key(api: ApiHarness) -> None:
    owner, other = api.customer("Owner"), api.customer("Other")
    key = api.create_key(owner)
    found = api.client.post(
        "/api-keys/lookup", json={"api_key": key["api_key"]}, headers=owner.headers
    )
    assert found.status_code == 200
    assert found.json()["id"] == key["id"]
    assert "api_key" not in found.json()
    altered = key["api_key"][:-1] + ("B" if key["api_key"].endswith("A") else "A")
    for caller, secret in ((other, key["api_key"]), (owner, altered)):
        missing = api.client.post(
            "/api-keys/lookup", json={"api_key": secret}, headers=caller.headers
        )
        assert missing.status_code == 404


@pytest.mark.anyio
async def test_new_and_changed_keys_reach_a_router_at_its_next_poll(
    api: ApiHarness, upstream: Any
) -> None:
    apply_config(
        api.engine,
        validate_document(
            {
                "chains": [
                    {
                        "chain_id": 31337,
                        "name": "Test",
                        "short_name": "t",
                        "native_currency": {"name": "Ether", "symbol": "ETH"},
                    }
                ],
                "providers": [
                    {
                        "slug": "p",
                        "name": "P",
                        "plans": [
                            {
                                "name": "basic",
                                "methods": [{"method": "eth_blockNumber", "cost": "0"}],
                                "nodes": [{"url": upstream.url("/ok/api-keys"), "chain_id": 31337}],
                            }
                        ],
                    }
                ],
            }
        ),
    )
    async with api.router() as router:
        customer = api.customer()
        key = api.create_key(customer, allowed_domains=["app.example.com"])
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"}).encode()

        async def status(origin: str = "https://app.example.com") -> int:
            return (await router.call("31337", key["api_key"], call, origin=origin)).status

        assert await status() == 401  # not loaded yet
        assert await router.refresh()
        assert await status() == 200
        assert await status("https://evil.example.net") == 403
        api.client.patch(
            f"/api-keys/{key['id']}",
            json={"allowed_domains": ["evil.example.net"]},
            headers=customer.headers,
        )
        assert await router.refresh()
        assert await status("https://evil.example.net") == 200
        api.client.patch(
            f"/api-keys/{key['id']}",
            json={"rate_limit": 1, "rate_limit_interval_sec": 60},
            headers=customer.headers,
        )
        assert await router.refresh()
        assert await status("https://evil.example.net") == 200
        assert await status("https://evil.example.net") == 429  # its own limit: 1 a minute
        api.client.patch(f"/api-keys/{key['id']}", json={"active": False}, headers=customer.headers)
        assert await router.refresh()
        assert await status("https://evil.example.net") == 401


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
_bodies = (
    st.fixed_dictionaries(
        {},
        optional={
            "allowed_domains": st.lists(
                st.sampled_from(["*", "a.example.com", "*.x.io", "", "b c", "::1"])
                | st.text(max_size=20),
                max_size=4,
            )
            | _json,
            "routing_strategy": st.sampled_from(["economy", "performance", "x"]) | _json,
            "name": st.text(max_size=250) | _json,
            "rate_limit": st.integers(-2, 2_000_000) | _json,
            "rate_limit_interval_sec": st.integers(-2, 100_000) | _json,
        },
    )
    | _json
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_bodies)
def test_any_create_body_is_accepted_or_refused_with_422_never_a_500(
    api: ApiHarness, body: Any
) -> None:
    if not hasattr(api, "_fuzz_customer"):
        api._fuzz_customer = api.customer("Fuzz")  # type: ignore[attr-defined]
    customer = api._fuzz_customer  # type: ignore[attr-defined]
    response = api.client.post("/api-keys", json=body, headers=customer.headers)
    assert response.status_code in (201, 422), response.text
    assert set(response.json()) == (
        {"error"} if response.status_code == 422 else KEY_FIELDS | {"api_key"}
    )


def test_a_keys_max_price_per_call_is_exact_set_and_read_through_the_api(api: ApiHarness) -> None:
    customer = api.customer()
    created = api.create_key(customer, max_price_per_call="0.0000005")
    # Read exactly: the JSON number's text, not a binary float.
    raw = api.client.get("/api-keys", headers=customer.headers).text
    assert '"max_price_per_call":0.0000005' in raw.replace(" ", "")
    assert Decimal(str(created["max_price_per_call"])) == Decimal("0.0000005")
    changed = api.client.patch(
        f"/api-keys/{created['id']}", json={"max_price_per_call": "2"}, headers=customer.headers
    )
    assert changed.status_code == 200, changed.text
    assert Decimal(str(changed.json()["max_price_per_call"])) == 2
    assert api.create_key(customer)["max_price_per_call"] == 0  # no cap unless set


@given(
    value=st.one_of(
        st.just("-0.1"),
        st.just("0.0000000001"),  # past nano-credits
        st.just("1e3"),
        st.just("1_000"),
        st.text(max_size=5).filter(lambda t: not t.strip().replace(".", "", 1).isdigit()),
    )
)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_max_price_that_is_not_an_exact_amount_is_refused(api: ApiHarness, value: object) -> None:
    customer = api.customer()
    body = {"allowed_domains": ["*"], "max_price_per_call": value}
    refused = api.client.post("/api-keys", json=body, headers=customer.headers)
    assert refused.status_code == 422, (value, refused.text)


def test_a_rename_reloads_no_router_and_a_change_routers_read_does(api: ApiHarness) -> None:
    """Routers reload their configuration when its version moves: a key's name or spend alert
    is nothing they read, so a loop of renames costs them nothing (issue 52)."""
    customer = api.customer()
    key = api.create_key(customer)

    def version() -> int:
        with api.engine.connect() as connection:
            return read_config_version(connection)

    def patch(**fields: Any) -> None:
        changed = api.client.patch(f"/api-keys/{key['id']}", json=fields, headers=customer.headers)
        assert changed.status_code == 200, changed.text

    before = version()
    for n in range(5):
        patch(name=f"renamed {n}")
    patch(spend_alert="3")
    assert version() == before
    patch(allowed_domains=["app.example.com"])
    assert version() == before + 1
    patch(max_price_per_call="1")
    assert version() == before + 2


def test_every_field_routers_read_of_a_key_bumps_the_version() -> None:
    """What `load_router_snapshot` reads of a key, every column, is in ROUTED_COLUMNS."""
    source = inspect.getsource(load_router_snapshot)
    read = set(re.findall(r"row\.(\w+)", source.split("balances =")[0]))
    assert read - {"id", "customer_id", "key_hash"} <= ROUTED_COLUMNS
