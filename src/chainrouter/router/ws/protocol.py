"""The subscription side of the WebSocket protocol (design notes, "WebSocket API"), without I/O:
reading `eth_subscribe` and `eth_unsubscribe`, a `logs` filter and whether a log matches it,
and writing notifications in the `eth_subscription` shape Ethereum nodes use.

Bounds (docs/websocket.md): a filter names at most `MAX_ADDRESSES` addresses and 4 topic
positions of at most `MAX_TOPIC_CHOICES` each; anything else is -32602 with what was wrong.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from chainrouter.jsonrpc.errors import RpcCode, RpcError

MAX_ADDRESSES = 1000
MAX_TOPIC_CHOICES = 100
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_TOPIC = re.compile(r"0x[0-9a-fA-F]{64}")


class SubscriptionKind(StrEnum):
    NEW_HEADS = "newHeads"
    LOGS = "logs"
    NEW_PENDING_TRANSACTIONS = "newPendingTransactions"


@dataclass(frozen=True, slots=True)
class LogFilter:
    """Which logs a `logs` subscription gets: any of `addresses` (None: any), and at each topic
    position any of its choices (None: any). Stored lower case: one spelling per filter, so
    that equal filters are equal."""

    addresses: frozenset[str] | None = None
    topics: tuple[frozenset[str] | None, ...] = ()

    @property
    def entries(self) -> int:
        """Its addresses and topics: what it holds of a connection's and a customer's bound on
        filter entries (router/ws/hub.py)."""
        addresses = 0 if self.addresses is None else len(self.addresses)
        return addresses + sum(len(choices) for choices in self.topics if choices is not None)

    def matches(self, log: dict[str, Any]) -> bool:
        if self.addresses is not None:
            address = log.get("address")
            if not isinstance(address, str) or address.lower() not in self.addresses:
                return False
        topics = log.get("topics")
        if not isinstance(topics, list):
            return not self.topics
        for position, choices in enumerate(self.topics):
            if choices is None:
                continue
            if position >= len(topics):
                return False
            topic = topics[position]
            if not isinstance(topic, str) or topic.lower() not in choices:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Subscribe:
    kind: SubscriptionKind
    log_filter: LogFilter | None = None  # for `logs`


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    subscription_id: str


def _invalid(message: str) -> RpcError:
    return RpcError(400, RpcCode.INVALID_PARAMS, f"invalid params: {message}")


def read_subscribe(params: Any) -> Subscribe:
    """`eth_subscribe`'s params: `["newHeads"]`, `["logs", {address, topics}]` or
    `["newPendingTransactions"]`; `RpcError` (-32602) saying what is wrong otherwise."""
    if not isinstance(params, list) or not params or not isinstance(params[0], str):
        raise _invalid('eth_subscribe takes [kind] or ["logs", filter]')
    try:
        kind = SubscriptionKind(params[0])
    except ValueError:
        kinds = ", ".join(k.value for k in SubscriptionKind)
        raise _invalid(f"unknown subscription {params[0][:60]!r}; one of {kinds}") from None
    if kind is SubscriptionKind.LOGS:
        if len(params) > 2:
            raise _invalid("logs takes one filter")
        return Subscribe(kind, read_log_filter(params[1] if len(params) == 2 else {}))
    if len(params) > 2 or (len(params) == 2 and not isinstance(params[1], bool)):
        raise _invalid(f"{kind} takes no filter")
    return Subscribe(kind)


def read_log_filter(value: Any) -> LogFilter:
    if not isinstance(value, dict):
        raise _invalid("a logs filter is an object with address and topics")
    unknown = set(value) - {"address", "topics", "fromBlock", "toBlock", "blockHash"}
    if unknown:
        raise _invalid(f"a logs filter takes address and topics, not {sorted(unknown)[0]!r}")
    if any(value.get(name) is not None for name in ("fromBlock", "toBlock", "blockHash")):
        raise _invalid("a logs subscription follows new blocks: no fromBlock, toBlock or blockHash")
    return LogFilter(_addresses(value.get("address")), _topics(value.get("topics")))


def _addresses(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    found = [value] if isinstance(value, str) else value
    if not isinstance(found, list) or not found or len(found) > MAX_ADDRESSES:
        raise _invalid(f"address is an address or a list of 1 to {MAX_ADDRESSES}")
    for address in found:
        if not isinstance(address, str) or not _ADDRESS.fullmatch(address):
            raise _invalid(f"{str(address)[:60]!r} is not a 20-byte hex address")
    return frozenset(address.lower() for address in found)


def _topics(value: Any) -> tuple[frozenset[str] | None, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > 4:
        raise _invalid("topics is a list of at most 4 positions")
    positions: list[frozenset[str] | None] = []
    for position in value:
        if position is None:
            positions.append(None)
            continue
        choices = [position] if isinstance(position, str) else position
        if not isinstance(choices, list) or not choices or len(choices) > MAX_TOPIC_CHOICES:
            raise _invalid(
                f"a topic position is null, a topic or a list of 1 to {MAX_TOPIC_CHOICES}"
            )
        for topic in choices:
            if topic is None:
                break  # null among the choices: the position matches anything
            if not isinstance(topic, str) or not _TOPIC.fullmatch(topic):
                raise _invalid(f"{str(topic)[:80]!r} is not a 32-byte hex topic")
        else:
            positions.append(frozenset(topic.lower() for topic in choices))
            continue
        positions.append(None)
    while positions and positions[-1] is None:
        positions.pop()  # trailing wildcards say nothing: one spelling per filter
    return tuple(positions)


def read_unsubscribe(params: Any) -> Unsubscribe:
    if (
        not isinstance(params, list)
        or len(params) != 1
        or not isinstance(params[0], str)
        or len(params[0]) > 66
    ):
        raise _invalid("eth_unsubscribe takes [subscription id]")
    return Unsubscribe(params[0])


def new_subscription_id() -> str:
    return "0x" + secrets.token_hex(16)


def notification(subscription_id: str, result_json: bytes) -> bytes:
    """An `eth_subscription` message around a result already encoded (a header or a log as the
    node sent it: never decoded and encoded again)."""
    return (
        b'{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"'
        + subscription_id.encode()
        + b'","result":'
        + result_json
        + b"}}"
    )
