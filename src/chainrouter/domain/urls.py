"""One spelling per node URL, so that a URL cannot be claimed twice by writing it another way.

`http://Node.Example:80` and `http://node.example/` are the same node; so are `%7e` and `~` in a
path. Node URLs are compared and stored in their normal form (docs/security.md):

- scheme and host in lower case; an IPv6 host in brackets, as written;
- the scheme's default port dropped (80 for http and ws, 443 for https and wss);
- an empty path written `/`; any other path as written, a trailing slash included (`/v1/` and
  `/v1` are different resources in HTTP);
- percent-escapes of unreserved characters (letters, digits, `-._~`) decoded, the others in
  upper case; the query kept as written; the fragment, which never reaches a server, dropped;
- credentials (`user:pass@`) kept as written: they are case-sensitive.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
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
    host = parts.hostname  # lower case, without brackets
    port = parts.port  # ValueError for a port out of range
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    userinfo, _, _ = parts.netloc.rpartition("@")
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    path = _ESCAPE.sub(_normal_escape, parts.path) or "/"
    query = _ESCAPE.sub(_normal_escape, parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))
