"""A JSON-RPC upstream that misbehaves on request, for tests, demos and benchmarks.

It is a real HTTP/1.1 server on a loopback port, written on asyncio streams so that it can also
fail at the socket level. The first path segment picks the behaviour, so that one server can play
many nodes (register `http://127.0.0.1:PORT/status/503` as one node, `.../ok` as another):

| path | answer |
|---|---|
| `/ok` | 200, a JSON-RPC result for every request (batches too), echoing each id |
| `/status/N` | HTTP status N with a small body |
| `/sleep/MS` | the `/ok` answer after MS milliseconds |
| `/drip/MS` | the `/ok` answer, its body sent one byte every MS milliseconds |
| `/garbage` | 200 with a body that is not JSON |
| `/wrong-id` | 200, a JSON-RPC result carrying another id |
| `/reset` | the connection is reset without an answer |
| `/rpc-error` | 200, a JSON-RPC error object (an answer, like an execution revert) |
| `/invalid-request` | 200, error -32600 with id null, as a node answers a request it cannot read |
| `/invalid-params` | 200, error -32602 under the request's id, as for a malformed parameter |
| `/null-id-error/N` | 200, error code N with id null |
| `/chunked` | the `/ok` answer in chunked transfer encoding, without a Content-Length |
| `/block/N` | like `/ok`, but every result is the hex quantity N (a node whose head is block N) |
| `/close` | the `/ok` answer, then the connection is closed without saying so in advance |
| `/http10` | the `/ok` answer as HTTP/1.0 without a length: it ends with the connection |
| `/truncated` | a head announcing more body than is sent, then the connection is closed |
| `/not-http` | bytes that are not an HTTP answer at all |
| `/once` | `/ok` on a connection's first request; a later one is dropped unanswered |
| `/interim` | an interim `100 Continue` answer, then the `/ok` answer |
| `/hang` | nothing: the request is read and never answered, until the client closes |
| `/cut-json` | 200 with a complete HTTP answer whose JSON body is cut in the middle |
| `/chain/N` | like `/ok`, but `eth_chainId` answers N: a node of another chain |
| `/some/P/...` | the path after `P` on P % of requests (spread evenly, alike each run), else ok |
| `/relay/PORT/full` | 200, the answer of the real node at 127.0.0.1:PORT to the body as sent |
| `/relay/PORT/no-trace` | like `full`, but a `trace_*` or `debug_*` call gets geth's -32601 |
| `/relay/PORT/logs-range/N` | like `full`, but `eth_getLogs` over more than N blocks gets -32005 |
| `/relay/PORT/slow/MS` | like `full`, answered MS milliseconds late (a slow real node) |
| `/relay/PORT/lag/N` | like `full`, answered as a node N blocks behind the real one |
| `/relay/PORT/lie/M1,M2` | like `full`, but the results of the named methods are altered |
| `/ws-relay/PORT/...` | a WebSocket upgrade relayed byte for byte to the node at 127.0.0.1:PORT |
| `/ws-relay/PORT/slow/MS/...` | the same, each chunk from the node held MS milliseconds |
| `/ws-relay/PORT/drop/MS/...` | the same, cut MS milliseconds after the upgrade: a flapping node |

`/ws-relay` plays a WebSocket node of a real one (anvil serves WebSocket on its HTTP port), so
two relays are two nodes of one chain; `cut(path)` drops the connections relayed through one and
refuses new ones (503) until `down` no longer holds the path: a node that dies mid-stream.

Further segments are free: `/ok/a` and `/ok/b` behave alike but are two nodes with their own
counts (and `/relay/8545/no-trace/a`, `/relay/8545/no-trace/b` likewise).

The `/relay` paths play real nodes that lack a capability: a real node (an anvil on loopback)
answers, except the calls the path refuses, which are answered without being forwarded.
`no-trace` answers as geth does for a namespace it does not serve: -32601 "the method M does not
exist/is not available". `logs-range/N` answers -32005 "block range too large: this node serves
eth_getLogs over at most N blocks" where the filter has both `fromBlock` and `toBlock`, and
`toBlock - fromBlock + 1 > N`; an end is a hex number, `earliest` (0), or a tag (`latest`,
`pending`, `safe`, `finalized`) resolved by asking the node `eth_blockNumber`. A batch is judged
item by item: the items not refused go to the node as one batch, and the answers are merged back
in the batch's order. When the real node cannot be reached the answer is HTTP 502.

`lag/N` plays a node that is N blocks behind (the real node's head is asked once per request):
`eth_blockNumber` answers head - N; `latest` and `pending` (and a missing block parameter of a
state read) are read as head - N (`safe` and `finalized` pass as they are: anvil's lie 32 and
64 blocks behind its head); a block, its receipts, its transaction count or a transaction
of it by number past that is `null`, and so is a transaction or receipt (by hash) or a block (by
hash) mined past it; a state read pinned past it is geth's -32000 "header not found";
`eth_getLogs` ends at head - N (a range starting past it is `[]`).

`lie/M1,M2` plays a node that alters answers, well-formed: balances and nonces one more,
`eth_call` and `eth_getCode` data with the last byte changed (empty data becomes `0x01`),
storage words one more, receipts' `status` flipped (`eth_getTransactionReceipt`,
`eth_getBlockReceipts`), a block's `stateRoot` changed (`eth_getBlockByNumber`,
`eth_getBlockByHash`: its hash no longer matches), every log's data changed (`eth_getLogs`),
the balance and nonce an `eth_getProof` answer states beside its proof (the proof untouched).
Other methods, errors and `null` pass unaltered; naming a method without a lie is HTTP 404.

Every node of this server belongs to chain `CHAIN_ID` (31337, anvil's default): where a behaviour
answers with results, `eth_chainId` gets that chain's ID (a `/relay` path passes on its real
node's), so the router's health checks find the chain right and test only the fault the path
names.

`requests[path]` counts what each path received, and `heads[path]` is the head (request line and
headers, as sent) of the last request it received; `connections` counts accepted connections, and
`open_connections` those not yet closed.
A path in `down` answers 503 whatever its behaviour, until it is taken out: a node that goes down
and comes back at the same URL. A path in `held` answers as its behaviour says, that many seconds
late, until it is taken out: a node that turns slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp

OK_RESULT = "0x10d4f"
CHAIN_ID = 31337


def _result_for(request: Any, result: Any, chain_id: int = CHAIN_ID) -> dict[str, Any]:
    request_id = request.get("id") if isinstance(request, dict) else None
    return {"jsonrpc": "2.0", "id": request_id, "result": _result_of(request, result, chain_id)}


def _result_of(request: Any, result: Any, chain_id: int = CHAIN_ID) -> Any:
    if isinstance(request, dict) and request.get("method") == "eth_chainId":
        return hex(chain_id)
    return result


def _answer_ok(body: bytes, result: str = OK_RESULT, chain_id: int = CHAIN_ID) -> bytes:
    try:
        payload = json.loads(body)
    except ValueError:
        return json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        ).encode()
    if isinstance(payload, list):
        return json.dumps([_result_for(item, result, chain_id) for item in payload]).encode()
    return json.dumps(_result_for(payload, result, chain_id)).encode()


def _answer_rpc_error(body: bytes) -> bytes:
    payload = json.loads(body)
    request_id = payload.get("id") if isinstance(payload, dict) else None
    error = {"code": 3, "message": "execution reverted", "data": "0x"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def _answer_error(body: bytes, code: int, keep_id: bool) -> bytes:
    payload = json.loads(body)
    request_id = payload.get("id") if keep_id and isinstance(payload, dict) else None
    error = {"code": code, "message": "rejected by the faulty upstream"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def _answer_wrong_id(body: bytes) -> bytes:
    payload = json.loads(body)
    request_id = payload.get("id") if isinstance(payload, dict) else None
    other = f"not-{request_id}"
    result = _result_of(payload, OK_RESULT)
    return json.dumps({"jsonrpc": "2.0", "id": other, "result": result}).encode()


def _head(status: int, length: int) -> bytes:
    reason = {200: "OK", 429: "Too Many Requests"}.get(status, "Status")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def _send_and_close(body: bytes, writer: asyncio.StreamWriter) -> None:
    answer = _answer_ok(body)
    writer.write(_head(200, len(answer)) + answer)
    await writer.drain()


async def _send_http10(body: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + _answer_ok(body))
    await writer.drain()


async def _send_truncated(body: bytes, writer: asyncio.StreamWriter) -> None:
    answer = _answer_ok(body)
    writer.write(_head(200, len(answer) + 10) + answer)
    await writer.drain()


async def _send_not_http(body: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01\x02 this is no HTTP\r\n\r\n")
    await writer.drain()


class _NodeUnreachableError(Exception):
    """The real node behind a `/relay` path did not answer."""


_HEAD_TAGS = ("latest", "pending", "safe", "finalized")


def _call_id(call: Any) -> Any:
    return call.get("id") if isinstance(call, dict) else None


def _refusal(call: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": _call_id(call), "error": {"code": code, "message": message}}


_Refuse = Callable[[Any], Awaitable[dict[str, Any] | None]]
"""A relay's own answer to a call it refuses, or None for a call the real node answers."""


