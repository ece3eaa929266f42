"""buying credits: payment settings, deposit assets, addresses, deposits, cursors, card payments

The operator file's `payments` section (the deposit key, the assets accepted per chain, the card
checkout's bounds), the deposit address shown to each customer, every deposit found on chain and
its state, each watched chain's progress, and the Stripe Checkout sessions made for customers
(docs/billing.md).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 05:35:03.941494
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deposit_cursors",
        sa.Column("chain_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("asset", sa.String(length=42), nullable=False),
        sa.Column("next_block", sa.BigInteger(), nullable=False),
        sa.Column("head_block", sa.BigInteger(), nullable=True),
        sa.Column("final_block", sa.BigInteger(), nullable=True),
        sa.Column("checked_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "asset", name=op.f("pk_deposit_cursors")),
    )
    op.create_table(
        "payment_settings",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("deposit_xpub", sa.String(length=200), nullable=True),
        sa.Column("card_min_credits_nano", sa.BigInteger(), nullable=True),
        sa.Column("card_max_credits_nano", sa.BigInteger(), nullable=True),
        sa.Column("card_success_url", sa.String(length=2048), nullable=True),
        sa.Column("card_cancel_url", sa.String(length=2048), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_payment_settings_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_settings")),
    )
    op.create_table(
        "card_payments",
        sa.Column("session_id", sa.String(length=255), autoincrement=False, nullable=False),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("credits_nano", sa.BigInteger(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("payment_intent", sa.String(length=255), nullable=True),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("ledger_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_card_payments_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_card_payments")),
    )
    with op.batch_alter_table("card_payments", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_card_payments_customer_id"), ["customer_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_card_payments_payment_intent"), ["payment_intent"], unique=False
        )

    op.create_table(
        "deposit_addresses",
        sa.Column("address", sa.String(length=42), autoincrement=False, nullable=False),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("xpub", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_deposit_addresses_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("address", name=op.f("pk_deposit_addresses")),
        sa.UniqueConstraint(
            "xpub", "customer_id", name=op.f("uq_deposit_addresses_xpub_customer_id")
        ),
    )
    with op.batch_alter_table("deposit_addresses", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_deposit_addresses_customer_id"), ["customer_id"], unique=False
        )

    op.create_table(
        "deposit_assets",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("asset", sa.String(length=42), nullable=False),
        sa.Column("symbol", sa.String(length=40), server_default="", nullable=False),
        sa.Column("credits_per_unit", sa.String(length=80), nullable=False),
        sa.Column("decimals", sa.Integer(), nullable=True),
        sa.Column("confirmations", sa.Integer(), nullable=True),
        sa.Column("minimum", sa.String(length=80), server_default="0", nullable=False),
        sa.Column("start_block", sa.BigInteger(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("(true)"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chain_id"], ["chains.chain_id"], name=op.f("fk_deposit_assets_chain_id_chains")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deposit_assets")),
        sa.UniqueConstraint("chain_id", "asset", name=op.f("uq_deposit_assets_chain_id_asset")),
    )
    op.create_table(
        "deposits",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("asset", sa.String(length=42), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("log_index", sa.Integer(), nullable=False),
        sa.Column("block_number", sa.BigInteger(), nullable=False),
        sa.Column("block_hash", sa.String(length=66), nullable=False),
        sa.Column("sender", sa.String(length=42), nullable=False),
        sa.Column("recipient", sa.String(length=42), nullable=False),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("amount", sa.String(length=80), nullable=False),
        sa.Column("decimals", sa.Integer(), nullable=False),
        sa.Column("credits_nano", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("ledger_id", sa.BigInteger(), nullable=True),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.Column("final_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_deposits_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deposits")),
        sa.UniqueConstraint(
            "chain_id", "tx_hash", "log_index", name=op.f("uq_deposits_chain_id_tx_hash_log_index")
        ),
    )
    with op.batch_alter_table("deposits", schema=None) as batch_op:
        batch_op.create_index("ix_deposits_chain_id_state", ["chain_id", "state"], unique=False)
        batch_op.create_index(batch_op.f("ix_deposits_customer_id"), ["customer_id"], unique=False)
        batch_op.create_index("ix_deposits_customer_id_id", ["customer_id", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("deposits", schema=None) as batch_op:
        batch_op.drop_index("ix_deposits_customer_id_id")
        batch_op.drop_index(batch_op.f("ix_deposits_customer_id"))
        batch_op.drop_index("ix_deposits_chain_id_state")

    op.drop_table("deposits")
    op.drop_table("deposit_assets")
    with op.batch_alter_table("deposit_addresses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deposit_addresses_customer_id"))

    op.drop_table("deposit_addresses")
    with op.batch_alter_table("card_payments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_payments_payment_intent"))
        batch_op.drop_index(batch_op.f("ix_card_payments_customer_id"))

    op.drop_table("card_payments")
    op.drop_table("payment_settings")
    op.drop_table("deposit_cursors")
