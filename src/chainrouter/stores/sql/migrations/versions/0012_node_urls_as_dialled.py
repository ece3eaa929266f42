"""node URLs stored in the spelling the client dials

Node URLs are now normalised as the HTTP client reads them (chainrouter/domain/urls.py): dot
segments resolved, an internationalised host in its IDNA form without a trailing dot, an IP
address in its one spelling (an IPv4-mapped IPv6 address as IPv4, IPv6 compressed). This
rewrites the URLs stored before. As in 0005, a URL whose new form another row already has, or
whose host is no host name, is left as it was, with a warning, for a person to settle.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 05:50:00.000000
"""

import ipaddress
import logging
import re
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from alembic import op
from yarl import URL

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")

# The rule as it stood when this revision was written; a revision must not change with the code.
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _escape(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return character if character in _UNRESERVED else "%" + match.group(1).upper()


def _host(raw: str) -> str:
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        name = raw.lower().rstrip(".")
        if not name or len(name) > 253:
            raise ValueError("no host name") from None
        if any(not 0 < len(label) <= 63 for label in name.split(".")):
            raise ValueError("a host name's labels are 1 to 63 characters") from None
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _normal(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        scheme, port = parts.scheme.lower(), parts.port
        dialled = URL(url)
        host = _host(dialled.raw_host or "")
    except (UnicodeError, ValueError):
        return None
    if scheme not in _DEFAULT_PORTS:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    path = _ESCAPE.sub(_escape, dialled.raw_path) or "/"
    return urlunsplit((scheme, netloc, path, _ESCAPE.sub(_escape, parts.query), ""))


def upgrade() -> None:
    connection = op.get_bind()
    for name in ("nodes", "ws_nodes"):
        table = sa.table(name, sa.column("id"), sa.column("url"))
        rows = connection.execute(sa.select(table.c.id, table.c.url).order_by(table.c.id)).all()
        taken = {url for _, url in rows}
        for row_id, url in rows:
            normal = _normal(url)
            if normal == url:
                continue
            if normal is None or normal in taken:
                log.warning(
                    "%s row %s keeps its URL: %s",
                    name,
                    row_id,
                    "its host is no host name" if normal is None else "another row has its form",
                )
                continue
            connection.execute(sa.update(table).where(table.c.id == row_id).values(url=normal))
            taken.discard(url)
            taken.add(normal)


def downgrade() -> None:
    """The former spellings are not kept: the new forms stay, which the old code reads too."""