async def _refuse_traces(call: Any) -> dict[str, Any] | None:
    """Geth's answer to a method of a namespace it does not serve (`--http.api` without it)."""
    method = call.get("method") if isinstance(call, dict) else None
    if isinstance(method, str) and method.startswith(("trace_", "debug_")):
        return _refusal(call, -32601, f"the method {method} does not exist/is not available")
    return None


def _in_order_of(calls: list[Any], answers: list[Any]) -> list[Any]:
    """The node's batch answers in the order of `calls`: by id where the ids tell them apart."""
    ids = [json.dumps(_call_id(call)) for call in calls]
    by_id = {json.dumps(_call_id(answer)): answer for answer in answers}
    if len(set(ids)) == len(ids) and all(key in by_id for key in ids):
        return [by_id[key] for key in ids]
    return answers


def _logs_range_ends(call: Any) -> tuple[Any, Any] | None:
    """The two ends of an `eth_getLogs` filter that names both, else None."""
    if not isinstance(call, dict) or call.get("method") != "eth_getLogs":
        return None
    params = call.get("params")
    if not isinstance(params, list) or not params or not isinstance(params[0], dict):
        return None
    query = params[0]
    if "fromBlock" not in query or "toBlock" not in query:
        return None
    return query["fromBlock"], query["toBlock"]


