"""One upstream call: every way a node can fail is classified, bounded in time and size."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from chainrouter.router.upstream import FailureKind, PyreqwestUpstream, UpstreamError
from chainrouter.testing.faulty_upstream import FaultyUpstream

pytestmark = pytest.mark.anyio
BODY = b'{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":7}'


@pytest.fixture
async def client() -> AsyncIterator[PyreqwestUpstream]:
    upstream_client = PyreqwestUpstream(max_response_bytes=4096, connect_timeout_s=2)
    yield upstream_client
    await upstream_client.close()


async def test_a_2xx_answer_is_returned_as_sent(
    client: PyreqwestUpstream, upstream: FaultyUpstream
) -> None:
    reply = await client.post(upstream.url("/ok"), BODY, timeout_s=5)
    assert reply.body == b'{"jsonrpc": "2.0", "id": 7, "result": "0x10d4f"}'


@pytest.mark.parametrize(
    ("path", "kind", "status"),
    [
        ("/status/500", FailureKind.HTTP_STATUS, 500),
        ("/status/503", FailureKind.HTTP_STATUS, 503),
        ("/status/404", FailureKind.HTTP_STATUS, 404),
        ("/status/429", FailureKind.RATE_LIMITED, 429),
        ("/reset", FailureKind.TRANSPORT, None),
    ],
)
async def test_failures_are_classified(
    client: PyreqwestUpstream,
    upstream: FaultyUpstream,
    path: str,
    kind: FailureKind,
    status: int | None,
) -> None:
    with pytest.raises(UpstreamError) as caught:
        await client.post(upstream.url(path), BODY, timeout_s=5)
    assert caught.value.kind is kind
    assert caught.value.status == status


async def test_a_refused_connection_is_a_transport_failure(client: PyreqwestUpstream) -> None:
    with pytest.raises(UpstreamError) as caught:
        await client.post("http://127.0.0.1:9/", BODY, timeout_s=5)
    assert caught.value.kind is FailureKind.TRANSPORT


@pytest.mark.parametrize("path", ["/sleep/3000", "/drip/200"])
async def test_a_slow_head_or_a_dripping_body_is_cut_at_the_deadline(
    client: PyreqwestUpstream, upstream: FaultyUpstream, path: str
) -> None:
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await client.post(upstream.url(path), BODY, timeout_s=0.5)
    assert caught.value.kind is FailureKind.TIMEOUT
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("path", ["/ok", "/chunked"])
async def test_an_answer_over_the_size_limit_is_refused(
    upstream: FaultyUpstream, path: str
) -> None:
    small = PyreqwestUpstream(max_response_bytes=10)
    try:
        with pytest.raises(UpstreamError) as caught:
            await small.post(upstream.url(path), BODY, timeout_s=5)
        assert caught.value.kind is FailureKind.TOO_LARGE
    finally:
        await small.close()


async def test_an_answer_without_a_length_is_read_whole(
    client: PyreqwestUpstream, upstream: FaultyUpstream
) -> None:
    reply = await client.post(upstream.url("/chunked"), BODY, timeout_s=5)
    assert reply.body == await _ok_answer(client, upstream)


async def _ok_answer(client: PyreqwestUpstream, upstream: FaultyUpstream) -> bytes:
    return (await client.post(upstream.url("/ok"), BODY, timeout_s=5)).body
