"""Management API fixtures: the real application on a real database (SQLite and PostgreSQL),
driven through HTTP with Starlette's test client, plus HTTPS fronts for screening tests.

`api` gives an `ApiHarness`: the client, the engine, an administrator token, and helpers that
create customers through the API itself.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from chainrouter.api.app import build_api_app
from chainrouter.domain.enums import Role
from chainrouter.management import admin
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.metering import CreditView
from chainrouter.router.pipeline import Reply
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.settings import Settings
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.tls_front import TlsFront
from tests.anvil import AnvilNodes
from tests.tls_nodes import MINING_CHAIN, MiningNode, Tls

__all__ = ["MINING_CHAIN", "MiningNode"]


@pytest.fixture(scope="session")
def https_anvil(anvil: AnvilNodes, tls: Tls) -> Iterator[dict[str, str]]:
    """https://localhost:PORT fronts for the anvil nodes, by the same names (a1, a2, b1)."""
    fronts = {name: TlsFront(url, tls.server_context) for name, url in anvil.urls.items()}
    for front in fronts.values():
        front.__enter__()
    yield {name: front.url for name, front in fronts.items()}
    for front in fronts.values():
        front.__exit__(None, None, None)


@pytest.fixture(scope="session")
def https_faulty(upstream_server: FaultyUpstream, tls: Tls) -> Iterator[str]:
    """An https:// front for the fault-injecting upstream: append its paths (/garbage, ...)."""
    with TlsFront(upstream_server.url(""), tls.server_context) as front:
        yield front.url


@dataclass
class ApiHarness:
    client: TestClient
    engine: Engine
    settings: Settings
    admin_token: str
    _emails: list[str] = field(default_factory=list)

    @property
    def admin(self) -> dict[str, str]:
        return {"X-Api-Key": self.admin_token}

    def customer(self, name: str = "Acme", role: Role = Role.CUSTOMER) -> Customer:
        """A new customer, created through the admin API, and a management token of theirs."""
        email = f"{name.lower().replace(' ', '.')}.{len(self._emails)}@example.com"
        self._emails.append(email)
        made = self.client.post(
            "/admin/customers", json={"name": name, "email": email}, headers=self.admin
        )
        assert made.status_code == 201, made.text
        customer_id = made.json()["id"]
        issued = self.client.post(
            f"/admin/customers/{customer_id}/tokens",
            json={"label": "main", "role": role.value},
            headers=self.admin,
        )
        assert issued.status_code == 201, issued.text
        return Customer(customer_id, issued.json()["token"], email)

    def provider(self, slug: str, plans: tuple[str, ...] = ("basic",)) -> ProviderAccount:
        """A provider with plans, and a customer linked to it holding a management token."""
        provider = self.client.post(
            "/admin/providers", json={"slug": slug, "name": slug.title()}, headers=self.admin
        ).json()
        plan_ids = [
            self.client.post(
                f"/admin/providers/{provider['id']}/plans", json={"name": name}, headers=self.admin
            ).json()["id"]
            for name in plans
        ]
        account = self.customer(f"{slug} ops")
        linked = self.client.put(
            f"/admin/customers/{account.id}/provider",
            json={"provider_id": provider["id"]},
            headers=self.admin,
        )
        assert linked.status_code == 200, linked.text
        return ProviderAccount(account.id, account.token, account.email, provider["id"], plan_ids)

    @contextlib.asynccontextmanager
    async def router(self) -> AsyncIterator[RouterBeside]:
        """A router on this API's database, as `chainrouter serve --role rpc` builds one (on the
        Python executor), to see what the API's changes do to it."""
        # No hedging: whether a hedge starts depends on how fast a loopback answer comes back
        # on a loaded machine, and the tests count the calls each node gets.
        settings = Settings(
            database_url=self.settings.database_url,
            outbound_ca_file=self.settings.outbound_ca_file,
            hedge_max=0,
        )
        runtime = build_runtime(settings, self.engine)
        executor = PythonExecutor(
            runtime.limiter,
            max_response_bytes=settings.max_response_bytes,
            connect_timeout_s=settings.upstream_connect_timeout_s,
            ca_file=settings.outbound_ca_file,
        )
        try:
            yield RouterBeside(runtime, executor)
        finally:
            await runtime.stop()
            await executor.close()

    def create_key(self, customer: Customer, **fields: Any) -> dict[str, Any]:
        body = {"allowed_domains": ["*"], "routing_strategy": "economy", **fields}
        made = self.client.post("/api-keys", json=body, headers=customer.headers)
        assert made.status_code == 201, made.text
        result: dict[str, Any] = made.json()
        return result


@dataclass(frozen=True)
class RouterBeside:
    runtime: RouterRuntime
    executor: PythonExecutor

    @property
    def credits(self) -> CreditView:
        return self.runtime.service.credits

    async def refresh(self) -> bool:
        """Load the configuration now if it changed (the sync does it every second)."""
        return await self.runtime.sync.refresh()

    async def call(self, chain: str, key: str, body: bytes, *, origin: str | None = None) -> Reply:
        program = self.runtime.service.handle_keyed(chain, key, body, origin=origin)
        return await self.executor.run(program)


@dataclass(frozen=True)
class Customer:
    id: int
    token: str
    email: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Api-Key": self.token}


@dataclass(frozen=True)
class ProviderAccount(Customer):
    provider_id: int
    plan_ids: list[int]


def make_harness(engine: Engine, **settings: Any) -> ApiHarness:
    settings.setdefault("database_url", str(engine.url))
    configured = Settings(**settings)
    operator = admin.create_customer(
        engine, name="Operator", email=f"ops-{uuid.uuid4().hex[:8]}@chainrouter.test"
    )
    token = admin.issue_token(engine, operator.id, label="root", role=Role.ADMINISTRATOR)
    client = TestClient(build_api_app(engine, configured), raise_server_exceptions=False)
    return ApiHarness(client, engine, configured, token.secret)


ApiFactory = Callable[..., ApiHarness]


@pytest.fixture
def make_api(engine: Engine, tls: Tls) -> Iterator[ApiFactory]:
    """An API on each backend with the given settings (screening may dial loopback)."""
    made: list[ApiHarness] = []

    def make(**settings: Any) -> ApiHarness:
        settings.setdefault("outbound_allow_private", True)
        settings.setdefault("outbound_ca_file", tls.ca_file)
        settings.setdefault("outbound_timeout_s", 3.0)
        harness = make_harness(engine, **settings)
        harness.client.__enter__()
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.client.__exit__(None, None, None)


@pytest.fixture
def api(make_api: ApiFactory) -> ApiHarness:
    return make_api()
