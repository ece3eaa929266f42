"""a key may ask for verified answers: every provable answer proven before it is served

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, not batch mode (as 0008 and 0017): a batch on SQLite would copy and drop
# `api_keys`, and with it every row that references it.


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column("verified", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("api_keys", "verified")
