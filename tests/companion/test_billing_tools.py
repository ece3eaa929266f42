"""get_deposit_address, a customer tool: the address the management API shows the token's
customer for a chain, with the assets accepted there; the API's refusal passed through for a
chain without deposits."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import CHAIN_A, CHAIN_B
from tests.companion.conftest import Service, call_ok, companion, companion_env, error_text
from tests.domain.test_deposit_address import wallet_address

pytestmark = pytest.mark.anyio


async def test_the_tool_gives_the_customers_own_deposit_address(service: Service) -> None:
    engine = create_database_engine(service.database_url)
    with engine.connect() as connection:
        customer_id = connection.execute(
            select(t.customers.c.id).where(t.customers.c.email == "dev@companion.test")
        ).scalar_one()
    engine.dispose()
    env = companion_env(service, SERVICE_MGMT_TOKEN=service.customer_token)
    async with companion(env) as session:
        found = await call_ok(session, "get_deposit_address", {"chainId": CHAIN_A})
        assert found["address"] == wallet_address(customer_id)
        assert [(a["asset"], a["credits_per_unit"]) for a in found["assets"]] == [
            ("native", "2000")
        ]
        refused = await session.call_tool("get_deposit_address", {"chainId": CHAIN_B})
        assert f"no deposits are accepted on chain {CHAIN_B}" in error_text(refused)
