"""Public routes: health, supported chains, the price lists (and that billing agrees with them),
and the per-IP limit of the price lists."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select

from chainrouter.api.app import build_api_app
from chainrouter.domain.routing import HealthReport
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.node_health import write_node_health
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.api.conftest import ApiFactory, ApiHarness, Customer
from tests.redis_servers import SilentRedis

# A database of its own: the test empties it, while other tests may use database 0 at once.
REDIS_URL = "redis://127.0.0.1:6379/9"


def _chain(chain_id: int) -> dict[str, Any]:
    return {
        "chain_id": chain_id,
        "name": f"Chain {chain_id}",
        "short_name": f"c{chain_id}",
        "native_currency": {"name": "Ether", "symbol": "ETH"},
    }


def _world(api: ApiHarness, upstream: FaultyUpstream) -> dict[str, int]:
    """Two providers on chain 31337 (cheap vs dear), one on chain 10, a disabled node on
    chain 1, a WebSocket node of each on chain 10 (the dear one prices logs too); returns node
    ids by URL suffix."""
    config = {
        "chains": [_chain(1), _chain(10), _chain(31337)],
        "providers": [
            {
                "slug": "cheap",
                "name": "Cheap",
                "plans": [
                    {
                        "name": "c",
                        "methods": [
                            {"method": "eth_call", "cost": "0.0000002"},
                            {"method": "eth_call", "cost": "0.0000001", "chain_id": 10},
                            {"method": "newHeads", "node_target_type": "ws", "cost": "0.00000001"},
                        ],
                        "nodes": [
                            {"url": upstream.url("/ok/pub-cheap"), "chain_id": 31337},
                            {"url": upstream.url("/ok/pub-ten"), "chain_id": 10},
                            {
                                "url": upstream.url("/ok/pub-off"),
                                "chain_id": 1,
                                "status": "disabled by provider",
                            },
                        ],
                        "ws_nodes": [{"url": "wss://ws.example.com/ten", "chain_id": 10}],
                    }
                ],
            },
            {
                "slug": "dear",
                "name": "Dear",
                "plans": [
                    {
                        "name": "d",
                        "methods": [
                            {"method": "eth_call", "cost": "0.000001"},
                            {"method": "newHeads", "node_target_type": "ws", "cost": "0.00000005"},
                            {"method": "logs", "node_target_type": "ws", "cost": "0.00000007"},
                        ],
                        "nodes": [{"url": upstream.url("/ok/pub-dear"), "chain_id": 31337}],
                        "ws_nodes": [{"url": "wss://ws.example.com/ten-dear", "chain_id": 10}],
                    }
                ],
            },
        ],
        "customers": [
            {
                "email": "buyer@example.com",
                "name": "Buyer",
                "credits": [{"reference": "r", "amount": "1"}],
                "api_keys": [
                    {
                        "name": "fast",
                        "secret": "crk_" + "f" * 43,
                        "allowed_domains": ["*"],
                        "routing_strategy": "performance",
                    }
                ],
            }
        ],
    }
    apply_config(api.engine, validate_document(config))
    with api.engine.connect() as connection:
        rows = connection.execute(select(t.nodes.c.id, t.nodes.c.url)).all()
    return {url.rsplit("/", 1)[1]: node_id for node_id, url in rows}


def test_health_checks_the_database(api: ApiHarness) -> None:
    response = api.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}
    unreachable = create_database_engine("postgresql://postgres@127.0.0.1:1/nowhere")
    client = TestClient(build_api_app(unreachable, api.settings))
    down = client.get("/health")
    assert down.status_code == 503
    assert down.json() == {"status": "unavailable", "database": "unreachable"}


def test_every_api_response_carries_its_own_batch_id(api: ApiHarness) -> None:
    answers = [
        api.client.get("/health"),
        api.client.get("/chains"),
        api.client.get("/nowhere"),  # 404
        api.client.get("/api-keys"),  # 401
    ]
    ids = [answer.headers["x-batch-id"] for answer in answers]
    assert [answer.status_code for answer in answers] == [200, 200, 404, 401]
    assert len(set(ids)) == len(ids)


def test_lists_are_empty_arrays_when_nothing_is_served(api: ApiHarness) -> None:
    for path in ("/chains", "/chains/ws", "/prices", "/prices/ws"):
        response = api.client.get(path)
        assert response.status_code == 200
        assert response.json() == []


def test_chains_with_routable_nodes_sorted_by_chain_id(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    _world(api, upstream)
    chains = api.client.get("/chains").json()
    assert [c["chain_id"] for c in chains] == ["10", "31337"]  # chain 1's node is disabled
    assert chains[0]["native_currency"] == {"name": "Ether", "symbol": "ETH", "decimals": 18}
    assert [c["chain_id"] for c in api.client.get("/chains/ws").json()] == ["10"]


def test_prices_show_each_strategys_first_choice(api: ApiHarness, upstream: FaultyUpstream) -> None:
    nodes = _world(api, upstream)
    # The dear node answers faster: performance picks it, economy the cheap one.
    now = datetime.now(UTC)
    write_node_health(
        api.engine,
        [
            HealthReport(nodes["pub-cheap"], True, 100, 80.0, 0, now),
            HealthReport(nodes["pub-dear"], True, 100, 5.0, 0, now),
        ],
    )
    prices = {
        (p["chain_id"], p["method"], p["strategy"]): Decimal(str(p["cost"]))
        for p in api.client.get("/prices").json()
    }
    assert prices == {
        ("31337", "eth_call", "economy"): Decimal("0.0000002"),
        ("31337", "eth_call", "performance"): Decimal("0.000001"),
        ("10", "eth_call", "economy"): Decimal("0.0000001"),  # the chain's own row wins
        ("10", "eth_call", "performance"): Decimal("0.0000001"),
    }
    entry = api.client.get("/prices").json()[0]
    assert set(entry) == {
        "vm",
        "chain_id",
        "method",
        "strategy",
        "cost",
        "requires",
        "next_cost",
        "next_cost_from",
    }
    assert (entry["requires"], entry["next_cost"], entry["next_cost_from"]) == (None, None, None)
    assert entry["vm"] == "evm"
    # An out-of-sync node is not a first choice.
    later = now + timedelta(seconds=1)
    write_node_health(api.engine, [HealthReport(nodes["pub-dear"], False, 1, 5.0, 0, later)])
    after = {
        (p["chain_id"], p["strategy"]): Decimal(str(p["cost"]))
        for p in api.client.get("/prices").json()
    }
    assert after[("31337", "performance")] == Decimal("0.0000002")


def test_websocket_prices_show_each_strategys_first_choice(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    _world(api, upstream)
    with api.engine.connect() as connection:
        ws_ids = dict(connection.execute(select(t.ws_nodes.c.url, t.ws_nodes.c.id)).all())
    cheap, dear = ws_ids["wss://ws.example.com/ten"], ws_ids["wss://ws.example.com/ten-dear"]

    def listed() -> dict[tuple[str, str], Decimal]:
        answer = api.client.get("/prices/ws").json()
        assert all(p["chain_id"] == "10" for p in answer)
        return {(p["subscription_type"], p["strategy"]): Decimal(str(p["cost"])) for p in answer}

    # Nothing measured: both strategies take the cheapest newHeads; its plan has no logs price,
    # so logs cost the next node's (what a feed on the cheap node charges for them).
    assert listed() == {
        ("logs", "economy"): Decimal("0.00000007"),
        ("logs", "performance"): Decimal("0.00000007"),
        ("newHeads", "economy"): Decimal("0.00000001"),
        ("newHeads", "performance"): Decimal("0.00000001"),
    }
    now = datetime.now(UTC)
    reports = [
        HealthReport(cheap, True, 100, 80.0, 0, now),
        HealthReport(dear, True, 100, 5.0, 0, now),
    ]
    write_node_health(api.engine, reports, ws=True)  # the dear node answers faster
    assert listed()[("newHeads", "performance")] == Decimal("0.00000005")
    assert listed()[("newHeads", "economy")] == Decimal("0.00000001")
    later = now + timedelta(seconds=1)
    write_node_health(api.engine, [HealthReport(cheap, True, 100, 80.0, 3, later)], ws=True)
    assert listed()[("newHeads", "economy")] == Decimal("0.00000005")  # failing: not first


def test_a_scheduled_price_is_reckoned_with_every_rise_due_before_it(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    """The dear provider's rise comes due first and changes no first choice; the cheap one's
    later rise makes the dear route first, at the price it will have by then."""
    _world(api, upstream)
    for slug, cost in (("dear", "0.000002"), ("cheap", "0.000003")):
        ops, plan_id = _ops(api, slug)
        answer = api.client.post(
            f"/provider/plans/{plan_id}/methods",
            json=[{"method": "eth_call", "cost": cost}],
            headers=ops.headers,
        )
        assert answer.status_code == 200, answer.text
        if slug == "cheap":
            [row] = [r for r in answer.json() if r["method"] == "eth_call" and not r["chain_id"]]
    entry = next(
        p
        for p in api.client.get("/prices").json()
        if (p["chain_id"], p["strategy"]) == ("31337", "economy")
    )
    assert Decimal(str(entry["cost"])) == Decimal("0.0000002")
    assert Decimal(str(entry["next_cost"])) == Decimal("0.000002")  # not 0.000001
    assert entry["next_cost_from"] == row["next_cost_from"]


def test_websocket_prices_show_what_a_rise_with_notice_will_make_them_and_when(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    _world(api, upstream)
    ops, plan_id = _ops(api)
    raised = api.client.post(
        f"/provider/plans/{plan_id}/methods",
        json=[{"method": "newHeads", "node_target_type": "ws", "cost": "0.0000001"}],
        headers=ops.headers,
    )
    assert raised.status_code == 200, raised.text
    [row] = [r for r in raised.json() if r["method"] == "newHeads"]
    listed = {
        (p["subscription_type"], p["strategy"]): p for p in api.client.get("/prices/ws").json()
    }
    for strategy in ("economy", "performance"):
        heads = listed[("newHeads", strategy)]
        # Still the cheap node's price; once its rise applies, the dear node's is the first.
        assert Decimal(str(heads["cost"])) == Decimal("0.00000001")
        assert Decimal(str(heads["next_cost"])) == Decimal("0.00000005")
        assert heads["next_cost_from"] == row["next_cost_from"]
        logs = listed[("logs", strategy)]  # only the dear node prices them: unchanged
        assert (logs["next_cost"], logs["next_cost_from"]) == (None, None)


def test_prices_show_what_old_state_and_traces_cost_where_it_differs(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    def plan(slug: str, cost: str, capabilities: dict[str, Any]) -> dict[str, Any]:
        methods = ["eth_getBalance", "trace_block", "eth_chainId"]
        return {
            "slug": slug,
            "name": slug,
            "plans": [
                {
                    "name": slug,
                    "methods": [{"method": m, "cost": cost} for m in methods],
                    "nodes": [
                        {
                            "url": upstream.url(f"/ok/{slug}"),
                            "chain_id": 31337,
                            "capabilities": capabilities,
                        }
                    ],
                }
            ],
        }

    config = {
        "chains": [_chain(31337)],
        "providers": [
            plan("full", "0.1", {"state_history": 128, "trace": False}),
            plan("archive", "0.5", {"state_history": "archive", "trace": True}),
        ],
    }
    apply_config(api.engine, validate_document(config))
    rows = {
        (p["method"], p["requires"]): Decimal(str(p["cost"]))
        for p in api.client.get("/prices").json()
        if p["strategy"] == "economy"
    }
    assert rows == {
        ("eth_getBalance", None): Decimal("0.1"),
        ("eth_getBalance", "archive"): Decimal("0.5"),  # old state: only the archive node
        ("trace_block", None): Decimal("0.5"),  # the full node does not trace
        ("eth_chainId", None): Decimal("0.1"),  # reads no state: one price
    }


def _ops(api: ApiHarness, slug: str = "cheap") -> tuple[Customer, int]:
    """A management token of a provider of `_world` (cheap or dear), and its plan."""
    ops = api.customer(f"{slug} ops")
    with api.engine.connect() as connection:
        cheap = connection.execute(
            select(t.providers.c.id).where(t.providers.c.slug == slug)
        ).scalar_one()
        [plan_id] = connection.execute(
            select(t.plans.c.id).where(t.plans.c.provider_id == cheap)
        ).scalars()
    linked = api.client.put(
        f"/admin/customers/{ops.id}/provider", json={"provider_id": cheap}, headers=api.admin
    )
    assert linked.status_code == 200, linked.text
    return ops, plan_id


def test_prices_show_what_a_price_rise_with_notice_will_make_them_and_when(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    """A provider's dearer price waits for its notice: the list shows what each entry costs now
    and what it will cost once the rise applies, the first choice then being whichever route is
    cheapest at the new prices (design notes, "Bounds")."""
    _world(api, upstream)
    ops, plan_id = _ops(api)
    before = datetime.now(UTC)
    raised = api.client.post(
        f"/provider/plans/{plan_id}/methods",
        json=[{"method": "eth_call", "cost": "0.000003"}],
        headers=ops.headers,
    )
    assert raised.status_code == 200, raised.text
    [row] = [r for r in raised.json() if r["method"] == "eth_call" and r["chain_id"] is None]
    listed = {(p["chain_id"], p["strategy"]): p for p in api.client.get("/prices").json()}
    for strategy in ("economy", "performance"):
        entry = listed[("31337", strategy)]
        # The cheap route still charges its old price; once its rise applies, the dear
        # provider's route is the cheaper first choice.
        assert Decimal(str(entry["cost"])) == Decimal("0.0000002")
        assert Decimal(str(entry["next_cost"])) == Decimal("0.000001")
        assert entry["next_cost_from"] == row["next_cost_from"]
        applies = datetime.fromisoformat(entry["next_cost_from"].replace("Z", "+00:00"))
        assert 24 * 3600 - 5 <= (applies - before).total_seconds() <= 24 * 3600 + 60
        # Chain 10 has its own row, not raised: nothing scheduled.
        assert (
            listed[("10", strategy)]["next_cost"],
            listed[("10", strategy)]["next_cost_from"],
        ) == (
            None,
            None,
        )
    # A rise whose notice has run is the price now, and nothing is scheduled any more.
    with api.engine.begin() as connection:
        connection.execute(
            t.plan_methods.update()
            .where(t.plan_methods.c.next_cost_nano.is_not(None))
            .values(next_cost_from=datetime.now(UTC) - timedelta(seconds=1))
        )
        # The list is kept up to 5 s while the configuration is unchanged: not that long here.
        bump_config_version(connection)
    entry = next(
        p
        for p in api.client.get("/prices").json()
        if (p["chain_id"], p["strategy"]) == ("31337", "economy")
    )
    assert (Decimal(str(entry["cost"])), entry["next_cost"]) == (Decimal("0.000001"), None)


@pytest.mark.anyio
async def test_what_is_billed_is_what_the_list_shows(
    api: ApiHarness, upstream: FaultyUpstream
) -> None:
    _world(api, upstream)
    listed = {
        (p["chain_id"], p["strategy"]): Decimal(str(p["cost"]))
        for p in api.client.get("/prices").json()
        if p["method"] == "eth_call"
    }
    async with api.router() as router:
        with api.engine.connect() as connection:
            customer_id = connection.execute(
                select(t.customers.c.id).where(t.customers.c.email == "buyer@example.com")
            ).scalar_one()
        before = router.credits.available(customer_id)
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": []}).encode()
        for chain in ("31337", "10"):
            spent_before = router.credits.available(customer_id)
            reply = await router.call(chain, "crk_" + "f" * 43, call)
            assert reply.status == 200
            spent = spent_before - router.credits.available(customer_id)
            assert Decimal(spent).scaleb(-9) == listed[(chain, "performance")]
        assert before > router.credits.available(customer_id)


def test_price_lists_are_limited_per_ip_with_retry_after(make_api: ApiFactory) -> None:
    api = make_api(price_list_requests=3, price_list_interval_s=60)
    for path in ("/prices", "/prices/ws", "/prices"):
        assert api.client.get(path).status_code == 200
    limited = api.client.get("/prices/ws")
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    # The first of the three leaves the 60 s window in 60 to 66 s (its time slot, a tenth wide).
    assert 59 <= int(limited.headers["retry-after"]) <= 66
    assert api.client.get("/chains").status_code == 200  # the chain lists are not limited


def test_behind_a_trusted_proxy_each_client_ip_has_its_own_budget(make_api: ApiFactory) -> None:
    api = make_api(price_list_requests=2, trusted_proxies=["10.0.0.0/8"])
    proxied = TestClient(api.client.app, client=("10.1.2.3", 5000))

    def get(ip: str) -> int:
        return proxied.get("/prices", headers={"X-Forwarded-For": ip}).status_code

    assert [get("203.0.113.9") for _ in range(3)] == [200, 200, 429]
    assert get("203.0.113.10") == 200
    # An untrusted peer cannot pick its IP by header.
    direct = TestClient(api.client.app, client=("192.0.2.1", 5000))
    codes = [
        direct.get("/prices", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
        for i in range(3)
    ]
    assert codes == [200, 200, 429]


def test_with_redis_the_limit_is_shared_by_api_processes(make_api: ApiFactory) -> None:
    redis.Redis.from_url(REDIS_URL).flushdb()
    first = make_api(price_list_requests=2, redis_url=REDIS_URL)
    second = make_api(price_list_requests=2, redis_url=REDIS_URL)
    assert first.client.get("/prices").status_code == 200
    assert second.client.get("/prices").status_code == 200
    assert first.client.get("/prices").status_code == 429
    assert second.client.get("/prices").status_code == 429


@pytest.mark.timeout(60)
def test_with_redis_hung_the_price_lists_answer_limited_per_process(make_api: ApiFactory) -> None:
    """The API's limiter has the router's bounds: a Redis that never answers costs a request at
    most CHAINROUTER_REDIS_TIMEOUT_S, and the limit is then kept by this process."""
    silent = SilentRedis()
    try:
        api = make_api(price_list_requests=2, redis_url=silent.url)
        started = time.monotonic()
        assert [api.client.get("/prices").status_code for _ in range(3)] == [200, 200, 429]
        assert time.monotonic() - started < 5.0
    finally:
        silent.close()
