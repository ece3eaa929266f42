"""Public submissions of chains and nodes: field rules, screening through the outbound guard
(real anvil nodes behind HTTPS, hostile upstreams, SSRF tricks), per-IP daily limits and the
tokens that skip them, and review by administrators."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from chainrouter.domain.enums import Role
from chainrouter.management.errors import InvalidInputError
from chainrouter.management.submissions import _approve_node_request
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import read_config_version
from tests.api.conftest import ApiFactory, ApiHarness, Customer


def _chain_request(url: str | list[str], chain_id: Any = "31337", **extra: Any) -> dict[str, Any]:
    urls = url if isinstance(url, list) else [url]
    return {"name": "Anvil Test", "chain_id": chain_id, "rpc_urls": urls, **extra}


def _new_plan(api: ApiHarness, provider_slug: str) -> dict[str, Any]:
    """A "free" plan of a new provider, made by an administrator: where approved nodes go."""
    provider = api.client.post(
        "/admin/providers",
        json={"slug": provider_slug, "name": provider_slug.title()},
        headers=api.admin,
    ).json()
    plan: dict[str, Any] = api.client.post(
        f"/admin/providers/{provider['id']}/plans", json={"name": "free"}, headers=api.admin
    ).json()
    return plan


def _agent(api: ApiHarness) -> Customer:
    return api.customer("Agent", role=Role.AGENT)


def test_a_chain_whose_url_serves_it_is_stored_pending(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    response = api.client.post(
        "/chains/requests",
        json=_chain_request(
            https_anvil["a1"],
            chain_id="0x7a69",
            short_name="anvil",
            native_currency_name="Ether",
            native_currency_decimals=18,
            requestor_email="Dev@Example.com",
        ),
    )
    assert response.status_code == 201, response.text
    assert set(response.json()) == {"id"}
    [stored] = api.client.get("/admin/chain-requests", headers=api.admin).json()
    assert stored["id"] == response.json()["id"]
    assert stored["status"] == "pending"
    assert stored["chain_id"] == "31337"
    assert stored["requestor_email"] == "dev@example.com"
    [screening] = stored["screening"]
    assert screening["passed"] is True
    assert [c["check"] for c in screening["checks"]] == [
        "eth_chainId",
        "eth_blockNumber",
        "eth_getBlockByNumber",
    ]


def test_one_passing_url_among_several_is_enough(
    api: ApiHarness, https_anvil: dict[str, str], https_faulty: str
) -> None:
    urls = [https_faulty + "/garbage/x", https_anvil["b1"], https_anvil["a2"]]
    response = api.client.post("/chains/requests", json=_chain_request(urls))
    assert response.status_code == 201
    stored = api.client.get("/admin/chain-requests", headers=api.admin).json()[0]
    assert [s["passed"] for s in stored["screening"]] == [False, False, True]


def test_a_url_serving_another_chain_fails_screening_with_400(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    response = api.client.post("/chains/requests", json=_chain_request(https_anvil["a1"], "1"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "screening_failed"
    [detail] = error["details"]
    assert detail["url"] == https_anvil["a1"]
    assert detail["message"] == "eth_chainId: the node serves chain 31337, not chain 1"
    rejected = api.client.get(
        "/admin/chain-requests", params={"status": "rejected"}, headers=api.admin
    ).json()
    assert len(rejected) == 1


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/garbage/s", "eth_chainId: the answer is not JSON"),
        ("/status/500/s", "eth_chainId: answered HTTP 500"),
        ("/status/302/s", "eth_chainId: answered HTTP 302; redirects are not followed"),
        ("/wrong-id/s", "eth_chainId: the answer is not the JSON-RPC response to the call"),
        ("/rpc-error/s", "eth_chainId: the node answered an error"),
        ("/reset/s", "eth_chainId: "),
        ("/sleep/3000/s", "eth_chainId: did not answer within 1 s"),
        ("/ok/s", "eth_getBlockByNumber: the latest block could not be read"),
    ],
)
def test_each_way_a_node_can_fail_screening(
    make_api: ApiFactory, https_faulty: str, path: str, reason: str
) -> None:
    api = make_api(outbound_timeout_s=1.0)
    agent = _agent(api)
    response = api.client.post(
        "/nodes/requests",
        json={"name": "bad", "url": https_faulty + path},
        headers=agent.headers,
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"][0]["message"].startswith(reason)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",  # a name that resolves to loopback
        "[::1]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
        "[64:ff9b::7f00:1]",  # NAT64 spelling of 127.0.0.1
        "[2002:7f00:1::]",  # 6to4 spelling of 127.0.0.1
        "2130706433",  # decimal 127.0.0.1
        "0x7f000001",  # hex
        "017700000001",  # octal
        "127.1",  # short form
        "10.1.2.3",
        "192.168.0.10",
        "169.254.169.254",  # cloud metadata
        "[fe80::1]",
        "[fd00::1]",
        "0.0.0.0",  # noqa: S104 - the unspecified address as a target, not a bind
        "100.64.0.1",  # shared address space
    ],
)
def test_internal_targets_are_refused_however_they_are_spelled(
    make_api: ApiFactory, host: str
) -> None:
    api = make_api(outbound_allow_private=False)
    agent = _agent(api)
    response = api.client.post(
        "/nodes/requests",
        json={"name": "ssrf", "url": f"https://{host}:8545/"},
        headers=agent.headers,
    )
    assert response.status_code == 400, response.text
    message = response.json()["error"]["details"][0]["message"]
    assert message.startswith("url: ") or message.startswith("eth_chainId: ")
    assert any(
        word in message
        for word in ("loopback", "private", "link-local", "unspecified", "reserved", "not a public")
    ), message


def test_a_submission_sees_no_network_the_operator_trusts(
    make_api: ApiFactory, https_anvil: dict[str, str]
) -> None:
    """The trusted networks are the operator's own nodes: anyone's submission answered from
    them (HTTP 403 here, not reachable there) would map that network for the sender."""
    api = make_api(outbound_allow_private=False, outbound_trusted_networks=["127.0.0.0/8"])
    body = {"name": "inside", "url": https_anvil["b1"], "email": "ops@node.io"}
    refused = api.client.post("/nodes/requests", json=body)
    assert refused.status_code == 400, refused.text
    assert "loopback" in refused.json()["error"]["details"][0]["message"]
    provider = api.provider("own")  # the operator's providers do reach them
    put = {"plan_id": provider.plan_ids[0], "url": https_anvil["b1"]}
    dialled = api.client.put("/provider/nodes", json=put, headers=provider.headers).json()
    assert "serves chain 31338" in dialled["error"]["message"]  # it answered (an unlisted chain)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_chain_request("http://node.example.com"), "rpc_urls[0]"),
        (_chain_request([]), "rpc_urls"),
        (_chain_request([f"https://n{i}.example.com" for i in range(6)]), "rpc_urls"),
        (_chain_request("https://n.example.com", "abc"), "chain_id"),
        (_chain_request("https://n.example.com", "0"), "chain_id"),
        (
            _chain_request("https://n.example.com", native_currency_decimals=-1),
            "native_currency_decimals",
        ),
        (_chain_request("https://n.example.com", requestor_email="nope"), "requestor_email"),
        ({"chain_id": "1", "rpc_urls": ["https://n.example.com"]}, "name"),
        (_chain_request("https://n.example.com", color="blue"), "color"),
    ],
)
def test_chain_request_fields_are_validated(
    api: ApiHarness, body: dict[str, Any], field: str
) -> None:
    response = api.client.post("/chains/requests", json=body)
    assert response.status_code == 422
    assert field in [d["field"] for d in response.json()["error"]["details"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "n", "url": "http://node.example.com"}, "url"),
        ({"name": "n", "url": "https://node.example.com", "vm": "svm"}, "vm"),
        ({"url": "https://node.example.com"}, "name"),
        ({"name": "n", "url": "https://node.example.com", "email": "x@"}, "email"),
    ],
)
def test_node_request_fields_are_validated(
    api: ApiHarness, body: dict[str, Any], field: str
) -> None:
    response = api.client.post("/nodes/requests", json=body)
    assert response.status_code == 422
    assert field in [d["field"] for d in response.json()["error"]["details"]]


def test_control_characters_in_submissions_are_422_naming_the_field(api: ApiHarness) -> None:
    """PostgreSQL text cannot hold NUL (SQLite stores it): a chain request named "a\0" was a 500
    there. No field of a submission may hold control characters; notes may hold line breaks."""
    url = "https://n.example.com"
    chain_fields = {
        "name": "a\u0000",
        "short_name": "s\u0000",
        "native_currency_name": "E\u0000",
        "info_url": f"{url}/\u0000",
        "icon_url": f"{url}/\u001b",
        "rpc_urls": [f"{url}/\u0000"],
        "explorer_urls": [f"{url}/\t"],
        "requestor_email": "d\u0000@example.com",
        "requestor_name": "D\u0000",
    }
    for name, value in chain_fields.items():
        body = {**_chain_request(url), name: value}
        response = api.client.post("/chains/requests", json=body)
        assert response.status_code == 422, (name, response.text)
        field = name + ("[0]" if isinstance(value, list) else "")
        assert response.json()["error"]["details"] == [
            {"field": field, "message": "must not contain control characters"}
        ]
    node_fields = {
        "name": "a\u0000",
        "url": f"{url}/?q=\u0000",
        "email": "d\u0000@example.com",
        "privacy_policy_url": f"{url}/\u0000",
        "notes": "a\u0000",
    }
    for name, value in node_fields.items():
        body = {"name": "n", "url": url, name: value}
        response = api.client.post("/nodes/requests", json=body)
        assert response.status_code == 422, (name, response.text)
        [detail] = response.json()["error"]["details"]
        assert detail["field"] == name
        assert detail["message"].startswith("must not contain control characters")


def test_a_node_request_url_must_fit_its_column_once_normalised(api: ApiHarness) -> None:
    """1,522 characters as written, 9,022 once percent-encoded: past the 2,048 the column holds."""
    body = {"name": "n", "url": "https://n.example.com/" + "ü" * 1500}
    response = api.client.post("/nodes/requests", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"] == [
        {"field": "url", "message": "must be a URL of at most 2048 characters"}
    ]


def test_five_chain_requests_per_ip_per_day_failed_ones_included(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    good = _chain_request(https_anvil["a1"])
    bad = _chain_request(https_anvil["a1"], "1")
    codes = [api.client.post("/chains/requests", json=bad).status_code for _ in range(2)]
    codes += [api.client.post("/chains/requests", json=good).status_code for _ in range(4)]
    assert codes == [400, 400, 201, 201, 201, 429]
    limited = api.client.post("/chains/requests", json=good)
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 86_000 < int(limited.headers["retry-after"]) <= 86_400
    customer = api.customer("Plain")
    assert (
        api.client.post("/chains/requests", json=good, headers=customer.headers).status_code == 429
    )
    for role in (Role.AGENT, Role.ADMINISTRATOR):
        exempt = api.customer(f"Exempt {role.value}", role=role)
        response = api.client.post("/chains/requests", json=good, headers=exempt.headers)
        assert response.status_code == 201
    wrong = api.client.post("/chains/requests", json=good, headers={"X-Api-Key": "crm_nope"})
    assert wrong.status_code == 401


def test_a_url_whose_host_is_no_name_fails_screening_and_counts_against_the_limit(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    """An empty label (`a..b`) fails where the host is resolved: a screening failure like any
    (400), counted, not an error of the service that would leave the attempt uncounted and the
    other URLs dialled without end."""
    request = {**_chain_request(https_anvil["a1"]), "rpc_urls": ["https://a..b/"]}
    codes = [api.client.post("/chains/requests", json=request).status_code for _ in range(6)]
    assert codes == [400, 400, 400, 400, 400, 429]


def test_submissions_with_an_agent_token_leave_the_ips_own_limit_alone(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    """An agent behind the same address as other users does not spend their allowance."""
    body = {"name": "my node", "url": https_anvil["b1"], "email": "ops@node.io"}
    agent = api.customer("Agent", role=Role.AGENT)
    for _ in range(4):
        sent = api.client.post("/nodes/requests", json=body, headers=agent.headers)
        assert sent.status_code == 201
    codes = [api.client.post("/nodes/requests", json=body).status_code for _ in range(4)]
    assert codes == [201, 201, 201, 429]


def test_a_hosts_ipv6_addresses_share_one_limit_per_64(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    """A host is usually given a whole IPv6 /64: a fresh address per attempt is the same client."""
    body = {"name": "my node", "url": https_anvil["b1"], "email": "ops@node.io"}

    def post(address: str) -> int:
        client = TestClient(api.client.app, client=(address, 5000))
        return client.post("/nodes/requests", json=body).status_code

    codes = [post(f"2001:db8:1:2::{i:x}") for i in range(1, 5)]
    assert codes == [201, 201, 201, 429]
    assert post("2001:db8:1:3::1") == 201  # the next /64 is another client


def test_three_node_requests_per_ip_per_day(api: ApiHarness, https_anvil: dict[str, str]) -> None:
    body = {"name": "my node", "url": https_anvil["b1"], "email": "ops@node.io"}
    codes = [api.client.post("/nodes/requests", json=body).status_code for _ in range(4)]
    assert codes == [201, 201, 201, 429]
    [stored, *_] = api.client.get("/admin/node-requests", headers=api.admin).json()
    assert stored["chain_id"] == "31338"  # as the node reported it
    assert stored["status"] == "pending"


def test_node_requests_sent_at_once_cannot_pass_the_limit_together(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    body = {"name": "my node", "url": https_anvil["b1"], "email": "ops@node.io"}
    # One event loop for all requests, as in the served API, and six requests sent together:
    # their screenings overlap, and each would find the same count without the gate.
    with (
        TestClient(api.client.app, raise_server_exceptions=False) as client,
        ThreadPoolExecutor(6) as pool,
    ):
        responses = list(pool.map(lambda _: client.post("/nodes/requests", json=body), range(6)))
    assert sorted(r.status_code for r in responses) == [201, 201, 201, 429, 429, 429]
    stored = api.client.get("/admin/node-requests", headers=api.admin).json()
    assert len(stored) == 3
    app = api.client.app
    assert isinstance(app, FastAPI)
    assert app.state.context.submission_gate.ips_in_progress == 0  # nothing kept once done


def test_approving_requests_creates_the_chain_and_the_node(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    chain_request = api.client.post(
        "/chains/requests", json=_chain_request(https_anvil["a1"])
    ).json()["id"]
    node_request = api.client.post(
        "/nodes/requests", json={"name": "a2", "url": https_anvil["a2"]}
    ).json()["id"]
    plan = _new_plan(api, "community")
    too_soon = api.client.post(
        f"/admin/node-requests/{node_request}/approve",
        json={"plan_id": plan["id"]},
        headers=api.admin,
    )
    assert too_soon.status_code == 422  # its chain is not in the catalog yet
    with api.engine.connect() as connection:
        version_before = read_config_version(connection)
    approved = api.client.post(
        f"/admin/chain-requests/{chain_request}/approve",
        json={"native_currency_symbol": "ETH", "note": "ok"},
        headers=api.admin,
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "approved"
    again = api.client.post(
        f"/admin/chain-requests/{chain_request}/approve",
        json={"native_currency_symbol": "ETH"},
        headers=api.admin,
    )
    assert again.status_code == 409
    node = api.client.post(
        f"/admin/node-requests/{node_request}/approve",
        json={"plan_id": plan["id"]},
        headers=api.admin,
    )
    assert node.status_code == 200, node.text
    with api.engine.connect() as connection:
        chain = connection.execute(
            select(t.chains.c.name, t.chains.c.public_rpc_urls).where(t.chains.c.chain_id == 31337)
        ).one()
        stored_node = connection.execute(
            select(t.nodes.c.url, t.nodes.c.source, t.nodes.c.plan_id)
        ).one()
        assert read_config_version(connection) > version_before
    assert chain.name == "Anvil Test"
    assert chain.public_rpc_urls == [https_anvil["a1"]]
    assert tuple(stored_node) == (https_anvil["a2"] + "/", "node_request", plan["id"])


def test_a_node_is_screened_again_when_approved_and_refused_if_it_changed(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    chain = api.client.post("/chains/requests", json=_chain_request(https_anvil["b1"], "31338"))
    listed = api.client.post(
        f"/admin/chain-requests/{chain.json()['id']}/approve",
        json={"native_currency_symbol": "ETH"},
        headers=api.admin,
    )
    assert listed.status_code == 200, listed.text
    submitted = api.client.post("/nodes/requests", json={"name": "b1", "url": https_anvil["b1"]})
    request_id = submitted.json()["id"]
    plan = _new_plan(api, "later")

    def approve() -> Any:
        return api.client.post(
            f"/admin/node-requests/{request_id}/approve",
            json={"plan_id": plan["id"]},
            headers=api.admin,
        )

    def stored_as(url: str, chain_id: int) -> None:  # what the node was when it was submitted
        with api.engine.begin() as connection:
            connection.execute(
                t.node_requests.update()
                .where(t.node_requests.c.id == request_id)
                .values(url=url, chain_id=chain_id)
            )

    stored_as(https_anvil["b1"], 31337)  # it reported chain 31337 then; it serves 31338 now
    moved = approve()
    assert moved.status_code == 400, moved.text
    assert moved.json()["error"]["code"] == "screening_failed"
    assert "31338" in moved.json()["error"]["message"]
    stored_as("https://127.0.0.1:9/", 31338)  # gone: nothing listens there now
    gone = approve()
    assert gone.status_code == 400
    assert gone.json()["error"]["details"][0]["field"] == "url"
    with api.engine.connect() as connection:
        assert connection.execute(select(t.nodes.c.id)).first() is None
    [pending] = api.client.get("/admin/node-requests", headers=api.admin).json()
    assert pending["status"] == "pending"
    stored_as(https_anvil["b1"], 31338)
    assert approve().status_code == 200
    assert approve().status_code == 409


def test_a_stored_url_that_cannot_be_registered_is_refused_not_an_error(
    api: ApiHarness, https_anvil: dict[str, str]
) -> None:
    """Screening refuses such a URL before approval gets to it; a request stored before URLs
    were checked as now could still hold one, and its approval must say so, not fail."""
    chain = api.client.post("/chains/requests", json=_chain_request(https_anvil["a1"]))
    assert (
        api.client.post(
            f"/admin/chain-requests/{chain.json()['id']}/approve",
            json={"native_currency_symbol": "ETH"},
            headers=api.admin,
        ).status_code
        == 200
    )
    request_id = api.client.post(
        "/nodes/requests", json={"name": "a2", "url": https_anvil["a2"]}
    ).json()["id"]
    plan = _new_plan(api, "stored")
    label = "a" * 64  # a host name label is 63 characters at most
    with api.engine.begin() as connection:
        connection.execute(
            t.node_requests.update()
            .where(t.node_requests.c.id == request_id)
            .values(url=f"https://{label}.example/")
        )
    with pytest.raises(InvalidInputError) as refused:
        _approve_node_request(api.engine, request_id, plan_id=plan["id"], note="")
    assert refused.value.details == [
        {
            "field": "url",
            "url": f"https://{label}.example/",
            "message": "the host is not a valid host name: a host name's labels are 1 to 63 "
            "letters, digits, '-' or '_'",
        }
    ]
    with api.engine.connect() as connection:
        assert connection.execute(select(t.nodes.c.id)).first() is None


def test_rejecting_and_unknown_requests(api: ApiHarness, https_anvil: dict[str, str]) -> None:
    request_id = api.client.post(
        "/nodes/requests", json={"name": "n", "url": https_anvil["a1"]}
    ).json()["id"]
    rejected = api.client.post(
        f"/admin/node-requests/{request_id}/reject", json={"note": "duplicate"}, headers=api.admin
    )
    assert rejected.status_code == 204
    assert (
        api.client.post(
            f"/admin/node-requests/{request_id}/reject", json={}, headers=api.admin
        ).status_code
        == 409
    )
    assert (
        api.client.post("/admin/chain-requests/4040/reject", json={}, headers=api.admin).status_code
        == 404
    )
    listed = api.client.get("/admin/node-requests", headers=api.admin).json()
    assert listed[0]["review_note"] == "duplicate"


def test_screening_errors_tell_the_submitter_neither_addresses_nor_ports(
    make_api: ApiFactory,
) -> None:
    """What the service's own DNS and network answer is not the submitter's to map: a name that
    resolves to an internal address, and a node that cannot be reached, are said to be so, no
    more (docs/security.md)."""
    api = make_api(outbound_allow_private=False, outbound_timeout_s=2.0)
    agent = _agent(api)
    internal = api.client.post(
        "/nodes/requests",
        json={"name": "probe", "url": "https://localhost:8545/"},
        headers=agent.headers,
    )
    text = internal.json()["error"]["details"][0]["message"]
    assert "localhost resolves to a loopback address" in text
    assert "127.0.0.1" not in text
    assert "::1" not in text
    open_api = make_api(outbound_timeout_s=2.0)  # private targets allowed: the port is dialled
    closed = open_api.client.post(
        "/nodes/requests",
        json={"name": "probe", "url": "https://127.0.0.1:9/"},
        headers=open_api.customer("Second agent", role=Role.AGENT).headers,
    )
    detail = closed.json()["error"]["details"][0]["message"]
    assert detail == "eth_chainId: not reachable", detail
