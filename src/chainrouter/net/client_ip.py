"""The client's IP address, from the socket or, behind a trusted proxy, from X-Forwarded-For."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Sequence[str]) -> list[IpNetwork]:
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


def client_address(peer: str, forwarded_for: str | None, trusted: Sequence[IpNetwork]) -> str:
    """The client's IP: the socket peer, or, when the peer is a trusted proxy, the nearest address
    in X-Forwarded-For that is not itself a trusted proxy (entries further left can be forged)."""
    if not trusted or not forwarded_for or not _is_trusted(peer, trusted):
        return peer
    for hop in reversed([part.strip() for part in forwarded_for.split(",")]):
        if not _is_trusted(hop, trusted):
            return hop if _is_ip(hop) else peer
    return peer


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def in_networks(address: str, networks: Sequence[IpNetwork]) -> bool:
    """Whether `address` (an IP address; anything else is not) lies in one of `networks`."""
    return _is_trusted(address, networks)


def _is_trusted(address: str, trusted: Sequence[IpNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def peer_ip(client: str) -> str:
    """`scope.client` is "host:port"; IPv6 hosts may come bracketed."""
    host = client.rsplit(":", 1)[0] if client.count(":") == 1 or "]" in client else client
    return host.strip("[]")


def client_block(ip: str | None) -> str:
    """What every per-IP limit counts by, the free tier's and the management API's: an IPv4
    address, or an IPv6 address's /64 (one host or site usually has a whole /64, and could
    otherwise take a new address for every call or sign-up); an IPv4 address written as IPv6 as
    the IPv4 address."""
    if not ip or ":" not in ip:
        return ip or ""  # IPv4 (or none): as it is
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
