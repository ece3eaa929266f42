"""Reading a catalog document from a local file or an http(s) URL, with a size and time bound."""

from __future__ import annotations

import time
from pathlib import Path

import httpx


class CatalogSourceError(Exception):
    """The catalog could not be read; the message says why."""


def read_catalog_source(location: str, *, max_bytes: int, timeout_s: float) -> bytes:
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
    deadline = time.monotonic() + timeout_s
    try:
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=True) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise CatalogSourceError(f"{url} answered HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise CatalogSourceError(f"{url} sent more than {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise CatalogSourceError(f"{url} took longer than {timeout_s} s")
            return bytes(body)
    except httpx.HTTPError as exc:
        raise CatalogSourceError(f"could not download {url}: {exc}") from None
