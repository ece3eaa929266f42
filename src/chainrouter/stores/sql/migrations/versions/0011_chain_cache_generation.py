"""chains.cache_generation: the response cache's purges per chain

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 01:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN, in SQLite too: a batch copy of `chains` would drop the table that
    # nodes and prices refer to.
    op.add_column(
        "chains", sa.Column("cache_generation", sa.Integer(), server_default="0", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("chains", "cache_generation")
