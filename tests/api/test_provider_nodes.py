"""Provider nodes: registration with mandatory screening (real anvil nodes over HTTP and
WebSocket, hostile servers, SSRF tricks), ownership rules (404 / 409), status reads and changes,
and that routers stop and resume sending traffic accordingly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chainrouter.domain.chains import Chain
from chainrouter.domain.routing import HealthReport
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.node_health import write_node_health
from chainrouter.testing.tls_front import TlsFront
from tests.anvil import AnvilNodes
from tests.api.conftest import (
    MINING_CHAIN,
    ApiFactory,
    ApiHarness,
    MiningNode,
    ProviderAccount,
)
from tests.tls_nodes import Tls


def _catalog(api: ApiHarness, *chain_ids: int) -> None:
    with api.engine.begin() as connection:
        upsert_chains(
            connection, [Chain(c, f"Chain {c}", f"c{c}", "Ether", "ETH", 18) for c in chain_ids]
        )


def _put(
    api: ApiHarness, who: ProviderAccount, url: str, plan: int | None = None, **extra: Any
) -> Any:
    body = {"plan_id": plan if plan is not None else who.plan_ids[0], "url": url, **extra}
    return api.client.put("/provider/nodes", json=body, headers=who.headers)


@pytest.fixture
def fronts(anvil: AnvilNodes) -> Iterator[dict[str, TlsFront]]:
    """Counting relays in front of a1 and a2: where the router's traffic goes."""
    made = {name: TlsFront(anvil.urls[name], None) for name in ("a1", "a2")}
    for front in made.values():
        front.__enter__()
    yield made
    for front in made.values():
        front.__exit__(None, None, None)


