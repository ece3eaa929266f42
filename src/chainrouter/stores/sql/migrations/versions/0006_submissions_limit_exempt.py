"""submissions sent with an agent or administrator token are marked, and not counted

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 00:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("chain_requests", "node_requests"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column(
                    "limit_exempt", sa.Boolean(), server_default=sa.text("false"), nullable=False
                )
            )


def downgrade() -> None:
    for table in ("chain_requests", "node_requests"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("limit_exempt")
