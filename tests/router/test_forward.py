"""The `Forward` command (contract.py) on each executor: every way a node can fail is classified,
bounded in time and size, and connections are kept and reused only while that is safe.

Checked on both executors' clients to nodes: the Python one (aiohttp) and the native one (Rust),
each driven as its server drives it. Tests of one client's own mechanics (the native URL parser,
its retry of a kept connection closed unanswered) name that client.
"""

from __future__ import annotations

import asyncio
import base64
import resource
import time
from collections.abc import AsyncIterator, Callable

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.router.contract import Failure, FailureKind, Forward, Gather, Wait
from chainrouter.router.executors import Executor
from chainrouter.router.executors.native import load_native_module
from chainrouter.router.executors.process import raise_open_file_limit
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import make_executor
from tests.tls_nodes import MINING_CHAIN, MiningNode, Tls

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    """Both loops: the Python executor serves on uvloop, whose transports differ."""
    return ("asyncio", {"use_uvloop": request.param == "uvloop"})


BODY = b'{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":7}'
OK_ANSWER = b'{"jsonrpc": "2.0", "id": 7, "result": "0x10d4f"}'


async def _forward(url: str, body: bytes, timeout_s: float) -> bytes | Failure:
    return await Forward(url, body, timeout_s)


async def _wait(seconds: float) -> None:
    await Wait(seconds)


async def _forward_all(url: str, times: int) -> list[bytes | Failure]:
    return await Gather([_forward(url, BODY, 5) for _ in range(times)])


class Client:
    """One executor, used for nothing but `Forward`."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def post(self, url: str, body: bytes = BODY, *, timeout_s: float = 5) -> bytes:
        """The answer's body; `FailedError` when the executor reports a `Failure`."""
        answer = await self.executor.run(_forward(url, body, timeout_s))
        if isinstance(answer, Failure):
            raise FailedError(answer)
        return answer

    async def post_at_once(self, url: str, times: int) -> list[bytes | Failure]:
        """`times` calls at once, in one program, as a batch's calls are made."""
        return await self.executor.run(_forward_all(url, times))

    async def pass_time(self, seconds: float) -> None:
        """Let the executor run for a while with nothing to do, as a server's always does: its
        own tasks (the sweep of idle connections) only run while something drives it."""
        await self.executor.run(_wait(seconds))