def test_a_screened_node_is_registered_healthy_and_updated_by_url(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    created = _put(api, mine, anvil.urls["a1"], rate_limit=50, rate_limit_interval_sec=1)
    assert created.status_code == 200, created.text
    body = created.json()
    assert set(body) == {"message", "node", "status"}
    assert body["status"] == "healthy"
    assert "registered" in body["message"]
    node = body["node"]
    assert (node["chain_id"], node["url"], node["rate_limit"], node["source"]) == (
        "31337",
        anvil.urls["a1"] + "/",  # in its one spelling (domain/urls.py)
        50,
        "provider",
    )
    updated = _put(api, mine, anvil.urls["a1"], rate_limit=7).json()
    assert updated["node"]["id"] == node["id"]
    assert updated["node"]["rate_limit"] == 7
    assert "updated" in updated["message"]


def test_url_ownership_rules(api: ApiHarness, anvil: AnvilNodes) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine", plans=("basic", "pro"))
    theirs = api.provider("theirs")
    assert _put(api, mine, anvil.urls["a1"]).status_code == 200
    other_plan = _put(api, mine, anvil.urls["a1"], plan=mine.plan_ids[1])
    assert other_plan.status_code == 409
    stolen = _put(api, theirs, anvil.urls["a1"])
    assert stolen.status_code == 404
    assert anvil.urls["a1"] not in stolen.text
    not_my_plan = _put(api, mine, anvil.urls["a2"], plan=theirs.plan_ids[0])
    assert not_my_plan.status_code == 404
    plain = api.customer("No provider")
    refused = api.client.put(
        "/provider/nodes", json={"plan_id": 1, "url": anvil.urls["a2"]}, headers=plain.headers
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "provider not resolved"


def test_another_spelling_of_a_nodes_url_is_the_same_node(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    """Scheme and host case, the default port, the root's slash, dot segments, an IPv4 address
    written as IPv6 (security.md; domain/urls.py)."""
    _catalog(api, 31337)
    mine, theirs = api.provider("mine"), api.provider("theirs")
    url = anvil.urls["a1"]  # http://127.0.0.1:PORT
    created = _put(api, mine, url)
    assert created.json()["node"]["url"] == url + "/"
    spellings = [
        url + "/",
        url.upper(),
        url.replace("http", "HTTP") + "/",
        url + "/./",
        url + "/a/../",
        url + "/%2E/",
        url.replace("127.0.0.1", "[::ffff:127.0.0.1]"),
    ]
    for spelling in spellings:
        assert _put(api, theirs, spelling).status_code == 404
        again = _put(api, mine, spelling)
        assert again.json()["node"]["id"] == created.json()["node"]["id"]


def test_a_query_added_to_another_providers_node_does_not_make_it_ones_own(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    """Ownership goes by what a URL reaches (scheme, host, port, path), not its spelling: a
    query added is still the other provider's node; its owner may use queries of its own."""
    _catalog(api, 31337)
    mine, theirs = api.provider("mine"), api.provider("theirs")
    url = anvil.urls["a1"]
    assert _put(api, mine, url).status_code == 200
    for spelling in [url + "/?mine", url + "?apikey=1", url + "/?#x"]:
        stolen = _put(api, theirs, spelling)
        assert stolen.status_code == 404, spelling
    assert _put(api, mine, url + "/?second").status_code == 200  # the owner's own


def test_credentials_in_a_node_url_are_refused(api: ApiHarness, anvil: AnvilNodes) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    refused = _put(api, mine, anvil.urls["a1"].replace("http://", "http://user:pass@"))
    assert refused.status_code == 422
    assert "credentials" in refused.text


def test_a_node_of_an_unlisted_chain_or_behind_the_head_fails_screening(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    unlisted = _put(api, mine, anvil.urls["b1"])  # chain 31338 is not in the catalog
    assert unlisted.status_code == 400
    assert "31338" in unlisted.json()["error"]["message"]
    first = _put(api, mine, anvil.urls["a1"]).json()["node"]
    now = datetime.now(UTC)
    write_node_health(api.engine, [HealthReport(first["id"], True, 5_000_000, 3.0, 0, now)])
    behind = _put(api, mine, anvil.urls["a2"])
    assert behind.status_code == 400
    assert "blocks behind the chain head 5000000" in behind.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/garbage/n", "eth_chainId: the answer is not JSON"),
        ("/status/503/n", "eth_chainId: answered HTTP 503"),
        ("/status/301/n", "eth_chainId: answered HTTP 301; redirects are not followed"),
        ("/block/12/n", "eth_getBlockByNumber: the latest block could not be read"),
    ],
)
def test_screening_failures_are_400_saying_which_test_failed(
    api: ApiHarness, upstream: Any, path: str, reason: str
) -> None:
    mine = api.provider("mine")
    response = _put(api, mine, upstream.url(path))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "screening_failed"
    assert error["details"][0]["message"].startswith(reason)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8545",
        "http://localhost:8545",
        "http://[::1]:8545",
        "http://[::ffff:7f00:1]:8545",
        "http://2130706433:8545",
        "http://0177.0.0.1:8545",
        "http://192.168.1.1",
        "http://169.254.169.254/latest/meta-data",
        "https://[fd12:3456::1]",
    ],
)
def test_internal_targets_are_refused(make_api: ApiFactory, url: str) -> None:
    api = make_api(outbound_allow_private=False)
    mine = api.provider("mine")
    response = _put(api, mine, url)
    assert response.status_code == 400, response.text
    assert any(
        word in response.json()["error"]["message"]
        for word in ("loopback", "private", "link-local")
    )


def test_bad_node_bodies_are_422(api: ApiHarness) -> None:
    mine = api.provider("mine")
    for body in (
        {"url": "https://n.example.com"},
        {"plan_id": mine.plan_ids[0], "url": "ftp://n.example.com"},
        {"plan_id": mine.plan_ids[0], "url": "https://n.example.com", "rate_limit": -1},
        {"plan_id": mine.plan_ids[0], "url": "https://n.example.com", "source": "someone"},
        {"plan_id": mine.plan_ids[0], "url": "https://n.example.com", "vm": "svm"},
    ):
        response = api.client.put("/provider/nodes", json=body, headers=mine.headers)
        assert response.status_code == 422, body


def test_control_characters_in_node_urls_are_422_naming_the_field(api: ApiHarness) -> None:
    mine = api.provider("mine")
    plan = mine.plan_ids[0]
    for path, body in [
        ("/provider/nodes", {"plan_id": plan, "url": "https://n.example.com/?q=\u0000"}),
        ("/provider/nodes/ws", {"plan_id": plan, "chain_id": 1, "url": "wss://n.example.com/\n"}),
    ]:
        response = api.client.put(path, json=body, headers=mine.headers)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"]["details"] == [
            {"field": "url", "message": "must not contain control characters"}
        ]


