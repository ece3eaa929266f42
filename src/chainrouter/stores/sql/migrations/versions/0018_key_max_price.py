"""a key's most a call may cost (issue 52)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28 10:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, as 0017: a batch would copy and drop `api_keys` on SQLite.


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column("max_price_per_call_nano", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("api_keys", "max_price_per_call_nano")