def _block_number(tag: Any, head: int | None) -> int | None:
    """A filter end as a number: None where it is neither a hex number nor a known tag."""
    if tag == "earliest":
        return 0
    if tag in _HEAD_TAGS:
        return head
    if isinstance(tag, str) and tag.startswith(("0x", "0X")):
        with contextlib.suppress(ValueError):
            return int(tag, 16)
    return None


def _number(value: Any) -> int | None:
    if isinstance(value, str) and value.startswith(("0x", "0X")):
        with contextlib.suppress(ValueError):
            return int(value, 16)
    return None


# Methods whose params name a block (number or tag) at this index, and whose result a node that
# lacks the block does not have. A state read past a node's head is an error at geth ("header
# not found"); a block, its receipts or transactions are `null`.
_STATE_AT = {
    "eth_getBalance": 1,
    "eth_getTransactionCount": 1,
    "eth_getCode": 1,
    "eth_getStorageAt": 2,
    "eth_call": 1,
    "eth_estimateGas": 1,
    "eth_getProof": 2,
    "eth_createAccessList": 1,
}
_BLOCK_AT = {
    "eth_getBlockByNumber": 0,
    "eth_getBlockReceipts": 0,
    "eth_getBlockTransactionCountByNumber": 0,
    "eth_getTransactionByBlockNumberAndIndex": 0,
    "eth_getUncleCountByBlockNumber": 0,
    "eth_getUncleByBlockNumberAndIndex": 0,
}


