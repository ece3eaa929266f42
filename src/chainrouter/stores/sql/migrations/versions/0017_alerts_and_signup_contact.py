"""alerts on a low balance and on a key's daily spend; a sign-up's unverified contact e-mail

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 05:35:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, not batch mode (as 0008): on SQLite a batch would copy and drop the tables,
# and dropping `customers` or `api_keys` deletes every row that references them (ON DELETE
# CASCADE). Literal defaults keep ADD COLUMN possible there.


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column("spend_alert_nano", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.add_column(
        "customers",
        sa.Column("low_balance_alert_nano", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.add_column("customers", sa.Column("contact_email", sa.String(length=320), nullable=True))


def downgrade() -> None:
    op.drop_column("customers", "contact_email")
    op.drop_column("customers", "low_balance_alert_nano")
    op.drop_column("api_keys", "spend_alert_nano")
