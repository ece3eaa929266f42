"""node URLs stored in their one spelling

Node URLs are now compared and stored normalised (chainrouter/domain/urls.py): scheme and host
in lower case, no default port, `/` for an empty path, unreserved percent-escapes decoded. This
rewrites the URLs stored before. A URL whose normal form another row already has is left as it
was, with a warning: two providers' rows for one machine need a person to decide.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 23:50:00.000000
"""

import logging
import re
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
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


def _normal(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    path = _ESCAPE.sub(_escape, parts.path) or "/"
    return urlunsplit((scheme, netloc, path, _ESCAPE.sub(_escape, parts.query), ""))


def upgrade() -> None:
    connection = op.get_bind()
    for name in ("nodes", "ws_nodes"):
        table = sa.table(name, sa.column("id"), sa.column("url"))
        rows = connection.execute(sa.select(table.c.id, table.c.url).order_by(table.c.id)).all()
        taken = {url for _, url in rows}
        for row_id, url in rows:
            normal = _normal(url)
            if normal is None or normal == url:
                continue
            if normal in taken:
                log.warning(
                    "%s row %s keeps its URL: its normal form belongs to another row", name, row_id
                )
                continue
            connection.execute(sa.update(table).where(table.c.id == row_id).values(url=normal))
            taken.discard(url)
            taken.add(normal)


def downgrade() -> None:
    """The former spellings are not kept: the normal forms stay, which the old code reads too."""
