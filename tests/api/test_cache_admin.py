"""The response cache as the management API shows and operates it (docs/cache.md): an
administrator's purge of one chain reaches every router, and the public list of cache prices."""

from __future__ import annotations

from decimal import Decimal

import pytest

from chainrouter.domain.cacheable import cache_key
from chainrouter.domain.chains import Chain
from chainrouter.stores.sql.chains import upsert_chains
from tests.api.conftest import ApiFactory, ApiHarness

PURGED, KEPT = 31337, 31338
PARAMS = ["0x1", False]


def _chains(api: ApiHarness) -> None:
    with api.engine.begin() as connection:
        upsert_chains(
            connection,
            [Chain(c, f"Chain {c}", f"c{c}", "Ether", "ETH", 18) for c in (PURGED, KEPT)],
        )


@pytest.mark.anyio
async def test_a_purge_has_every_router_drop_the_chains_answers_and_no_other(
    api: ApiHarness,
) -> None:
    _chains(api)
    async with api.router() as router:
        cache = router.runtime.service.deps.cache
        assert cache is not None
        for chain in (PURGED, KEPT):
            key = cache_key(chain, 0, "eth_getBlockByNumber", PARAMS)
            assert key is not None
            cache.keep(key, b'{"number":"0x1"}')
        purged = api.client.post(f"/admin/chains/{PURGED}/cache/purge", headers=api.admin)
        assert purged.status_code == 200
        assert purged.json() == {"chain_id": str(PURGED), "cache_generation": 1}
        assert await router.refresh()
        snapshot = router.runtime.service.snapshot
        assert snapshot.cache_generations == {PURGED: 1}
        assert list(cache.memory.bytes_by) == [(KEPT, "eth_getBlockByNumber")]
        # Answers kept after the purge go under the new generation: a new key, read again.
        fresh = cache_key(PURGED, 1, "eth_getBlockByNumber", PARAMS)
        assert fresh != cache_key(PURGED, 0, "eth_getBlockByNumber", PARAMS)
        again = api.client.post(f"/admin/chains/{PURGED}/cache/purge", headers=api.admin)
        assert again.json()["cache_generation"] == 2


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/admin/chains/999/cache/purge", 404),  # no such chain
        ("/admin/chains/0/cache/purge", 422),
        ("/admin/chains/99999999999999999999/cache/purge", 422),
    ],
)
def test_a_purge_of_no_chain_is_refused(api: ApiHarness, path: str, status: int) -> None:
    assert api.client.post(path, headers=api.admin).status_code == status


def test_only_an_administrator_may_purge(api: ApiHarness) -> None:
    _chains(api)
    customer = api.customer()
    url = f"/admin/chains/{PURGED}/cache/purge"
    assert api.client.post(url).status_code == 401
    assert api.client.post(url, headers=customer.headers).status_code == 403


def test_the_cache_prices_are_listed_exactly(make_api: ApiFactory) -> None:
    api = make_api(cache_prices={"*": "0.0000001", "1:eth_call": "0.000000001"})
    listed = api.client.get("/prices/cache").json()
    assert [(row["chain_id"], row["method"], Decimal(str(row["cost"]))) for row in listed] == [
        ("*", "*", Decimal("0.0000001")),
        ("1", "eth_call", Decimal("0.000000001")),
    ]
    assert make_api().client.get("/prices/cache").json() == []


def test_the_websocket_holding_price_is_listed_exactly(make_api: ApiFactory) -> None:
    """Customers see what holding a subscription costs before they hold one (websocket.md)."""
    api = make_api(ws_subscription_holding_credits_per_hour="0.000000007")
    listed = api.client.get("/prices/ws/holding").json()
    assert Decimal(str(listed["cost_per_hour"])) == Decimal("0.000000007")
    assert listed["step_s"] == 60
    assert Decimal(str(make_api().client.get("/prices/ws/holding").json()["cost_per_hour"])) == 0
