"""what each plan's nodes answered per billing cycle

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 07:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "plan_cycle_usage",
        sa.Column(
            "plan_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("cycle_start", sa.DateTime(), nullable=False),
        sa.Column("request_count", sa.BigInteger(), nullable=False),
        sa.Column("credits_nano", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["plans.id"],
            name=op.f("fk_plan_cycle_usage_plan_id_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("plan_id", "cycle_start", name=op.f("pk_plan_cycle_usage")),
    )


def downgrade() -> None:
    op.drop_table("plan_cycle_usage")
