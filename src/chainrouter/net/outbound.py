"""Which addresses the service may dial for others: the one rule, for screening and routing.

A URL someone else gave the service (a node's, a submitted chain's) may name any host, and a
name may resolve to anything, differently from one moment to the next (DNS rebinding). So the
rule is applied to the addresses a connection is really made to, whenever one is made: by the
screening's resolver and by both executors' clients to nodes (docs/security.md).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from chainrouter.net.client_ip import IpNetwork, parse_networks

log = logging.getLogger(__name__)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # translated IPv4, e.g. 64:ff9b::7f00:1


def address_problem(address: IpAddress) -> str | None:
    """Why the service must not dial `address`; None for a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            problem = address_problem(embedded)
            return None if problem is None else f"{problem} (inside an IPv6 address)"
    for test, name in (
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_private, "a private address"),
        (address.is_multicast, "a multicast address"),
        (address.is_unspecified, "an unspecified address"),
        (address.is_reserved, "a reserved address"),
    ):
        if test:
            return name
    if not address.is_global:
        return "not a public address"
    return None


def ssl_context(ca_file: Path | None) -> ssl.SSLContext:
    """What `https://` and `wss://` peers are verified against: the system's CAs, plus `ca_file`
    when given (`CHAINROUTER_OUTBOUND_CA_FILE`, a private CA of the operator's nodes)."""
    context = ssl.create_default_context()
    if ca_file is not None:
        context.load_verify_locations(cafile=str(ca_file))
    return context


def dial_rule(*, allow_private: bool, trusted_networks: Sequence[str]) -> DialRule:
    """The rule the settings ask for (`outbound_allow_private`, `outbound_trusted_networks`)."""
    if allow_private:
        log.warning(
            "outbound_allow_private is ON: loopback, private and link-local addresses may be "
            "dialled for others. This is for tests and development only."
        )
    return DialRule(allow_private=allow_private, trusted_networks=parse_networks(trusted_networks))


class DialRule:
    """Public addresses, and those of the networks the operator trusts (its own nodes on a
    private network: `CHAINROUTER_OUTBOUND_TRUSTED_NETWORKS`). `allow_private` lifts the rule,
    for tests and development only."""

    def __init__(
        self, *, allow_private: bool = False, trusted_networks: Sequence[IpNetwork] = ()
    ) -> None:
        self.allow_private = allow_private
        self._trusted = tuple(trusted_networks)

    @property
    def checks(self) -> bool:
        """Whether any address can be refused at all."""
        return not self.allow_private

    def problem(self, address: IpAddress) -> str | None:
        """Why `address` must not be dialled; None when it may."""
        if self.allow_private or any(address in network for network in self._trusted):
            return None
        return address_problem(address)

    def problem_of(self, text: str) -> str | None:
        """The same for an address written as text (what the native client hands in)."""
        try:
            address = ipaddress.ip_address(text.split("%", 1)[0])  # without an IPv6 zone
        except ValueError:
            return "not an IP address"
        return self.problem(address)


class CheckingResolver(AbstractResolver):
    """Resolves like the system does, then refuses the name if any answer breaks `rule`."""

    def __init__(self, rule: DialRule) -> None:
        self._inner = ThreadedResolver()
        self._rule = rule
        self.refusal: str | None = None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            results = await self._inner.resolve(host, port, family)
        except (UnicodeError, ValueError) as exc:  # not a name (an empty or too long label)
            raise OSError(f"{host[:100]!r} is not a host name: {exc}") from exc
        if self._rule.checks:
            for result in results:
                problem = self._rule.problem(ipaddress.ip_address(result["host"]))
                if problem is not None:
                    # The caller learns the kind of address, never the address itself: the
                    # service's own view of DNS is not theirs to map.
                    self.refusal = f"{host} resolves to {problem}"
                    log.info("refused %s: it resolves to %s, %s", host, result["host"], problem)
                    raise OSError(self.refusal)
        return results

    async def close(self) -> None:
        await self._inner.close()


def refusing_redirects(error: Callable[[int], Exception]) -> aiohttp.TraceConfig:
    """A trace that ends a request at its first redirect, raising `error(status)`: a redirect's
    target was never checked, and an IP literal in it skips the checking resolver. For what
    cannot say `allow_redirects=False` (a WebSocket handshake follows redirects)."""

    async def refuse(
        _session: aiohttp.ClientSession,
        _context: object,
        params: aiohttp.TraceRequestRedirectParams,
    ) -> None:
        raise error(params.response.status)

    trace = aiohttp.TraceConfig()
    trace.on_request_redirect.append(refuse)
    return trace


def failure_text(exc: BaseException) -> str:
    """What a failed request to a node says, without the node's URL: providers put their keys
    in paths and queries (`/v3/KEY`, `?apikey=`), and these texts reach logs and health
    details. aiohttp's own texts of a bad status or answer end with the whole URL."""
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"HTTP {exc.status}: {exc.message}" if exc.status else exc.message
    if isinstance(exc, aiohttp.InvalidURL):
        return "invalid URL"
    return str(exc) or type(exc).__name__


def url_origin(url: str) -> str:
    """The URL's scheme, host and port, for logs: its path and query may hold a key."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(a malformed URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
