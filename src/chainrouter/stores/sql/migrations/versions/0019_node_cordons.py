"""cordons: a node outvoted by an audit (or failing a proof) is `cordoned`, with its reason and
when; what was disputed of its answers; until when it is watched (audited at the higher rate)

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD COLUMN, not batch mode (as 0017): literal defaults keep it possible on SQLite.


def upgrade() -> None:
    op.add_column("nodes", sa.Column("cordon_reason", sa.Text(), nullable=True))
    op.add_column("nodes", sa.Column("cordoned_at", sa.DateTime(), nullable=True))
    op.add_column("nodes", sa.Column("watched_until", sa.DateTime(), nullable=True))
    op.add_column(
        "nodes",
        sa.Column("disputed_calls", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.add_column(
        "nodes",
        sa.Column("disputed_nano", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    for column in ("disputed_nano", "disputed_calls", "watched_until", "cordoned_at"):
        op.drop_column("nodes", column)
    op.drop_column("nodes", "cordon_reason")
