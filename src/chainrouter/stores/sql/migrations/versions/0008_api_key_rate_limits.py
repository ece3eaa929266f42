"""each API key may carry its own request rate limit (0: none)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, not batch mode: on SQLite a batch would copy and drop `api_keys`, and
# dropping it deletes every usage row that references a key (ON DELETE CASCADE). Literal
# defaults keep ADD COLUMN possible there; DROP COLUMN needs SQLite 3.35 (2021).


def upgrade() -> None:
    op.add_column(
        "api_keys", sa.Column("rate_limit", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "api_keys",
        sa.Column("rate_limit_interval_sec", sa.Integer(), server_default="1", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("api_keys", "rate_limit_interval_sec")
    op.drop_column("api_keys", "rate_limit")