class FailedError(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.kind = failure.kind
        self.status = failure.status
        # The native executor hands back the contract's own members, not equal strings.
        assert isinstance(failure.kind, FailureKind)


ClientFactory = Callable[..., Client]


@pytest.fixture(params=["python", "native"])
async def make_client(request: pytest.FixtureRequest) -> AsyncIterator[ClientFactory]:
    """Clients on one kind of executor: `make_client(max_response_bytes=..., ca_file=...,
    idle_s=...)`."""
    made: list[Client] = []

    def make(
        *, max_response_bytes: int = 4096, ca_file: str | None = None, idle_s: float = 30.0
    ) -> Client:
        executor = make_executor(
            request.param == "native",
            max_response_bytes=max_response_bytes,
            ca_file=ca_file,
            idle_s=idle_s,
        )
        made.append(Client(executor))
        return made[-1]

    yield make
    for client in made:
        await client.executor.close()
    await asyncio.sleep(0.05)  # the nodes (servers of this run) see the connections go


@pytest.fixture
async def native_client() -> AsyncIterator[Client]:
    client = Client(make_executor(True))
    yield client
    await client.executor.close()


@pytest.fixture
async def client(make_client: ClientFactory) -> Client:
    return make_client()  # on the running loop, which the native driver is given


async def test_a_2xx_answer_is_returned_as_sent(client: Client, upstream: FaultyUpstream) -> None:
    answer = await client.post(upstream.url("/ok"))
    assert answer == OK_ANSWER


@pytest.mark.parametrize(
    ("path", "kind", "status"),
    [
        ("/status/500", FailureKind.HTTP_STATUS, 500),
        ("/status/503", FailureKind.HTTP_STATUS, 503),
        ("/status/404", FailureKind.HTTP_STATUS, 404),
        ("/status/429", FailureKind.RATE_LIMITED, 429),
        ("/reset", FailureKind.TRANSPORT, None),
        ("/truncated", FailureKind.TRANSPORT, None),
        ("/not-http", FailureKind.TRANSPORT, None),
    ],
)
async def test_failures_are_classified(
    client: Client,
    upstream: FaultyUpstream,
    path: str,
    kind: FailureKind,
    status: int | None,
) -> None:
    with pytest.raises(FailedError) as caught:
        await client.post(upstream.url(path), BODY, timeout_s=5)
    assert caught.value.kind is kind
    assert caught.value.status == status


async def test_a_refused_connection_is_a_transport_failure(client: Client) -> None:
    with pytest.raises(FailedError) as caught:
        await client.post("http://127.0.0.1:9/", BODY, timeout_s=5)
    assert caught.value.kind is FailureKind.TRANSPORT


async def test_a_failure_says_nothing_of_the_node_urls_path_or_query(client: Client) -> None:
    """Providers put their keys in the URL (`/v3/KEY`, `?apikey=`); a failure's text goes to
    logs and health details. aiohttp's text of an answer that is not HTTP ended with the URL."""

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 abc\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(not_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(FailedError) as caught:
            await client.post(f"http://127.0.0.1:{port}/v3/PATHKEY?apikey=QUERYKEY", timeout_s=5)
    finally:
        server.close()
    assert caught.value.kind is FailureKind.TRANSPORT
    detail = str(caught.value)
    assert "PATHKEY" not in detail, detail
    assert "QUERYKEY" not in detail, detail


@pytest.mark.parametrize("path", ["/sleep/3000", "/drip/200"])
async def test_a_slow_head_or_a_dripping_body_is_cut_at_the_deadline(
    client: Client, upstream: FaultyUpstream, path: str
) -> None:
    started = time.monotonic()
    with pytest.raises(FailedError) as caught:
        await client.post(upstream.url(path), BODY, timeout_s=0.5)
    assert caught.value.kind is FailureKind.TIMEOUT
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("path", ["/ok", "/chunked", "/http10"])
async def test_an_answer_over_the_size_limit_is_refused(
    make_client: ClientFactory, upstream: FaultyUpstream, path: str
) -> None:
    small = make_client(max_response_bytes=10)
    with pytest.raises(FailedError) as caught:
        await small.post(upstream.url(path), BODY, timeout_s=5)
    assert caught.value.kind is FailureKind.TOO_LARGE


async def test_an_error_status_with_a_large_body_is_reported_as_the_status(
    make_client: ClientFactory, upstream: FaultyUpstream
) -> None:
    small = make_client(max_response_bytes=10)
    with pytest.raises(FailedError) as caught:
        await small.post(upstream.url("/status/502"), BODY, timeout_s=5)
    assert (caught.value.kind, caught.value.status) == (FailureKind.HTTP_STATUS, 502)


@pytest.mark.parametrize("path", ["/chunked", "/http10", "/close", "/interim"])
async def test_answers_framed_every_legal_way_are_read_whole(
    client: Client, upstream: FaultyUpstream, path: str
) -> None:
    answer = await client.post(upstream.url(path), BODY, timeout_s=5)
    assert answer == OK_ANSWER


async def test_one_connection_carries_sequential_calls(
    client: Client, upstream: FaultyUpstream
) -> None:
    before, calls = upstream.connections, upstream.requests["/ok/keep"]
    for _ in range(5):
        await client.post(upstream.url("/ok/keep"), BODY, timeout_s=5)
    assert upstream.requests["/ok/keep"] - calls == 5
    assert upstream.connections - before == 1


async def test_a_time_out_that_passes_after_its_answer_spares_the_next_call_on_the_connection(
    client: Client, upstream: FaultyUpstream
) -> None:
    before = upstream.connections
    await client.post(upstream.url("/ok"), BODY, timeout_s=0.1)
    # The first call's time-out passes while the second, on the same connection, waits.
    answer = await client.post(upstream.url("/sleep/400"), BODY, timeout_s=5)
    assert answer == OK_ANSWER
    assert upstream.connections - before == 1


async def test_concurrent_calls_use_their_own_connections_then_share_them(
    client: Client, upstream: FaultyUpstream
) -> None:
    before = upstream.connections
    url = upstream.url("/sleep/100")
    assert await client.post_at_once(url, 4) == [OK_ANSWER] * 4
    assert upstream.connections - before == 4
    assert await client.post_at_once(url, 4) == [OK_ANSWER] * 4
    assert upstream.connections - before == 4


async def test_a_connection_the_node_closed_is_not_used_again(
    client: Client, upstream: FaultyUpstream
) -> None:
    await client.post(upstream.url("/close"), BODY, timeout_s=5)
    await asyncio.sleep(0.05)  # the node's FIN arrives while the connection is idle
    before = upstream.connections
    answer = await client.post(upstream.url("/ok/after-close"), BODY, timeout_s=5)
    assert answer == OK_ANSWER
    assert upstream.connections - before == 1


async def test_a_kept_connection_closed_without_an_answer_is_retried_once_on_a_new_one(
    native_client: Client, upstream: FaultyUpstream
) -> None:
    """The native client's own rule. aiohttp retries only idempotent methods: a POST that finds a
    kept connection closed fails over like any transport failure (its connections are dropped
    after 30 s idle, well within the usual node's keep-alive, so this is rare)."""
    client = native_client
    # `/once` answers the first call on a connection and drops the connection on the next,
    # as a node does whose idle timeout fires just as a call arrives.
    calls = upstream.requests["/once"]
    await client.post(upstream.url("/once"), BODY, timeout_s=5)
    before = upstream.connections
    answer = await client.post(upstream.url("/once"), BODY, timeout_s=5)
    assert answer == OK_ANSWER
    assert upstream.requests["/once"] - calls == 3
    assert upstream.connections - before == 1


async def test_a_fresh_connection_closed_without_an_answer_is_not_retried(
    client: Client, upstream: FaultyUpstream
) -> None:
    calls = upstream.requests["/reset/fresh"]
    with pytest.raises(FailedError) as caught:
        await client.post(upstream.url("/reset/fresh"), BODY, timeout_s=5)
    assert caught.value.kind is FailureKind.TRANSPORT
    assert upstream.requests["/reset/fresh"] - calls == 1


async def test_a_call_given_up_mid_answer_does_not_leave_its_connection_in_the_pool(
    client: Client, upstream: FaultyUpstream
) -> None:
    # Given up by its own time-out on either executor, and by cancellation on the Python one.
    with pytest.raises(FailedError):
        await client.post(upstream.url("/sleep/2000/mid"), timeout_s=0.1)
    if client.executor.name == "python":
        call = asyncio.ensure_future(client.post(upstream.url("/sleep/2000/mid")))
        await asyncio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    before = upstream.connections
    answer = await client.post(upstream.url("/ok/next"))
    assert answer == OK_ANSWER  # not the late answer to the abandoned call
    assert upstream.connections - before == 1


async def test_connections_idle_past_the_limit_are_not_reused(
    make_client: ClientFactory, upstream: FaultyUpstream
) -> None:
    brief = make_client(idle_s=0)
    before = upstream.connections
    for _ in range(3):
        await brief.post(upstream.url("/ok/idle"), BODY, timeout_s=5)
    assert upstream.connections - before == 3


async def test_https_nodes_are_verified_against_the_configured_ca(
    make_client: ClientFactory, tls: Tls, mining_anvil: MiningNode
) -> None:
    call = b'{"jsonrpc":"2.0","method":"eth_chainId","params":[],"id":1}'
    trusting = make_client(ca_file=str(tls.ca_file))
    strict = make_client()
    answer = await trusting.post(mining_anvil.https, call, timeout_s=5)
    assert orjson.loads(answer)["result"] == hex(MINING_CHAIN)
    with pytest.raises(FailedError) as caught:
        await strict.post(mining_anvil.https, call, timeout_s=5)
    assert caught.value.kind is FailureKind.TRANSPORT


class RefusedUrlError(Exception):
    """The native parser refused a node URL."""


def parse_url(url: str) -> tuple[tuple[str, int, bool], bytes]:
    """How the native client reads a node URL: its pool key and its request head. (The Python
    executor leaves URLs to aiohttp.)"""
    try:
        origin, head = load_native_module().parse_node_url(url, "chainrouter")
    except ValueError:
        raise RefusedUrlError(url) from None
    return origin, head


def test_a_node_url_becomes_a_request_head_with_its_path_query_and_credentials() -> None:
    origin, head = parse_url("https://user:p%40ss@node.example:8443/v3/abc?x=1#frag")
    assert origin == ("node.example", 8443, True)
    text = head.decode()
    assert text.startswith("POST /v3/abc?x=1 HTTP/1.1\r\nHost: node.example:8443\r\n")
    assert f"Authorization: Basic {base64.b64encode(b'user:p@ss').decode()}\r\n" in text
    assert text.endswith("\r\nContent-Length: ")
    origin, head = parse_url("http://[::1]/")
    assert origin == ("::1", 80, False)
    assert head.startswith(b"POST / HTTP/1.1\r\nHost: [::1]\r\n")
    origin, head = parse_url("HTTPS://Node.Example?key=1")
    assert origin == ("node.example", 443, True)
    assert head.startswith(b"POST /?key=1 HTTP/1.1\r\nHost: Node.Example\r\n")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://node.example/",
        "http:///path",
        "http://node.example:99999/",
        "http://node.example:8x/",
        "node.example",
        "http://node.example/a b",
        "http://node.example/\r\nX-Injected: 1",
        "http://[::1/",
    ],
)
def test_an_unusable_node_url_is_refused(url: str) -> None:
    with pytest.raises(RefusedUrlError):
        parse_url(url)


