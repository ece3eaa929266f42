"""Mandatory screening of a WebSocket node, dialled through the outbound guard.

Checks, in order: the node accepts the WebSocket connection; `eth_chainId` answers the expected
chain; `eth_subscribe` to `newHeads` is accepted; a `newHeads` notification arrives. All of it
within the guard's time limit, each message within its size limit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson

from chainrouter.screening.evm import Check, Screening
from chainrouter.screening.guard import OutboundError, OutboundGuard, unreachable

WS_SCHEMES = frozenset({"wss"})
log = logging.getLogger(__name__)


class _WsCheckFailedError(Exception):
    pass


async def _receive(ws: aiohttp.ClientWebSocketResponse, wanted: Any) -> dict[str, Any]:
    """The next JSON message for which `wanted(message)` holds; others are skipped."""
    while True:
        message = await ws.receive()
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            raise _WsCheckFailedError("the node closed the connection")
        if message.type is aiohttp.WSMsgType.ERROR:
            log.info("a WebSocket connection failed: %s", ws.exception())
            raise _WsCheckFailedError("the connection failed")
        if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            continue
        try:
            decoded = orjson.loads(message.data)
        except orjson.JSONDecodeError:
            raise _WsCheckFailedError("a message is not JSON") from None
        if isinstance(decoded, dict) and wanted(decoded):
            return decoded


async def _call(
    ws: aiohttp.ClientWebSocketResponse, call_id: int, method: str, params: list[Any]
) -> Any:
    await ws.send_bytes(
        orjson.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params})
    )
    answer = await _receive(ws, lambda m: m.get("id") == call_id)
    if "error" in answer:
        error = answer["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise _WsCheckFailedError(f"the node answered an error: {str(message)[:200]}")
    return answer.get("result")


async def screen_ws_node(guard: OutboundGuard, url: str, *, expected_chain_id: int) -> Screening:
    screening = Screening(url)
    try:
        parsed = guard.check_url(url, WS_SCHEMES)
    except OutboundError as exc:
        screening.checks.append(Check("url", False, str(exc)))
        return screening
    limit_s = guard.policy.timeout_s
    step = "connect"
    async with guard.session() as session:
        try:
            async with asyncio.timeout(limit_s):
                async with session.aiohttp_session.ws_connect(
                    parsed,
                    max_msg_size=guard.policy.max_response_bytes,
                    autoping=True,
                ) as ws:
                    screening.checks.append(Check("connect", True, "WebSocket accepted"))
                    step = "eth_chainId"
                    chain_id = await _call(ws, 1, "eth_chainId", [])
                    if not isinstance(chain_id, str) or not chain_id.startswith("0x"):
                        raise _WsCheckFailedError(f"not a chain ID: {str(chain_id)[:80]!r}")
                    screening.chain_id = int(chain_id, 16)
                    if screening.chain_id != expected_chain_id:
                        raise _WsCheckFailedError(
                            f"the node serves chain {screening.chain_id}, "
                            f"not chain {expected_chain_id}"
                        )
                    screening.checks.append(Check(step, True, f"chain {screening.chain_id}"))
                    step = "eth_subscribe newHeads"
                    subscription = await _call(ws, 2, "eth_subscribe", ["newHeads"])
                    if not isinstance(subscription, str) or not subscription:
                        raise _WsCheckFailedError("the subscription was not accepted")
                    screening.checks.append(Check(step, True, f"subscription {subscription[:40]}"))
                    step = "newHeads notification"
                    note = await _receive(
                        ws,
                        lambda m: (
                            m.get("method") == "eth_subscription"
                            and isinstance(m.get("params"), dict)
                            and m["params"].get("subscription") == subscription
                        ),
                    )
                    head = note["params"].get("result")
                    number = head.get("number") if isinstance(head, dict) else None
                    if not isinstance(number, str) or not number.startswith("0x"):
                        raise _WsCheckFailedError("the notification carries no block header")
                    screening.block_number = int(number, 16)
                    screening.checks.append(Check(step, True, f"block {screening.block_number}"))
        except (_WsCheckFailedError, OutboundError) as exc:
            screening.checks.append(Check(step, False, str(exc)))
        except TimeoutError:
            screening.checks.append(Check(step, False, f"nothing within {limit_s:g} s"))
        except aiohttp.WSServerHandshakeError as exc:
            screening.checks.append(
                Check(step, False, f"no WebSocket connection: HTTP {exc.status}")
            )
        except aiohttp.ClientConnectorError as exc:
            reason = session.refusal or unreachable(url, exc)
            screening.checks.append(Check(step, False, reason))
        except (aiohttp.ClientError, ValueError) as exc:
            screening.checks.append(Check(step, False, unreachable(url, exc)))
    return screening
