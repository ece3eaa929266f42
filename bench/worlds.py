"""Operator files for the benchmarks' small worlds: one chain of their own, providers with one
plan each, and one customer with a key, so that each benchmark says only what differs."""

from __future__ import annotations

from typing import Any


def plan(
    name: str, methods: list[dict[str, Any]], nodes: list[str], chain_id: int
) -> dict[str, Any]:
    """One plan pricing `methods` over HTTP `nodes`; a method of `node_target_type` ws is served
    by the same nodes' WebSocket endpoints."""
    wanted: dict[str, Any] = {
        "name": name,
        "methods": methods,
        "nodes": [{"url": node, "chain_id": chain_id} for node in nodes],
    }
    if any(method.get("node_target_type") == "ws" for method in methods):
        wanted["ws_nodes"] = [
            {"url": node.replace("http://", "ws://"), "chain_id": chain_id} for node in nodes
        ]
    return wanted


def world(
    chain_id: int, providers: dict[str, dict[str, Any]], key: str, credits: str = "1000000"
) -> dict[str, Any]:
    """The operator file: chain `chain_id`, each provider (slug -> its one plan) named after its
    slug, and a customer with `credits` and the API key `key` allowed from any domain."""
    return {
        "version": 1,
        "chains": [
            {
                "chain_id": chain_id,
                "name": "Bench",
                "short_name": "bench",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": [
            {"slug": slug, "name": slug.capitalize(), "plans": [one]}
            for slug, one in providers.items()
        ],
        "customers": [
            {
                "email": "bench@example.com",
                "name": "Bench",
                "credits": [{"reference": "bench", "amount": credits}],
                "api_keys": [{"name": "bench", "secret": key, "allowed_domains": ["*"]}],
            }
        ],
    }