async def test_an_unusable_node_url_is_a_transport_failure(client: Client) -> None:
    with pytest.raises(FailedError) as caught:
        await client.post("http://node.example/a b", BODY, timeout_s=5)
    assert caught.value.kind is FailureKind.TRANSPORT


@given(tail=st.text(max_size=60))
def test_no_node_url_can_add_a_header_line(tail: str) -> None:
    try:
        _, head = parse_url(f"http://node.example/{tail}")
    except RefusedUrlError:
        return
    lines = head.split(b"\r\n")
    assert len(lines) == 5  # request line, Host, User-Agent, Content-Type, Content-Length
    assert all(line.isascii() and b"\n" not in line for line in lines)


async def test_credentials_in_a_node_url_go_as_basic_authorisation_never_in_host(
    client: Client, upstream: FaultyUpstream
) -> None:
    url = upstream.url("/ok/credentials?key=1").replace("http://", "http://user:p%40ss@")
    assert await client.post(url) == OK_ANSWER
    request_line, *lines = upstream.heads["/ok/credentials?key=1"].decode().splitlines()
    assert request_line == "POST /ok/credentials?key=1 HTTP/1.1"
    headers = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in lines)}
    assert headers["host"] == f"127.0.0.1:{upstream.port}"
    assert headers["authorization"] == f"Basic {base64.b64encode(b'user:p@ss').decode()}"


async def test_idle_connections_are_closed_by_a_sweep_without_further_calls(
    make_client: ClientFactory,
) -> None:
    brief = make_client(idle_s=0.2)
    with FaultyUpstream() as own:  # a node of its own: no other test's connections on it
        await brief.post(own.url("/ok/swept"))
        assert own.open_connections == 1
        await brief.pass_time(0.6)
        await asyncio.sleep(0.05)  # the node sees the close
        assert own.open_connections == 0


def test_the_open_file_limit_is_raised_toward_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        raise_open_file_limit(wanted=512)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == min(512, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
