"""node capabilities: declared and verified on the node, as routers know them in its health

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 01:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("capabilities", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("verified_capabilities", sa.JSON(), nullable=True))
    with op.batch_alter_table("node_health", schema=None) as batch_op:
        batch_op.add_column(sa.Column("capabilities", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("node_health", schema=None) as batch_op:
        batch_op.drop_column("capabilities")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("verified_capabilities")
        batch_op.drop_column("capabilities")
