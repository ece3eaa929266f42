"""Reading a catalog document from a local file or an http(s) URL, with a size and time bound."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx


class CatalogSourceError(Exception):
    """The catalog could not be read; the message says why."""


def read_catalog_source(location: str, *, max_bytes: int, timeout_s: float) -> bytes:
    """The document at `location`. Runs its own event loop for a download: call it from
    synchronous code (the `chains import` command), not from a running loop."""
    if location.startswith(("http://", "https://")):
        return _download(location, max_bytes=max_bytes, timeout_s=timeout_s)
    path = Path(location)
    if not path.is_file():
        raise CatalogSourceError(f"no such file: {location}")
    if path.stat().st_size > max_bytes:
        raise CatalogSourceError(f"{location} is larger than {max_bytes} bytes")
    return path.read_bytes()


def _download(url: str, *, max_bytes: int, timeout_s: float) -> bytes:
    # The operator names this URL on the command line, so it is not screened by the outbound guard;
    # the bounds keep a wrong or hostile URL from hanging the command or filling memory.
    try:
        return asyncio.run(_fetch(url, max_bytes=max_bytes, timeout_s=timeout_s))
    except (TimeoutError, httpx.TimeoutException):
        raise CatalogSourceError(
            f"{url} took longer than {timeout_s} s to download (connecting, headers and body)"
        ) from None
    except httpx.HTTPError as exc:
        raise CatalogSourceError(f"could not download {url}: {exc}") from None


async def _fetch(url: str, *, max_bytes: int, timeout_s: float) -> bytes:
    # One deadline for the whole download, cancelling whatever is under way when it passes:
    # httpx's timeouts bound each read, so a server sending a byte at a time (of its headers or
    # its body) would never trip them.
    async with (
        asyncio.timeout(timeout_s),
        httpx.AsyncClient(timeout=timeout_s, follow_redirects=True) as client,
        client.stream("GET", url) as response,
    ):
        if response.status_code != 200:
            raise CatalogSourceError(f"{url} answered HTTP {response.status_code}")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise CatalogSourceError(f"{url} sent more than {max_bytes} bytes")
        return bytes(body)