class _Lagging:
    """How a node whose head is `head` answers, given the answers of a node further on."""

    def __init__(self, head: int) -> None:
        self.head = head

    def _tag(self, value: Any) -> Any:
        """`latest` and `pending` are this node's head. `safe` and `finalized` go to the real
        node as they are: they are far enough behind every head for the lags tests play."""
        return hex(self.head) if value in ("latest", "pending") else value

    def own_answer(self, call: Any) -> dict[str, Any] | None:
        """The answer given without asking the real node, or None."""
        if not isinstance(call, dict):
            return None
        method, params = call.get("method"), call.get("params")
        params = params if isinstance(params, list) else []
        result: Any
        if method == "eth_blockNumber":
            result = hex(self.head)
        elif method in _STATE_AT and len(params) > _STATE_AT[method]:
            number = _number(self._tag(params[_STATE_AT[method]]))
            if number is None or number <= self.head:
                return None
            return _refusal(call, -32000, "header not found")
        elif method in _BLOCK_AT and len(params) > _BLOCK_AT[method]:
            number = _number(self._tag(params[_BLOCK_AT[method]]))
            if number is None or number <= self.head:
                return None
            result = None
        elif method == "eth_getLogs" and params and isinstance(params[0], dict):
            first = _number(self._tag(params[0].get("fromBlock", "latest")))
            if first is None or first <= self.head:
                return None
            result = []
        else:
            return None
        return {"jsonrpc": "2.0", "id": _call_id(call), "result": result}

    def rewritten(self, call: Any) -> Any:
        """The call with the head tags this node would read as its own head made numbers."""
        if not isinstance(call, dict) or not isinstance(call.get("params"), list):
            return call
        method, params = str(call.get("method")), list(call["params"])
        at = _STATE_AT[method] if method in _STATE_AT else _BLOCK_AT.get(method)
        if at is not None and len(params) > at:
            params[at] = self._tag(params[at])
        elif at is not None and method in _STATE_AT:
            params.append(hex(self.head))  # no block given: the node's latest
        if method == "eth_getLogs" and params and isinstance(params[0], dict):
            query = dict(params[0])
            if "blockHash" not in query:
                query["fromBlock"] = self._tag(query.get("fromBlock", "latest"))
                last = _number(self._tag(query.get("toBlock", "latest")))
                query["toBlock"] = hex(min(last if last is not None else self.head, self.head))
            params[0] = query
        return {**call, "params": params}

    def trimmed(self, call: Any, answer: Any) -> Any:
        """The real node's answer less what lies past this node's head."""
        if not isinstance(answer, dict) or "result" not in answer:
            return answer
        result = answer["result"]
        if isinstance(result, dict):
            number = _number(result.get("blockNumber", result.get("number")))
            if number is not None and number > self.head:
                return {**answer, "result": None}
        elif isinstance(result, list):
            kept = [
                item
                for item in result
                if not isinstance(item, dict)
                or (_number(item.get("blockNumber")) or 0) <= self.head
            ]
            if kept != result:
                # A block's receipts past the head are no receipts at all; logs are trimmed.
                is_logs = isinstance(call, dict) and call.get("method") == "eth_getLogs"
                return {**answer, "result": kept if is_logs else None}
        return answer


def _quantity_lie(result: Any) -> Any:
    return hex(int(result, 16) + 1) if isinstance(result, str) else result


def _data_lie(result: Any) -> Any:
    """The same length of bytes with the last one changed; empty data gets one byte."""
    if not isinstance(result, str) or not result.startswith("0x"):
        return result
    if len(result) < 4:
        return "0x01"
    return result[:-2] + f"{int(result[-2:], 16) ^ 1:02x}"


