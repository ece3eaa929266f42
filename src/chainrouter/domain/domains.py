"""The `allowed_domains` rule of an API key.

An entry is a host name (`app.example.com`), a wildcard for its subdomains (`*.example.com`, which
does not match `example.com` itself), or `*` for any origin. Hosts compare case-insensitively.
"""

from __future__ import annotations

import re

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOST = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
MAX_DOMAIN_LENGTH = 253
ANY_ORIGIN = "*"


def normalise_allowed_domain(entry: str) -> str:
    """Return the canonical form of an `allowed_domains` entry, or raise ValueError saying why."""
    value = entry.strip().lower().rstrip(".")
    if value == ANY_ORIGIN:
        return value
    if "://" in value or "/" in value:
        raise ValueError(f"{entry!r} must be a host name such as app.example.com, not a URL")
    if ":" in value:
        raise ValueError(f"{entry!r} must be a host name without a port")
    host = value.removeprefix("*.")
    if "*" in host:
        raise ValueError(f"{entry!r}: a wildcard is only allowed as a leading '*.' or alone as '*'")
    if len(host) > MAX_DOMAIN_LENGTH or not (_HOST.match(host) or _IPV4.match(host)):
        raise ValueError(f"{entry!r} is not a valid host name")
    return value


def normalise_allowed_domains(entries: list[str]) -> list[str]:
    """Canonical forms of all entries, first occurrence kept when two entries mean the same."""
    return list(dict.fromkeys([normalise_allowed_domain(e) for e in entries]))


def domain_allowed(allowed: tuple[str, ...] | list[str], host: str | None) -> bool:
    """Whether a request whose Origin (else Referer) host is `host` may use the key.

    A request with neither header (`host` None) passes only when the list holds `*`.
    """
    if ANY_ORIGIN in allowed:
        return True
    if not host:
        return False
    host = host.lower().rstrip(".")
    for entry in allowed:
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and len(host) > len(entry) - 1:
                return True
        elif host == entry:
            return True
    return False
