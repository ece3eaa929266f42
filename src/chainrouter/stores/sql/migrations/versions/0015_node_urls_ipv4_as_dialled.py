"""node URLs whose host is an IPv4 address in a short spelling, stored dotted

Node URLs are now normalised with an IPv4 address written as the resolver also reads one
(`127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `2130706433`) in its dotted spelling, and a host name
whose labels hold anything but letters, digits, `-` and `_` refused (chainrouter/domain/urls.py).
This rewrites the URLs stored before in a short spelling. As in 0005 and 0012, a URL whose new
form another row already has is left as it was, with a warning, for a person to settle; so is
a host the new rule refuses (it cannot be dialled: its screening failed).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 00:30:00.000000
"""

import logging
import re
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")

# The rule as it stood when this revision was written; a revision must not change with the code.
_IPV4_LIKE = re.compile(r"[0-9a-fx.]+")
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")


def _respelled(url: str) -> tuple[str | None, bool]:
    """The URL with a short IPv4 host dotted (None: unchanged), and whether its host is refused
    now. URLs stored since 0012 are in their normal form but for these two rules."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host.startswith("[") or ":" in host:  # IPv6: unchanged
        return None, False
    dotted = None
    if _IPV4_LIKE.fullmatch(host):
        try:
            dotted = socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            dotted = None
    if dotted is None or dotted == host:
        refused = dotted is None and not all(_LABEL.fullmatch(label) for label in host.split("."))
        return None, refused
    netloc = dotted if parts.port is None else f"{dotted}:{parts.port}"
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")), False


def upgrade() -> None:
    connection = op.get_bind()
    for name in ("nodes", "ws_nodes"):
        table = sa.table(name, sa.column("id"), sa.column("url"))
        rows = connection.execute(sa.select(table.c.id, table.c.url).order_by(table.c.id)).all()
        taken = {url for _, url in rows}
        for row_id, url in rows:
            try:
                normal, refused = _respelled(url)
            except ValueError:  # a port out of range: not a URL the router could dial
                normal, refused = None, True
            if refused:
                log.warning("%s row %s keeps its URL: its host is no host name", name, row_id)
            if normal is None:
                continue
            if normal in taken:
                log.warning("%s row %s keeps its URL: another row has its form", name, row_id)
                continue
            connection.execute(sa.update(table).where(table.c.id == row_id).values(url=normal))
            taken.discard(url)
            taken.add(normal)


def downgrade() -> None:
    """The former spellings are not kept: the new forms stay, which the old code reads too."""
