"""what routers' health checks last saw of each WebSocket node

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 23:55:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ws_node_health",
        sa.Column(
            "ws_node_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("in_sync", sa.Boolean(), nullable=False),
        sa.Column("head_block", sa.BigInteger(), nullable=True),
        sa.Column("latency_ms", sa.Numeric(precision=12, scale=3), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("checked_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ws_node_id"],
            ["ws_nodes.id"],
            name=op.f("fk_ws_node_health_ws_node_id_ws_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ws_node_id", name=op.f("pk_ws_node_health")),
    )


def downgrade() -> None:
    op.drop_table("ws_node_health")
