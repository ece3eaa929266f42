"""The outbound guard: the only way the service dials a URL someone else gave it.

- Schemes are allow-listed per use (submissions: https only).
- Addresses are checked when the connection is made, not when the URL is read: the resolver
  that the HTTP client connects with refuses every name that resolves to a loopback, private,
  link-local, unique-local, multicast, reserved or otherwise non-global address (IPv4-mapped
  IPv6 included), so a name that changes its answer between a check and the dial (DNS
  rebinding) cannot slip through. IP literals, which skip the resolver, are checked up front;
  decimal, octal and hex spellings of IPv4 are names to the parser and reach the resolver.
- Redirects are never followed, proxies from the environment are never used, and every request
  has a total time limit and a response size limit.

`allow_private` (the `outbound_allow_private` setting) lifts the address check for tests and
development only.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from yarl import URL

from chainrouter.net.client_ip import IpNetwork
from chainrouter.net.outbound import (
    CheckingResolver,
    DialRule,
    failure_text,
    refusing_redirects,
    ssl_context,
    url_origin,
)

log = logging.getLogger(__name__)


class OutboundError(Exception):
    """Why a URL could not be used; the message is shown to whoever submitted the URL."""


def unreachable(url: object, exc: BaseException) -> str:
    """What the submitter is told of a failed connection: that it failed, not how. The detail
    (addresses, ports, the service's own DNS answers) goes to the log only."""
    log.info("cannot reach %s: %s", url_origin(str(url)), failure_text(exc))
    return "not reachable"


@dataclass(frozen=True, slots=True)
class OutboundPolicy:
    timeout_s: float = 8.0
    max_response_bytes: int = 1024 * 1024
    allow_private: bool = False
    ca_file: Path | None = None
    trusted_networks: tuple[IpNetwork, ...] = ()

    @property
    def rule(self) -> DialRule:
        return DialRule(allow_private=self.allow_private, trusted_networks=self.trusted_networks)


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address behind a decimal, octal, hex or shortened IPv4 spelling (`2130706433`,
    `0x7f000001`, `127.1`), which resolvers accept; None for anything else."""
    if not host or host.strip("0123456789abcdefxABCDEFX.") or ":" in host:
        return None
    try:
        packed = socket.inet_aton(host)
    except OSError:
        return None
    address = ipaddress.IPv4Address(packed)
    return None if str(address) == host else address


class OutboundGuard:
    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy
        self._ssl = ssl_context(policy.ca_file)

    def check_url(self, url: str, schemes: frozenset[str]) -> URL:
        """Parse and check what can be checked before dialling: scheme, host, IP literals."""
        try:
            parsed = URL(url)
        except (ValueError, TypeError):
            raise OutboundError("is not a valid URL") from None
        if parsed.scheme not in schemes:
            allowed = " or ".join(sorted(f"{s}://" for s in schemes))
            raise OutboundError(f"must start with {allowed}")
        host = parsed.host
        if not host:
            raise OutboundError("has no host")
        if parsed.user is not None or parsed.password is not None:
            raise OutboundError("must not carry a user name or password")
        legacy = _legacy_ipv4(host)
        if legacy is not None:
            problem = self.policy.rule.problem(legacy)
            reason = f"{host} means {legacy}" + (f", {problem}" if problem else "")
            raise OutboundError(f"{reason}; write IPv4 addresses in dotted-decimal form")
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return parsed
        problem = self.policy.rule.problem(literal)
        if problem is not None:
            raise OutboundError(f"{host} is {problem}")
        return parsed

    @asynccontextmanager
    async def session(self) -> AsyncIterator[GuardedSession]:
        resolver = CheckingResolver(self.policy.rule)
        connector = aiohttp.TCPConnector(
            resolver=resolver, ssl=self._ssl, force_close=True, limit=4, use_dns_cache=False
        )
        timeout = aiohttp.ClientTimeout(total=self.policy.timeout_s)
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            trust_env=False,
            auto_decompress=True,
            trace_configs=[refusing_redirects(_redirect_refused)],
        ) as session:
            yield GuardedSession(session, resolver, self.policy)


def _redirect_refused(status: int) -> OutboundError:
    return OutboundError(f"answered HTTP {status}; redirects are not followed")


class GuardedSession:
    def __init__(
        self, session: aiohttp.ClientSession, resolver: CheckingResolver, policy: OutboundPolicy
    ) -> None:
        self._session = session
        self._resolver = resolver
        self._policy = policy

    async def post_json(self, url: URL, body: bytes) -> bytes:
        """POST a JSON body; the 2xx answer's bytes, or `OutboundError` saying what went wrong."""
        try:
            async with self._session.post(
                url,
                data=body,
                headers={"content-type": "application/json", "accept": "application/json"},
                allow_redirects=False,
            ) as response:
                if 300 <= response.status < 400:
                    raise OutboundError(
                        f"answered HTTP {response.status}; redirects are not followed"
                    )
                if response.status >= 400:
                    raise OutboundError(f"answered HTTP {response.status}")
                return await self._read_bounded(response)
        except TimeoutError:
            raise OutboundError(f"did not answer within {self._policy.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise OutboundError(self._resolver.refusal or unreachable(url, exc)) from None
        except aiohttp.ClientError as exc:
            raise OutboundError(unreachable(url, exc)) from None

    async def _read_bounded(self, response: aiohttp.ClientResponse) -> bytes:
        limit = self._policy.max_response_bytes
        if response.content_length is not None and response.content_length > limit:
            raise OutboundError(f"answer larger than {limit} bytes")
        chunks = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise OutboundError(f"answer larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    @property
    def aiohttp_session(self) -> aiohttp.ClientSession:
        """For WebSocket dials, which go through the same checking resolver."""
        return self._session

    @property
    def refusal(self) -> str | None:
        return self._resolver.refusal
