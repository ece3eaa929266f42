"""a method's next price and when it applies: a provider's price rise gives notice (issue 52)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, as 0017: nullable columns, nothing to copy.


def upgrade() -> None:
    op.add_column("plan_methods", sa.Column("next_cost_nano", sa.BigInteger(), nullable=True))
    op.add_column("plan_methods", sa.Column("next_cost_from", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("plan_methods", "next_cost_from")
    op.drop_column("plan_methods", "next_cost_nano")
