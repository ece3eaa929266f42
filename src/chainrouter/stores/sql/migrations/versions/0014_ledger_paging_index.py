"""credit_ledger: an index on (customer_id, id) for the newest-first pages of a customer's ledger

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 11:00:00.000000

A ledger page is a customer's rows newest first, by id, from `before_id` down: with this index
it is read in order and stops at the page's end, where (customer_id, created_at) made it read and
sort every row of the customer (one per usage flush: thousands a day).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_credit_ledger_customer_id", "credit_ledger", ["customer_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_credit_ledger_customer_id", table_name="credit_ledger")
