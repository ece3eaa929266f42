"""config version counter

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 05:03:51.852080
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "config_version",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_config_version_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_config_version")),
    )
    op.bulk_insert(
        table, [{"id": 1, "version": 0, "changed_at": datetime.now(UTC).replace(tzinfo=None)}]
    )


def downgrade() -> None:
    op.drop_table("config_version")