def _word_lie(result: Any) -> Any:
    if not isinstance(result, str):
        return result
    return "0x" + ((int(result, 16) + 1) % (1 << 256)).to_bytes(32, "big").hex()


def _status_lie(result: Any) -> Any:
    if isinstance(result, dict) and "status" in result:
        return {**result, "status": "0x0" if result["status"] == "0x1" else "0x1"}
    if isinstance(result, list):
        return [_status_lie(item) for item in result]
    return result


def _block_lie(result: Any) -> Any:
    if isinstance(result, dict) and "stateRoot" in result:
        return {**result, "stateRoot": _data_lie(result["stateRoot"])}
    return result


def _proof_lie(result: Any) -> Any:
    """The balance and nonce the answer states beside its proof, not the proof itself."""
    if isinstance(result, dict) and "balance" in result and "nonce" in result:
        return {
            **result,
            "balance": _quantity_lie(result["balance"]),
            "nonce": _quantity_lie(result["nonce"]),
        }
    return result


def _logs_lie(result: Any) -> Any:
    if isinstance(result, list):
        return [
            {**log, "data": _data_lie(log.get("data"))} if isinstance(log, dict) else log
            for log in result
        ]
    return result


# What `/relay/PORT/lie/M1,M2` does to each method's result: always well-formed, always wrong.
_LIES: dict[str, Callable[[Any], Any]] = {
    "eth_getBalance": _quantity_lie,
    "eth_getTransactionCount": _quantity_lie,
    "eth_call": _data_lie,
    "eth_getCode": _data_lie,
    "eth_getStorageAt": _word_lie,
    "eth_getTransactionReceipt": _status_lie,
    "eth_getBlockReceipts": _status_lie,
    "eth_getBlockByNumber": _block_lie,
    "eth_getBlockByHash": _block_lie,
    "eth_getLogs": _logs_lie,
    "eth_getProof": _proof_lie,
}


# Answers after which the server closes the connection (the caller closes the writer).
_CLOSING = {
    "close": _send_and_close,
    "http10": _send_http10,
    "truncated": _send_truncated,
    "not-http": _send_not_http,
}


