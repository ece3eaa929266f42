"""what audits and proofs found of each node, in all: audits passed and failed, answers proven
and refuted, and when each last happened (added to by every router's flush; issue 51)

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 13:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "node_checks",
        sa.Column(
            "node_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("audits_passed", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("audits_failed", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("proofs_checked", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("proofs_failed", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_audit_passed_at", sa.DateTime(), nullable=True),
        sa.Column("last_audit_failed_at", sa.DateTime(), nullable=True),
        sa.Column("last_proof_checked_at", sa.DateTime(), nullable=True),
        sa.Column("last_proof_failed_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.id"],
            name=op.f("fk_node_checks_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_node_checks")),
    )


def downgrade() -> None:
    op.drop_table("node_checks")
