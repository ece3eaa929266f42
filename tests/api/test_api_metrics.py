"""`GET /metrics` on the management API (issue 33, item 3): requests by route template, method
and status, and their duration, for the networks the operator named; 404 for anyone else."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import ApiFactory, ApiHarness


def _from(api: ApiHarness, address: str) -> TestClient:
    """A client of the same application whose requests come from `address`."""
    return TestClient(api.client.app, client=(address, 50000))


def test_requests_are_counted_by_route_template_never_by_path(api: ApiHarness) -> None:
    customer = api.customer()
    local = _from(api, "127.0.0.1")
    for key_id in (101, 102, 103):
        local.patch(f"/api-keys/{key_id}", json={"name": "x"}, headers=customer.headers)
    local.get("/chains")
    scraped = local.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    samples = [
        sample
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    ]
    counted = {
        (s.labels["route"], s.labels["method"], s.labels["status"]): s.value
        for s in samples
        if s.name == "chainrouter_api_requests_total"
    }
    assert counted[("/api-keys/{key_id}", "PATCH", "404")] == 3
    assert counted[("/chains", "GET", "200")] == 1
    assert "/api-keys/101" not in scraped.text
    assert customer.token not in scraped.text
    durations = [s for s in samples if s.name == "chainrouter_api_request_duration_seconds_count"]
    assert sum(s.value for s in durations) >= 4


def test_only_the_named_networks_may_scrape(make_api: ApiFactory) -> None:
    api = make_api()
    assert _from(api, "203.0.113.9").get("/metrics").status_code == 404
    assert api.client.get("/metrics").status_code == 404  # "testclient" is no address at all
    elsewhere = make_api(metrics_networks=["10.0.0.0/8"])
    assert _from(elsewhere, "10.2.3.4").get("/metrics").status_code == 200
    assert _from(elsewhere, "127.0.0.1").get("/metrics").status_code == 404