def test_node_urls_must_fit_their_column_once_normalised(api: ApiHarness) -> None:
    """1,522 characters as written, 9,022 once percent-encoded: past the 2,048 the column holds."""
    mine = api.provider("mine")
    plan = mine.plan_ids[0]
    for path, body in [
        ("/provider/nodes", {"plan_id": plan, "url": "https://n.example.com/" + "ü" * 1500}),
        (
            "/provider/nodes/ws",
            {"plan_id": plan, "chain_id": 1, "url": "wss://n.example.com/" + "ü" * 1500},
        ),
    ]:
        response = api.client.put(path, json=body, headers=mine.headers)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"]["details"] == [
            {"field": "url", "message": "must be a URL of at most 2048 characters"}
        ]


def _status(api: ApiHarness, who: ProviderAccount, node_id: int, **params: Any) -> Any:
    return api.client.get(f"/provider/nodes/{node_id}/status", params=params, headers=who.headers)


def _set(api: ApiHarness, who: ProviderAccount, node_id: int, status: str, **extra: Any) -> Any:
    return api.client.post(
        "/provider/nodes/status",
        json={"node_id": node_id, "status": status, **extra},
        headers=who.headers,
    )


def test_status_reads_follow_health_reports_and_the_providers_setting(
    api: ApiHarness, anvil: AnvilNodes
) -> None:
    _catalog(api, 31337)
    mine, theirs = api.provider("mine"), api.provider("theirs")
    node_id = _put(api, mine, anvil.urls["a1"]).json()["node"]["id"]
    assert _status(api, mine, node_id).json() == {
        "node_id": node_id,
        "in_sync": True,
        "status": "pending check",
        "capabilities": {  # as screening found them: a fresh anvil has all it ever had
            "state_history": "archive",
            "blocks_from": 0,
            "trace": True,
            "debug": True,
            "logs_max_block_range": None,
            "max_batch_size": None,
        },
        # Nothing reported by a router yet: no head, lag, latency or report time.
        "head_block": None,
        "chain_head": None,
        "head_lag": None,
        "latency_ms": None,
        "consecutive_failures": None,
        "checked_at": None,
        # Never cordoned, nothing disputed (tests/api/test_cordons.py).
        "cordon_reason": None,
        "disputed_answers": 0,
        "disputed_credits": 0,
        # Never audited nor proven (tests/router/test_node_checks.py, tests/api/test_cordons.py).
        "checks": {
            "audits_passed": 0,
            "audits_failed": 0,
            "proofs_checked": 0,
            "proofs_failed": 0,
            "last_audit_passed_at": None,
            "last_audit_failed_at": None,
            "last_proof_checked_at": None,
            "last_proof_failed_at": None,
        },
    }
    now = datetime.now(UTC)
    for report, expected in (
        (HealthReport(node_id, True, 10, 2.0, 0, now), (True, "healthy")),
        (HealthReport(node_id, False, 1, 2.0, 0, now), (False, "out of sync")),
        (HealthReport(node_id, True, 10, 2.0, 3, now), (True, "failing")),
    ):
        write_node_health(api.engine, [report])
        body = _status(api, mine, node_id).json()
        assert (body["in_sync"], body["status"]) == expected
    listed = api.client.get("/provider/nodes", headers=mine.headers).json()
    assert [(n["kind"], n["node"]["id"], n["status"]["status"]) for n in listed] == [
        ("http", node_id, "failing")  # the status read's, from the last report
    ]
    disabled = _set(api, mine, node_id, "disabled by provider")
    assert disabled.status_code == 200
    assert disabled.json()["status"] == "disabled by provider"
    assert _status(api, mine, node_id).json()["status"] == "disabled by provider"
    assert _status(api, theirs, node_id).status_code == 404
    assert _set(api, theirs, node_id, "healthy").status_code == 404
    assert _set(api, mine, node_id, "paused").status_code == 422
    assert _set(api, mine, node_id, "provider-deleted").json()["status"] == "provider-deleted"
    assert _status(api, mine, node_id).status_code == 404  # hidden
    assert api.client.get("/provider/nodes", headers=mine.headers).json() == []
    assert _set(api, theirs, node_id, "healthy").status_code == 404  # and still not theirs
    # Spec section 3: `healthy` from any state; the deleted node comes back as it was, its
    # status again what the routers' checks last saw of it (the failing report above).
    restored = _set(api, mine, node_id, "healthy")
    assert (restored.status_code, restored.json()["status"]) == (200, "failing")
    assert _status(api, mine, node_id).json()["status"] == "failing"
    _set(api, mine, node_id, "provider-deleted")
    revived = _put(api, mine, anvil.urls["a1"])  # registering the URL again brings it back too
    assert revived.json()["node"]["id"] == node_id
    assert _status(api, mine, node_id).status_code == 200


