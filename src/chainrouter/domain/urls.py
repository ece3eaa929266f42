"""One spelling per node URL, so that a URL cannot be claimed twice by writing it another way.

`http://Node.Example:80` and `http://node.example/` are the same node; so are `%7e` and `~` in a
path. Node URLs are compared and stored in their normal form (docs/security.md):

- scheme and host in lower case, the host as the client dials it: an internationalised name
  in its IDNA (punycode) form, without a trailing dot; an IP address in its one normal
  spelling (an IPv4 address written as IPv6, `::ffff:a.b.c.d`, as IPv4; one written as the
  resolver also reads it, `127.1`, `0x7f.0.0.1`, `0177.0.0.1` or `2130706433`, dotted; IPv6
  compressed, in brackets); a name that is not one (an empty or too long label, a character
  other than a letter, digit, `-` or `_`) refused;
- the scheme's default port dropped (80 for http and ws, 443 for https and wss);
- an empty path written `/`; any other path with its dot segments (`/./`, `/a/../`) resolved,
  a trailing slash kept (`/v1/` and `/v1` are different resources in HTTP);
- percent-escapes of unreserved characters (letters, digits, `-._~`) decoded, the others in
  upper case; the query kept as written; the fragment, which never reaches a server, dropped;
- credentials (`user:pass@`) kept as written: they are case-sensitive.

Who owns a node goes by its identity (`url_identity`): the normal form without credentials,
query or fragment, which is what a connection reaches (scheme, host, port, path); a provider
cannot claim another's node by adding `?mine`. Providers may not put credentials in a node URL
at all (`refuse_userinfo`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit, urlunsplit

from yarl import URL

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# A label of a name the resolver is asked for: letters, digits, `-` and, as some private zones
# use it, `_` (an internationalised name is in its ASCII form by then).
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
# What may be an IPv4 address in one of the spellings the resolver (inet_aton) takes.
_IPV4_LIKE = re.compile(r"[0-9a-fx.]+")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _normal_escape(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return character if character in _UNRESERVED else "%" + match.group(1).upper()


def normalise_url(url: str) -> str:
    """The normal form of an absolute http(s) or ws(s) URL; ValueError if it is not one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an absolute http(s) or ws(s) URL with a host")
    port = parts.port  # ValueError for a port out of range
    try:
        dialled = URL(url)  # what the HTTP client makes of it: IDNA, dot segments resolved
        host = _host(dialled.raw_host or "")
    except (UnicodeError, ValueError) as exc:
        raise ValueError(f"the host is not a valid host name: {exc}") from exc
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    userinfo, _, _ = parts.netloc.rpartition("@")
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    path = _ESCAPE.sub(_normal_escape, dialled.raw_path) or "/"
    query = _ESCAPE.sub(_normal_escape, parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))


def url_identity(url: str) -> str:
    """The node a normal-form URL (`normalise_url`) reaches: scheme, host, port and path, without
    credentials or query, which change what is asked of the node, not which node it is."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def refuse_userinfo(url: str) -> str:
    """`url` unchanged; ValueError if it carries credentials (`user:pass@`)."""
    if "@" in urlsplit(url).netloc:
        raise ValueError(
            "credentials (user:password@) are not accepted in a node URL; put an access key in "
            "the path or the query"
        )
    return url


def _host(raw: str) -> str:
    """A host's one spelling: an IP address's normal form, else the name in lower case without
    a trailing dot (as the client encodes it: punycode), refused unless every label is 1 to 63
    letters, digits, `-` or `_`. A label that is not valid punycode fails where it is resolved
    (screening)."""
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        name = raw.lower().rstrip(".")
        address_spelled = _ipv4_shorthand(name)
        if address_spelled is not None:
            return address_spelled
        if not name or len(name) > 253:
            raise ValueError("a host name of 1 to 253 characters") from None
        if not all(_LABEL.fullmatch(label) for label in name.split(".")):
            raise ValueError(
                "a host name's labels are 1 to 63 letters, digits, '-' or '_'"
            ) from None
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _ipv4_shorthand(name: str) -> str | None:
    """The dotted spelling of an IPv4 address written as the resolver also reads one (fewer
    parts, octal, hexadecimal, one number), which it dials without asking DNS; else None."""
    if not _IPV4_LIKE.fullmatch(name):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(name))
    except OSError:
        return None