class FaultyUpstream:
    """Start with `with FaultyUpstream() as upstream:`; `upstream.url("/ok")` is a node URL."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.heads: dict[str, bytes] = {}
        self.down: set[str] = set()
        self.held: dict[str, float] = {}  # path -> seconds its answers are held back
        self.connections = 0
        self._shares: Counter[str] = Counter()  # requests seen by each `/some` path
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._relayed: dict[str, set[asyncio.StreamWriter]] = {}  # /ws-relay path -> sockets

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def open_connections(self) -> int:
        return len(self._writers)

    def ws_url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def cut(self, path: str) -> None:
        """Take a `/ws-relay` path down: its relayed connections are dropped now, new ones get
        503 (from any thread)."""
        self.down.add(path)
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._drop_relayed(path), loop).result(10)

    async def _drop_relayed(self, path: str) -> None:
        for writer in self._relayed.pop(path, set()):
            writer.close()

    def __enter__(self) -> FaultyUpstream:
        self._thread = threading.Thread(target=self._run, name="faulty-upstream", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the faulty upstream did not start")
        return self

    def __exit__(self, *_: object) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        # Clients may still hold kept connections (a client's pool lives as long as the client
        # object): end their handlers here, and let every transport finish closing before the
        # loop stops, rather than leave sockets for the collector.
        for writer in list(self._writers):
            writer.close()
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
        await self._server.wait_closed()
        await asyncio.sleep(0.01)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            # Handlers still sleeping (a /sleep whose client gave up) are cancelled, not leaked.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
            handler.add_done_callback(self._handlers.discard)
        self._writers.add(writer)
        self.connections += 1
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            # Shutdown cancelled a handler still waiting (a /sleep whose client gave up). This
            # task is the top of its connection: ending it quietly is the whole of the cleanup.
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        served = 0
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                length = 0
                head = [request_line]
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    head.append(line)
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length)
                path = request_line.split(b" ")[1].decode()
                self.requests[path] = self.requests[path] + 1
                self.heads[path] = b"".join(head)
                if path.startswith("/ws-relay/"):
                    await self._relay_websocket(path, head, reader, writer)
                    return
                if path.startswith("/once") and served:
                    return  # dropped without an answer: see `/once`
                if not await self._respond(self._behaviour(path), body, writer, reader):
                    return
                served += 1

    async def _relay_websocket(
        self,
        path: str,
        head: list[bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Relay a WebSocket connection to the node named in the path, both ways, until either
        side closes or the path is cut."""
        if path in self.down:
            writer.write(_head(503, 0))
            await writer.drain()
            return
        segments = path.split("/")
        port = int(segments[2])
        hold_s = int(segments[4]) / 1000 if segments[3:4] == ["slow"] else 0.0
        drop_s = int(segments[4]) / 1000 if segments[3:4] == ["drop"] else None
        try:
            node_reader, node_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.write(_head(502, 0))
            await writer.drain()
            return
        method, _, version = head[0].split(b" ", 2)
        node_writer.write(b" ".join([method, b"/", version]) + b"".join(head[1:]) + b"\r\n")
        relayed = self._relayed.setdefault(path, set())
        relayed.update((writer, node_writer))

        async def pipe(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, hold_s: float = 0.0
        ) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while chunk := await source.read(65536):
                    if hold_s:
                        await asyncio.sleep(hold_s)
                    sink.write(chunk)
                    await sink.drain()

        pipes = [
            asyncio.ensure_future(pipe(reader, node_writer)),
            asyncio.ensure_future(pipe(node_reader, writer, hold_s)),
        ]
        try:
            await asyncio.wait(pipes, timeout=drop_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for piping in pipes:
                piping.cancel()
            relayed.discard(writer)
            relayed.discard(node_writer)
            node_writer.close()

    def _behaviour(self, path: str) -> str:
        """The path whose behaviour answers this request: a `/some/P/...` path's inner path on
        P % of its requests (the n-th one when P * n / 100 passes a whole number), else `/ok`."""
        if not path.startswith("/some/") or path in self.down:
            return path
        _, _, share, inner = path.split("/", 3)
        seen = self._shares[path]
        self._shares[path] = seen + 1
        hit = (seen + 1) * int(share) // 100 > seen * int(share) // 100
        return "/" + inner if hit else "/ok"

    async def _respond(
        self, path: str, body: bytes, writer: asyncio.StreamWriter, reader: asyncio.StreamReader
    ) -> bool:
        """Answer one request; False when the connection must not be used again."""
        if path in self.down:
            answer = b'{"error":"node down"}'
            writer.write(_head(503, len(answer)) + answer)
            await writer.drain()
            return True
        held_s = self.held.get(path)
        if held_s:
            await asyncio.sleep(held_s)
        parts = path.strip("/").split("/")
        kind = parts[0]
        if kind == "reset":
            sock = writer.get_extra_info("socket")
            # Linger 0: close() sends RST instead of FIN, as a crashed node would.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if kind in _CLOSING:
            await _CLOSING[kind](body, writer)
            return False
        if kind == "hang":
            await reader.read()  # until the client gives up and closes
            return False
        if kind == "status":
            answer = b'{"error":"upstream status"}'
            writer.write(_head(int(parts[1]), len(answer)) + answer)
        elif kind == "garbage":
            answer = b"<html>definitely not json"
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "wrong-id":
            answer = _answer_wrong_id(body)
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "rpc-error":
            answer = _answer_rpc_error(body)
            writer.write(_head(200, len(answer)) + answer)
        elif kind in ("invalid-request", "invalid-params", "null-id-error"):
            code = {"invalid-request": -32600, "invalid-params": -32602}.get(kind)
            answer = _answer_error(body, code or int(parts[1]), keep_id=kind == "invalid-params")
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "drip":
            answer = _answer_ok(body)
            writer.write(_head(200, len(answer)))
            for byte in answer:
                await writer.drain()
                await asyncio.sleep(int(parts[1]) / 1000)
                writer.write(bytes([byte]))
        elif kind == "chunked":
            answer = _answer_ok(body)
            half = len(answer) // 2
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for piece in (answer[:half], answer[half:]):
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            writer.write(b"0\r\n\r\n")
        elif kind == "interim":
            answer = _answer_ok(body)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + _head(200, len(answer)) + answer)
        elif kind == "cut-json":
            answer = _answer_ok(body)[:-7]
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "chain":
            answer = _answer_ok(body, chain_id=int(parts[1]))
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "block":
            answer = _answer_ok(body, hex(int(parts[1])))
            writer.write(_head(200, len(answer)) + answer)
        elif kind == "relay":
            status, answer = await self._relay(parts, body)
            writer.write(_head(status, len(answer)) + answer)
        else:
            if kind == "sleep":
                await asyncio.sleep(int(parts[1]) / 1000)
            answer = _answer_ok(body)
            writer.write(_head(200, len(answer)) + answer)
        await writer.drain()
        return True

    async def _relay(self, parts: list[str], body: bytes) -> tuple[int, bytes]:
        """The status and body a `/relay/PORT/MODE[/N]` path answers `body` with."""
        node = f"http://127.0.0.1:{int(parts[1])}/"
        mode = parts[2] if len(parts) > 2 else ""
        try:
            if mode == "full":
                return 200, await self._post(node, body)
            if mode == "slow":
                await asyncio.sleep(int(parts[3]) / 1000)
                return 200, await self._post(node, body)
            if mode == "no-trace":
                return 200, await self._relay_refusing(node, body, _refuse_traces)
            if mode == "logs-range":
                rule = self._logs_range_rule(node, int(parts[3]))
                return 200, await self._relay_refusing(node, body, rule)
            if mode == "lag":
                return 200, await self._relay_lagging(node, body, int(parts[3]))
            if mode == "lie":
                methods = frozenset(parts[3].split(","))
                unknown = methods - _LIES.keys()
                if unknown:
                    return 404, json.dumps({"error": f"no lie for {sorted(unknown)}"}).encode()
                return 200, await self._relay_lying(node, body, methods)
        except _NodeUnreachableError:
            return 502, b'{"error":"the relayed node is unreachable"}'
        return 404, b'{"error":"unknown relay mode"}'

    async def _relay_refusing(self, node: str, body: bytes, refuse: _Refuse) -> bytes:
        """Forward `body`, except the calls `refuse` answers itself (item by item in a batch)."""
        try:
            payload = json.loads(body)
        except ValueError:
            return await self._post(node, body)  # not JSON: the node's own parse error
        if not isinstance(payload, list):
            refusal = await refuse(payload)
            if refusal is not None:
                return json.dumps(refusal).encode()
            return await self._post(node, body)
        answers: list[Any] = [await refuse(call) for call in payload]
        kept = [index for index, answer in enumerate(answers) if answer is None]
        if len(kept) == len(payload):
            return await self._post(node, body)
        if kept:
            forwarded = [payload[index] for index in kept]
            answer = await self._post(node, json.dumps(forwarded).encode())
            try:
                relayed = json.loads(answer)
            except ValueError:
                relayed = None
            if not isinstance(relayed, list) or len(relayed) != len(forwarded):
                return answer  # not one answer per call (a whole-batch error): passed on as is
            for index, answer in zip(kept, _in_order_of(forwarded, relayed), strict=True):
                answers[index] = answer
        return json.dumps(answers).encode()

    def _logs_range_rule(self, node: str, most: int) -> _Refuse:
        """Refuses an `eth_getLogs` over more than `most` blocks; asks the head at most once."""
        message = f"block range too large: this node serves eth_getLogs over at most {most} blocks"
        head: list[int | None] = []

        async def number(end: Any) -> int | None:
            if end in _HEAD_TAGS and not head:
                head.append(await self._node_head(node))
            return _block_number(end, head[0] if head else None)

        async def refuse(call: Any) -> dict[str, Any] | None:
            ends = _logs_range_ends(call)
            if ends is None:
                return None
            first, last = await number(ends[0]), await number(ends[1])
            if first is not None and last is not None and last - first + 1 > most:
                return _refusal(call, -32005, message)
            return None

        return refuse

    async def _relay_lagging(self, node: str, body: bytes, lag: int) -> bytes:
        """Answer as a node `lag` blocks behind the real one: see `/relay/PORT/lag/N`."""
        try:
            payload = json.loads(body)
        except ValueError:
            return await self._post(node, body)
        real = await self._node_head(node)
        if real is None:
            return await self._post(node, body)
        lagging = _Lagging(max(real - lag, 0))
        calls = payload if isinstance(payload, list) else [payload]
        answers: list[Any] = [lagging.own_answer(call) for call in calls]
        kept = [index for index, answer in enumerate(answers) if answer is None]
        if kept:
            forwarded = [lagging.rewritten(calls[index]) for index in kept]
            answer = await self._post(node, json.dumps(forwarded).encode())
            try:
                relayed = json.loads(answer)
            except ValueError:
                relayed = None
            if not isinstance(relayed, list) or len(relayed) != len(forwarded):
                return answer  # not one answer per call: passed on as is
            for index, call, answer in zip(
                kept, forwarded, _in_order_of(forwarded, relayed), strict=True
            ):
                answers[index] = lagging.trimmed(call, answer)
        return json.dumps(answers if isinstance(payload, list) else answers[0]).encode()

    async def _relay_lying(self, node: str, body: bytes, methods: frozenset[str]) -> bytes:
        """The real node's answer, with the results of `methods` altered: see `/relay/.../lie`."""
        answer = await self._post(node, body)
        try:
            payload, relayed = json.loads(body), json.loads(answer)
        except ValueError:
            return answer
        calls = payload if isinstance(payload, list) else [payload]
        answers = relayed if isinstance(relayed, list) else [relayed]
        if len(calls) != len(answers):
            return answer
        for call, item in zip(calls, _in_order_of(calls, answers), strict=True):
            method = call.get("method") if isinstance(call, dict) else None
            if method in methods and isinstance(item, dict) and item.get("result") is not None:
                item["result"] = _LIES[method](item["result"])
        return json.dumps(relayed).encode()

    async def _node_head(self, node: str) -> int | None:
        """The node's head block, or None where it does not tell (then the node judges)."""
        call = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
        answer = await self._post(node, json.dumps(call).encode())
        try:
            return int(json.loads(answer)["result"], 16)
        except (ValueError, KeyError, TypeError):
            return None

    async def _post(self, node: str, body: bytes) -> bytes:
        """The real node's answer body to `body`; a kept connection it closed is retried once."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        headers = {"Content-Type": "application/json"}
        for attempt in range(2):
            try:
                async with self._session.post(node, data=body, headers=headers) as response:
                    return await response.read()
            except aiohttp.ServerDisconnectedError:
                if attempt:
                    raise _NodeUnreachableError(node) from None
            except (aiohttp.ClientError, OSError, TimeoutError):
                raise _NodeUnreachableError(node) from None
        raise _NodeUnreachableError(node)


@contextlib.contextmanager
def faulty_upstream() -> Iterator[FaultyUpstream]:
    with FaultyUpstream() as upstream:
        yield upstream


def main() -> None:
    """`python -m chainrouter.testing.faulty_upstream`: serve until stopped, the port on stdout
    (the fault-table benchmark runs it as a process of its own)."""
    import signal
    import sys

    with FaultyUpstream() as upstream:
        print(upstream.port, flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
