"""plan_hourly_usage: plan use by hour, summed per billing cycle when read

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 08:20:00.000000

Kept per cycle (`plan_cycle_usage`, keyed by the cycle's start under the terms of the day), a
plan's use restarted from nothing when its billing terms changed. Each row moves as it is: the
use of a cycle, at the cycle's start, which the new reading counts into the cycle holding that
moment.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _table(name: str, time_column: str) -> None:
    op.create_table(
        name,
        sa.Column(
            "plan_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column(time_column, sa.DateTime(), nullable=False),
        sa.Column("request_count", sa.BigInteger(), nullable=False),
        sa.Column("credits_nano", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f(f"fk_{name}_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("plan_id", time_column, name=op.f(f"pk_{name}")),
    )


def upgrade() -> None:
    _table("plan_hourly_usage", "hour")
    op.execute(
        "INSERT INTO plan_hourly_usage (plan_id, hour, request_count, credits_nano) "
        "SELECT plan_id, cycle_start, request_count, credits_nano FROM plan_cycle_usage"
    )
    op.drop_table("plan_cycle_usage")


def downgrade() -> None:
    # The hours go back as they are: the old reading finds a cycle's use only at its start, so
    # a downgraded router sees the current cycles' use as it was at migration, not since.
    _table("plan_cycle_usage", "cycle_start")
    op.execute(
        "INSERT INTO plan_cycle_usage (plan_id, cycle_start, request_count, credits_nano) "
        "SELECT plan_id, hour, request_count, credits_nano FROM plan_hourly_usage"
    )
    op.drop_table("plan_hourly_usage")
