"""usage flushes written, for idempotent retries of free usage

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 06:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "usage_flushes",
        sa.Column(
            "customer_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("reference", sa.String(length=200), nullable=False),
        sa.Column("written_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_usage_flushes_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("customer_id", "reference", name=op.f("pk_usage_flushes")),
    )
    with op.batch_alter_table("usage_flushes", schema=None) as batch_op:
        batch_op.create_index("ix_usage_flushes_written_at", ["written_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("usage_flushes", schema=None) as batch_op:
        batch_op.drop_index("ix_usage_flushes_written_at")
    op.drop_table("usage_flushes")