@pytest.mark.anyio
async def test_routers_stop_and_resume_using_a_node_as_its_status_changes(
    api: ApiHarness, fronts: dict[str, TlsFront]
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    [plan] = mine.plan_ids
    assert (
        api.client.post(
            f"/provider/plans/{plan}/methods",
            json=[{"method": "eth_blockNumber", "cost": "0"}],
            headers=mine.headers,
        ).status_code
        == 200
    )
    ids = {name: _put(api, mine, front.url).json()["node"]["id"] for name, front in fronts.items()}
    customer = api.customer("Caller")
    key = api.create_key(customer)
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"}).encode()

    async with api.router() as router:

        async def traffic(calls: int = 6) -> dict[str, int]:
            before = {name: front.posts for name, front in fronts.items()}
            for _ in range(calls):
                reply = await router.call("31337", key["api_key"], call)
                assert reply.status == 200, reply.body
            return {name: fronts[name].posts - before[name] for name in fronts}

        await router.refresh()
        served = await traffic()
        assert sum(served.values()) == 6
        _set(api, mine, ids["a1"], "disabled by provider")
        assert await router.refresh()
        assert await traffic() == {"a1": 0, "a2": 6}
        _set(api, mine, ids["a1"], "healthy")
        _set(api, mine, ids["a2"], "provider-deleted")
        assert await router.refresh()
        assert await traffic() == {"a1": 6, "a2": 0}


def test_new_prices_reach_the_public_price_list(api: ApiHarness, anvil: AnvilNodes) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    _put(api, mine, anvil.urls["a1"])
    assert api.client.get("/prices").json() == []
    api.client.post(
        f"/provider/plans/{mine.plan_ids[0]}/methods",
        json=[{"method": "eth_call", "cost": "0.00000042"}],
        headers=mine.headers,
    )
    prices = api.client.get("/prices").json()
    assert {(p["method"], p["strategy"], p["cost"]) for p in prices} == {
        ("eth_call", "economy", 0.00000042),
        ("eth_call", "performance", 0.00000042),
    }


def test_a_websocket_node_must_deliver_new_heads(
    make_api: ApiFactory, mining_anvil: MiningNode, https_anvil: dict[str, str]
) -> None:
    api = make_api(outbound_timeout_s=4.0)
    _catalog(api, 31337, MINING_CHAIN)
    mine, theirs = api.provider("mine", plans=("a", "b")), api.provider("theirs")

    def put(
        who: ProviderAccount, url: str, chain: int = MINING_CHAIN, plan: int | None = None
    ) -> Any:
        body = {"plan_id": plan or who.plan_ids[0], "chain_id": str(chain), "url": url}
        return api.client.put("/provider/nodes/ws", json=body, headers=who.headers)

    created = put(mine, mining_anvil.wss)
    assert created.status_code == 200, created.text
    body = created.json()
    assert set(body) == {"message", "node_ws", "status"}
    assert body["status"] == "healthy"
    assert body["node_ws"]["chain_id"] == str(MINING_CHAIN)
    assert put(mine, mining_anvil.wss).json()["node_ws"]["id"] == body["node_ws"]["id"]
    assert put(mine, mining_anvil.wss, plan=mine.plan_ids[1]).status_code == 409
    assert put(theirs, mining_anvil.wss).status_code == 404
    wrong_chain = put(mine, mining_anvil.wss, chain=31337)
    assert wrong_chain.status_code == 400
    assert "serves chain 31339, not chain 31337" in wrong_chain.json()["error"]["message"]
    silent = put(mine, https_anvil["a1"].replace("https://", "wss://"), chain=31337)
    assert silent.status_code == 400  # a node that never mines sends no newHeads
    assert "newHeads notification: nothing within 4 s" in silent.json()["error"]["message"]
    assert put(mine, mining_anvil.wss.replace("wss://", "ws://")).status_code == 422
    assert [c["chain_id"] for c in api.client.get("/chains/ws").json()] == [str(MINING_CHAIN)]
    node_id = body["node_ws"]["id"]
    status = api.client.get(
        f"/provider/nodes/{node_id}/status", params={"kind": "ws"}, headers=mine.headers
    )
    assert status.json() == {
        "node_id": node_id,
        "in_sync": True,
        "status": "pending check",  # no router has checked it yet
        "capabilities": None,  # WebSocket nodes: not probed
        # Nothing reported by a router yet: no head, lag, latency or report time.
        "head_block": None,
        "chain_head": None,
        "head_lag": None,
        "latency_ms": None,
        "consecutive_failures": None,
        "checked_at": None,
        # Never cordoned, nothing disputed (tests/api/test_cordons.py).
        "cordon_reason": None,
        "disputed_answers": 0,
        "disputed_credits": 0,
        # Never audited nor proven (tests/router/test_node_checks.py, tests/api/test_cordons.py).
        "checks": {
            "audits_passed": 0,
            "audits_failed": 0,
            "proofs_checked": 0,
            "proofs_failed": 0,
            "last_audit_passed_at": None,
            "last_audit_failed_at": None,
            "last_proof_checked_at": None,
            "last_proof_failed_at": None,
        },
    }
    now = datetime.now(UTC)
    for report, expected in (
        (HealthReport(node_id, True, 10, 2.0, 0, now), (True, "healthy")),
        (HealthReport(node_id, False, 1, 2.0, 0, now), (False, "out of sync")),
        (HealthReport(node_id, True, 10, 2.0, 2, now), (True, "failing")),
        (HealthReport(node_id, True, 12, 2.0, 0, now), (True, "healthy")),
    ):
        write_node_health(api.engine, [report], ws=True)
        body = api.client.get(
            f"/provider/nodes/{node_id}/status", params={"kind": "ws"}, headers=mine.headers
        ).json()
        assert (body["in_sync"], body["status"]) == expected
    write_node_health(api.engine, [HealthReport(node_id, False, 1, 2.0, 0, now)])  # HTTP's id
    listed = api.client.get("/provider/nodes", headers=mine.headers).json()
    assert [(n["kind"], n["node"]["id"], n["status"]["status"]) for n in listed] == [
        ("ws", node_id, "healthy")  # the WebSocket node's own report, not an HTTP node's
    ]
    assert api.client.get("/provider/nodes", headers=theirs.headers).json() == []
    _set(api, mine, node_id, "disabled by provider", kind="ws")
    assert api.client.get("/chains/ws").json() == []


def test_websocket_targets_are_guarded_too(make_api: ApiFactory) -> None:
    api = make_api(outbound_allow_private=False)
    _catalog(api, 31337)
    mine = api.provider("mine")
    response = api.client.put(
        "/provider/nodes/ws",
        json={"plan_id": mine.plan_ids[0], "chain_id": "31337", "url": "wss://localhost:8546"},
        headers=mine.headers,
    )
    assert response.status_code == 400
    assert "loopback" in response.json()["error"]["message"]


def test_a_websocket_node_that_redirects_is_refused_and_its_target_never_dialled(
    make_api: ApiFactory, mining_anvil: MiningNode, tls: Tls
) -> None:
    """The handshake would follow a redirect to an address nobody checked (security.md): a
    redirect to a working node still fails screening, and that node is never reached."""
    api = make_api(outbound_timeout_s=4.0)
    _catalog(api, MINING_CHAIN)
    mine = api.provider("mine")
    with (
        TlsFront(mining_anvil.http, tls.server_context) as target,
        TlsFront("http://127.0.0.1:9", tls.server_context, redirect_to=target.ws_url) as front,
    ):
        response = api.client.put(
            "/provider/nodes/ws",
            json={"plan_id": mine.plan_ids[0], "chain_id": str(MINING_CHAIN), "url": front.ws_url},
            headers=mine.headers,
        )
        assert front.requests == 1
        assert target.requests == 0
    assert response.status_code == 400
    assert "redirects are not followed" in response.json()["error"]["message"]


def test_declared_capabilities_are_verified_stored_and_shown(
    api: ApiHarness, anvil: AnvilNodes, upstream: Any
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    declared = {"state_history": "archive", "trace": True, "logs_max_block_range": 2000}
    response = _put(api, mine, anvil.urls["a1"], capabilities=declared)
    assert response.status_code == 200, response.text
    node = response.json()["node"]
    assert node["capabilities"] == {
        "state_history": "archive",
        "blocks_from": None,
        "trace": True,
        "debug": None,
        "logs_max_block_range": 2000,
        "max_batch_size": None,
    }
    assert node["verified_capabilities"]["debug"] is True
    shown = _status(api, mine, node["id"]).json()["capabilities"]
    assert shown["logs_max_block_range"] == 2000  # declared; probes cannot find it
    assert shown["trace"] is True


def test_a_declaration_screening_finds_untrue_is_refused(
    api: ApiHarness, anvil: AnvilNodes, upstream: Any
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    port = anvil.urls["a1"].rsplit(":", 1)[1]
    response = _put(
        api, mine, upstream.url(f"/relay/{port}/no-trace/declared"), capabilities={"trace": True}
    )
    assert response.status_code == 400
    assert (
        "declared to serve trace_*, but trace_transaction is not available"
        in (response.json()["error"]["message"])
    )


@pytest.mark.parametrize(
    "capabilities",
    [
        {"state_history": "full"},
        {"state_history": -1},
        {"blocks_from": "0x10"},
        {"trace": "yes"},
        {"logs_max_block_range": 0},
        {"max_batch_size": 1.5},
        {"archive": True},
    ],
)
def test_a_malformed_declaration_is_422(
    api: ApiHarness, anvil: AnvilNodes, capabilities: dict[str, Any]
) -> None:
    _catalog(api, 31337)
    mine = api.provider("mine")
    response = _put(api, mine, anvil.urls["a1"], capabilities=capabilities)
    assert response.status_code == 422, capabilities
