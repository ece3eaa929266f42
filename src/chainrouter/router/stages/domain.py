"""Stage: the page a request comes from is one of the key's `allowed_domains`."""

from __future__ import annotations

from urllib.parse import urlsplit

from chainrouter.domain.domains import domain_allowed
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext
from chainrouter.router.stages.memo import PerSnapshot

_MEMO_MAX_CHARS = 512  # longer page headers are checked every time


def page_header(origin: str | None, referer: str | None) -> str | None:
    """The header whose host is matched against `allowed_domains`: Origin, else Referer. "null"
    is an opaque origin (a sandbox, a file://) and names no host."""
    for header in (origin, referer):
        if header and header != "null":
            return header
    return None


def header_host(header: str | None) -> str | None:
    if header is None:
        return None
    try:
        return urlsplit(header).hostname or None
    except ValueError:
        return None


class AllowedDomain:
    """HTTP 403, -32000 when the key may not be used from the request's page.

    A (key, page) pair that passed is remembered until the next snapshot: a browser dApp sends the
    same Origin on every call, and parsing it is most of this stage's cost.
    """

    def __init__(self) -> None:
        self.remembered: PerSnapshot[tuple[int, str | None], bool] = PerSnapshot()

    def run(self, request: RequestContext) -> None:
        access = request.access
        assert access is not None, "ApiKey runs first"
        page = request.page
        remembered = (access.key_id, page)
        if self.remembered.get(request.snapshot, remembered):
            return
        if not domain_allowed(access.allowed_domains, header_host(page)):
            request.refusal = RpcError(
                403, RpcCode.SERVER_ERROR, "this API key is not allowed from this domain"
            )
            return
        if page is None or len(page) <= _MEMO_MAX_CHARS:
            self.remembered.put(request.snapshot, remembered, True)
