"""Management tokens: who may call what (spec section 5; statuses of section 7)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.domain.enums import Role
from tests.api.conftest import ApiHarness


def _error(response: object) -> dict[str, str]:
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    error: dict[str, str] = body["error"]
    assert error["code"]
    assert error["message"]
    return error


def test_a_missing_token_is_401_with_the_header_named(api: ApiHarness) -> None:
    response = api.client.get("/api-keys")
    assert response.status_code == 401
    error = _error(response)
    assert error["code"] == "unauthenticated"
    assert "X-Api-Key" in error["message"]


def test_an_unknown_token_is_401(api: ApiHarness) -> None:
    fake = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    for token in (fake, "crm_short", "hello", "x" * 5000):
        response = api.client.get("/usage", headers={"X-Api-Key": token})
        assert response.status_code == 401, token
        assert _error(response)["message"] == "invalid or revoked management token"


def test_an_rpc_api_key_is_not_a_management_token(api: ApiHarness) -> None:
    customer = api.customer()
    key = api.create_key(customer)
    response = api.client.get("/api-keys", headers={"X-Api-Key": key["api_key"]})
    assert response.status_code == 401
    assert "RPC API key" in _error(response)["message"]


def test_a_revoked_token_is_401_at_once(api: ApiHarness) -> None:
    customer = api.customer()
    assert api.client.get("/api-keys", headers=customer.headers).status_code == 200
    tokens = api.client.get(f"/admin/customers/{customer.id}/tokens", headers=api.admin).json()
    revoked = api.client.post(f"/admin/tokens/{tokens[0]['id']}/revoke", headers=api.admin)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert api.client.get("/api-keys", headers=customer.headers).status_code == 401
    again = api.client.post(f"/admin/tokens/{tokens[0]['id']}/revoke", headers=api.admin)
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]


def test_customer_and_agent_tokens_cannot_reach_admin_routes(api: ApiHarness) -> None:
    for role in (Role.CUSTOMER, Role.AGENT):
        caller = api.customer(role=role)
        response = api.client.get("/admin/customers", headers=caller.headers)
        assert response.status_code == 403
        assert _error(response)["code"] == "forbidden"


def test_an_administrator_reaches_admin_routes(api: ApiHarness) -> None:
    response = api.client.get("/admin/customers", headers=api.admin)
    assert response.status_code == 200
    assert any(c["name"] == "Operator" for c in response.json())


def test_token_secrets_are_shown_once_and_listed_by_hint(api: ApiHarness) -> None:
    customer = api.customer()
    listed = api.client.get(f"/admin/customers/{customer.id}/tokens", headers=api.admin).json()
    assert len(listed) == 1
    assert "token" not in listed[0]
    assert listed[0]["token_hint"] == f"crm_...{customer.token[-4:]}"
    assert listed[0]["role"] == "customer"


def test_a_duplicate_token_label_is_409(api: ApiHarness) -> None:
    customer = api.customer()
    again = api.client.post(
        f"/admin/customers/{customer.id}/tokens", json={"label": "main"}, headers=api.admin
    )
    assert again.status_code == 409


def test_tokens_from_the_command_line(api: ApiHarness) -> None:
    customer = api.customer("Cli User")
    env = {"CHAINROUTER_DATABASE_URL": api.settings.database_url, "PATH": ""}
    command = [sys.executable, "-m", "chainrouter.cli", "tokens"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    created = run("create", "--customer", customer.email, "--label", "cli", "--role", "agent")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.split("shown this once: ")[1].strip()
    assert api.client.get("/api-keys", headers={"X-Api-Key": secret}).status_code == 200
    listed = run("list", "--customer", str(customer.id))
    assert "agent\tactive" in listed.stdout
    token_id = next(line.split("\t")[0] for line in listed.stdout.splitlines() if "cli" in line)
    assert run("revoke", token_id).returncode == 0
    assert api.client.get("/api-keys", headers={"X-Api-Key": secret}).status_code == 401
    missing = run("create", "--customer", "nobody@example.com", "--label", "x")
    assert missing.returncode == 1
    assert "no customer with e-mail nobody@example.com" in missing.stderr


def test_a_body_over_the_limit_is_413_whoever_sends_it(api: ApiHarness) -> None:
    """CHAINROUTER_API_MAX_BODY_BYTES (1 MiB by default) bounds every body (docs/security.md)."""
    customer = api.customer()
    big = b'{"allowed_domains": ["' + b"a" * (1 << 20) + b'"], "routing_strategy": "economy"}'
    for headers in (customer.headers, {}):
        response = api.client.post("/api-keys", content=big, headers=headers)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        assert response.headers["connection"] == "close"
    public = api.client.post("/chains/requests", content=big)
    assert public.status_code == 413


def test_a_streamed_body_over_the_limit_is_413_too(api: ApiHarness) -> None:
    customer = api.customer()

    def chunks() -> Iterator[bytes]:
        yield b'{"allowed_domains": ["'
        for _ in range(20):
            yield b"a" * 65536
        yield b'"], "routing_strategy": "economy"}'

    response = api.client.post("/api-keys", content=chunks(), headers=customer.headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_a_route_that_needs_a_token_refuses_a_body_without_one_as_401(api: ApiHarness) -> None:
    body = b'{"allowed_domains": ["*"], "routing_strategy": "economy"}'
    for headers in ({}, {"X-Api-Key": "crm_" + "x" * 40}):
        response = api.client.post("/api-keys", content=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
