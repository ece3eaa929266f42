"""Self-service (spec section 5, rule 1: management tokens are created and revoked in the
dashboard, the secret shown once): who the caller is, their own tokens, sign-up where enabled,
the provider's node list, and the API's answer to browsers of other origins."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from chainrouter.management import account, admin
from chainrouter.management.account import MAX_LIVE_TOKENS
from chainrouter.management.errors import ConflictError
from tests.api.conftest import ApiFactory, ApiHarness


def test_account_says_who_the_token_belongs_to(api: ApiHarness) -> None:
    customer = api.customer("Who")
    body = api.client.get("/account", headers=customer.headers).json()
    assert body["customer_id"] == customer.id
    assert (body["name"], body["email"], body["role"]) == ("Who", customer.email, "customer")
    assert body["provider"] is None
    assert Decimal(str(body["balance"])) == 0
    provider = api.provider("acct")
    linked = api.client.get("/account", headers=provider.headers).json()
    assert linked["provider"] == {"id": provider.provider_id, "slug": "acct", "name": "Acct"}


def test_account_and_tokens_need_a_live_token(api: ApiHarness) -> None:
    for path in ("/account", "/tokens"):
        assert api.client.get(path).status_code == 401
        assert api.client.get(path, headers={"X-Api-Key": "crm_" + "x" * 40}).status_code == 401
    # The token is checked before a byte of the body is read (api/body_guard.py).
    refused = api.client.post("/tokens", content=b"{" * 10_000)
    assert refused.status_code == 401


def test_a_token_made_in_the_dashboard_is_shown_once_works_and_can_be_revoked(
    api: ApiHarness,
) -> None:
    customer = api.customer()
    made = api.client.post("/tokens", json={"label": "ci"}, headers=customer.headers)
    assert made.status_code == 201
    assert made.headers["cache-control"] == "no-store"
    issued = made.json()
    secret = issued["token"]
    assert secret.startswith("crm_")
    assert issued["role"] == "customer"
    assert secret[-4:] in issued["token_hint"]
    listed = api.client.get("/tokens", headers=customer.headers)
    assert secret not in listed.text
    assert [t["label"] for t in listed.json()] == ["main", "ci"]
    new = {"X-Api-Key": secret}
    assert api.client.get("/api-keys", headers=new).status_code == 200
    revoked = api.client.post(f"/tokens/{issued['id']}/revoke", headers=customer.headers)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert api.client.get("/api-keys", headers=new).status_code == 401


def test_a_customer_mints_only_customer_tokens_and_touches_only_its_own(
    api: ApiHarness,
) -> None:
    mine, theirs = api.customer("Mine"), api.customer("Theirs")
    escalating = api.client.post(
        "/tokens", json={"label": "root", "role": "administrator"}, headers=mine.headers
    )
    assert escalating.status_code == 422  # no role field here: agents and admins are issued
    their_token = api.client.get("/tokens", headers=theirs.headers).json()[0]["id"]
    assert api.client.post(f"/tokens/{their_token}/revoke", headers=mine.headers).status_code == 404
    assert api.client.get("/account", headers=theirs.headers).status_code == 200


def test_labels_are_unique_and_live_tokens_are_bounded(api: ApiHarness) -> None:
    customer = api.customer()
    again = api.client.post("/tokens", json={"label": "main"}, headers=customer.headers)
    assert again.status_code == 409
    for number in range(MAX_LIVE_TOKENS - 1):
        made = api.client.post("/tokens", json={"label": f"t{number}"}, headers=customer.headers)
        assert made.status_code == 201
    over = api.client.post("/tokens", json={"label": "one more"}, headers=customer.headers)
    assert over.status_code == 409
    assert "revoke one first" in over.json()["error"]["message"]
    empty = api.client.post("/tokens", json={"label": ""}, headers=customer.headers)
    assert empty.status_code == 422


def test_tokens_issued_at_once_cannot_pass_the_bound_together(api: ApiHarness) -> None:
    """Each issue counts the live tokens, then adds one: issued at once, each would count the
    same number and all pass. The customer is locked while one is issued."""
    customer = api.customer()  # one token live already

    def issue(number: int) -> str:
        try:
            account.issue_own_token(api.engine, customer.id, f"t{number}")
        except ConflictError:
            return "refused"
        return "issued"

    changed_before = api.client.get(f"/admin/customers/{customer.id}", headers=api.admin)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(issue, range(40)))
    assert outcomes.count("issued") == MAX_LIVE_TOKENS - 1
    live = api.client.get("/tokens", headers=customer.headers).json()
    assert len(live) == MAX_LIVE_TOKENS
    # The lock is no change: the customer's record is not stamped as changed.
    changed_after = api.client.get(f"/admin/customers/{customer.id}", headers=api.admin)
    assert changed_after.json()["updated_at"] == changed_before.json()["updated_at"]


def test_revoking_the_token_in_use_signs_out(api: ApiHarness) -> None:
    customer = api.customer()
    own = api.client.get("/account", headers=customer.headers).json()["token_id"]
    assert api.client.post(f"/tokens/{own}/revoke", headers=customer.headers).status_code == 200
    assert api.client.get("/account", headers=customer.headers).status_code == 401


def test_sign_up_is_off_unless_the_operator_enables_it(api: ApiHarness) -> None:
    refused = api.client.post("/signup", json={"name": "A", "email": "a@example.com"})
    assert refused.status_code == 404
    assert "not enabled" in refused.json()["error"]["message"]


def test_sign_up_grants_the_free_credits_and_a_first_token(make_api: ApiFactory) -> None:
    api = make_api(signup_enabled=True, signup_free_credits="0.25", signups_per_ip_per_day=2)
    made = api.client.post("/signup", json={"name": "New", "email": "New@Example.com"})
    assert made.status_code == 201, made.text
    assert made.headers["cache-control"] == "no-store"
    body = made.json()
    assert Decimal(str(body["balance"])) == Decimal("0.25")
    headers = {"X-Api-Key": body["token"]}
    account = api.client.get("/account", headers=headers).json()
    assert (account["email"], account["role"]) == ("new@example.com", "customer")
    assert account["token_label"] == "first token"
    assert api.client.get("/usage?include=balance", headers=headers).json()["balance"][
        "credits"
    ] == pytest.approx(0.25)
    second = api.client.post("/signup", json={"name": "Second", "email": "second@example.com"})
    assert second.status_code == 201
    limited = api.client.post("/signup", json={"name": "Third", "email": "third@example.com"})
    assert limited.status_code == 429  # two sign-ups from this IP today
    assert int(limited.headers["retry-after"]) > 0


def test_sign_up_answers_alike_whether_or_not_the_address_has_an_account(
    make_api: ApiFactory,
) -> None:
    """Nothing tells a stranger who has an account: an address already used, by a sign-up or
    by a customer the operator made, signs up exactly as a new one does. The address is an
    unverified contact then, never the account's identity: the operator's look-up by e-mail
    still finds its own customer."""
    api = make_api(signup_enabled=True, signup_free_credits="0.25", signups_per_ip_per_day=10)
    administered = api.customer("Known")
    answers = [
        api.client.post("/signup", json={"name": "Fresh", "email": "fresh@example.com"}),
        api.client.post("/signup", json={"name": "Again", "email": "fresh@example.com"}),
        api.client.post("/signup", json={"name": "Known", "email": administered.email}),
    ]
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert [sorted(a.json()) for a in answers] == [["balance", "customer_id", "token"]] * 3
    assert [a.json()["balance"] for a in answers] == [0.25] * 3
    ids = {a.json()["customer_id"] for a in answers}
    assert len(ids) == 3
    assert administered.id not in ids
    for answer, email in zip(
        answers, ["fresh@example.com"] * 2 + [administered.email], strict=True
    ):
        mine = api.client.get("/account", headers={"X-Api-Key": answer.json()["token"]})
        assert mine.json()["email"] == email
    found = admin.find_customer(api.engine, administered.email)
    assert found.id == administered.id


def test_control_characters_in_sign_up_and_token_labels_are_422_naming_the_field(
    make_api: ApiFactory,
) -> None:
    """PostgreSQL text cannot hold NUL (SQLite stores it): a sign-up named "a\0" was a 500 there."""
    api = make_api(signup_enabled=True)
    customer = api.customer()
    for path, body, headers, field in [
        ("/signup", {"name": "a\u0000", "email": "n@example.com"}, {}, "name"),
        ("/signup", {"name": "A", "email": "n\u0000@example.com"}, {}, "email"),
        ("/tokens", {"label": "a\u0000"}, customer.headers, "label"),
        ("/tokens", {"label": "line\nbreak"}, customer.headers, "label"),
    ]:
        response = api.client.post(path, json=body, headers=headers)
        assert response.status_code == 422, (path, body, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input"
        assert error["details"] == [
            {"field": field, "message": "must not contain control characters"}
        ]


def test_sign_ups_from_one_ipv6_64_share_its_limit(make_api: ApiFactory) -> None:
    """Each sign-up carries free credits: a host taking a fresh address of its /64 for each one
    would otherwise sign up without end."""
    api = make_api(signup_enabled=True, signup_free_credits="0.25", signups_per_ip_per_day=2)

    def sign_up(address: str, n: int) -> int:
        client = TestClient(api.client.app, client=(address, 5000))
        body = {"name": "New", "email": f"user{n}@example.com"}
        return client.post("/signup", json=body).status_code

    codes = [sign_up(f"2001:db8:7:7:{n:x}::1", n) for n in range(1, 4)]
    assert codes == [201, 201, 429]
    assert sign_up("::ffff:192.0.2.7", 4) == 201
    assert sign_up("192.0.2.7", 5) == 201
    assert sign_up("::ffff:192.0.2.7", 6) == 429  # the same IPv4 address, written as IPv6


def test_only_a_provider_lists_nodes(api: ApiHarness) -> None:
    """The listing itself, with nodes of each kind: test_provider_nodes.py."""
    provider = api.provider("lister")
    assert api.client.get("/provider/nodes", headers=provider.headers).json() == []
    customer = api.customer()
    refused = api.client.get("/provider/nodes", headers=customer.headers)
    assert (refused.status_code, refused.json()["error"]["message"]) == (
        403,
        "provider not resolved",
    )


def test_the_dashboard_is_served_with_a_strict_policy_and_no_third_party(api: ApiHarness) -> None:
    page = api.client.get("/dashboard")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("/dashboard/app.js", "/dashboard/app.css"):
        assert api.client.get(asset).status_code == 200
    # Everything the page loads is its own: no address of another host in it.
    for text in (page.text, api.client.get("/dashboard/app.js").text):
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text
    settings = api.client.get("/dashboard/settings.json").json()
    assert settings == {
        "rpc_url": "http://127.0.0.1:8545",
        "ws_url": "ws://127.0.0.1:8545",
        "signup_enabled": False,
    }


def test_the_websocket_address_is_the_public_rpc_address_with_a_websocket_scheme(
    make_api: ApiFactory,
) -> None:
    api = make_api(public_rpc_url="https://rpc.example.com/")
    settings = api.client.get("/dashboard/settings.json").json()
    assert (settings["rpc_url"], settings["ws_url"]) == (
        "https://rpc.example.com",
        "wss://rpc.example.com",
    )


def test_the_root_leads_to_the_dashboard_and_the_icon_is_served(api: ApiHarness) -> None:
    root = api.client.get("/", follow_redirects=False)
    assert (root.status_code, root.headers["location"]) == (307, "/dashboard")
    for path in ("/favicon.ico", "/dashboard/favicon.ico"):
        icon = api.client.get(path)
        assert (icon.status_code, icon.headers["content-type"]) == (200, "image/x-icon")
        assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file's header


def test_the_account_names_the_token_in_use_by_its_label(api: ApiHarness) -> None:
    provider = api.provider("labelled")
    body = api.client.get("/account", headers=provider.headers).json()
    assert (body["token_label"], body["role"]) == ("main", "customer")


def test_a_browser_of_another_origin_gets_no_grant_unless_the_operator_named_it(
    make_api: ApiFactory,
) -> None:
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-api-key,content-type",
    }
    api = make_api()
    refused = api.client.options("/api-keys", headers=preflight)
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    named = make_api(api_cors_origins=["https://app.example.com"])
    granted = named.client.options(
        "/api-keys", headers=preflight | {"Origin": "https://app.example.com"}
    )
    assert granted.status_code == 200
    assert granted.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "x-api-key" in granted.headers["access-control-allow-headers"].lower()
    assert named.client.options("/api-keys", headers=preflight).status_code == 400
