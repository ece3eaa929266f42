"""Reading a chain through the router's own request path, as any customer would.

The deposit watcher never dials a node: it sends JSON-RPC to a router (`/rpc/{chainId}/{key}`)
with an API key of the operator's, so routing, failover, the response cache and every check the
router makes of what nodes answer apply to what it reads (docs/decisions.md, "Deposits are read
through the router").
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from chainrouter.domain.deposits import ChainDataError


class ChainReadError(Exception):
    """The router gave no usable answer (an HTTP error, a JSON-RPC error, a malformed reply)."""


class RouterReader:
    """JSON-RPC calls and batches to one router, for one API key."""

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient) -> None:
        self._base = base_url.rstrip("/")
        self._key = api_key
        self._client = client

    def _url(self, chain_id: int) -> str:
        return f"{self._base}/rpc/{chain_id}/{self._key}"

    async def _post(self, chain_id: int, payload: Any) -> Any:
        try:
            response = await self._client.post(
                self._url(chain_id),
                content=orjson.dumps(payload),
                headers={"Content-Type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise ChainReadError(f"chain {chain_id}: the router did not answer: {exc}") from None
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise ChainReadError(
                f"chain {chain_id}: the router answered HTTP {response.status_code} without JSON"
            ) from None
        if response.status_code != 200 and not isinstance(body, list):
            raise ChainReadError(
                f"chain {chain_id}: HTTP {response.status_code}: {_error_text(body)}"
            )
        return body

    async def call(self, chain_id: int, method: str, params: list[Any]) -> Any:
        """One call's `result`; ChainReadError for an error."""
        body = await self._post(
            chain_id, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        )
        return _result(chain_id, method, body)

    async def batch(self, chain_id: int, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        """The `result` of each call, in order; ChainReadError if any failed."""
        if not calls:
            return []
        payload = [
            {"jsonrpc": "2.0", "id": index, "method": method, "params": params}
            for index, (method, params) in enumerate(calls)
        ]
        body = await self._post(chain_id, payload)
        if not isinstance(body, list) or len(body) != len(calls):
            raise ChainReadError(f"chain {chain_id}: a batch of {len(calls)} was not answered")
        by_id = {item.get("id"): item for item in body if isinstance(item, dict)}
        results = []
        for index, (method, _) in enumerate(calls):
            if index not in by_id:
                raise ChainReadError(f"chain {chain_id}: no answer to {method} in the batch")
            results.append(_result(chain_id, method, by_id[index]))
        return results


def _error_text(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return f"{error.get('code')} {str(error.get('message'))[:300]}"
    return str(body)[:300]


def _result(chain_id: int, method: str, body: Any) -> Any:
    if not isinstance(body, dict):
        raise ChainReadError(f"chain {chain_id}: {method}: not a JSON-RPC answer")
    if "error" in body:
        raise ChainReadError(f"chain {chain_id}: {method}: {_error_text(body)}")
    if "result" not in body:
        raise ChainReadError(f"chain {chain_id}: {method}: an answer without a result")
    return body["result"]


def expect_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ChainDataError(f"{what} is not an object: {str(value)[:80]!r}")
    return value
