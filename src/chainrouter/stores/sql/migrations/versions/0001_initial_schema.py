"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 04:23:42.149345
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chain_requests",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("short_name", sa.String(length=100), nullable=True),
        sa.Column("native_currency_name", sa.String(length=100), nullable=True),
        sa.Column("native_currency_decimals", sa.Integer(), nullable=True),
        sa.Column("info_url", sa.String(length=2048), nullable=True),
        sa.Column("icon_url", sa.String(length=2048), nullable=True),
        sa.Column("rpc_urls", sa.JSON(), nullable=False),
        sa.Column("explorer_urls", sa.JSON(), nullable=False),
        sa.Column("requestor_email", sa.String(length=320), nullable=True),
        sa.Column("requestor_name", sa.String(length=200), nullable=True),
        sa.Column("screening", sa.JSON(), nullable=True),
        sa.Column("submitter_ip", sa.String(length=45), nullable=True),
        sa.Column("review_note", sa.Text(), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chain_requests")),
    )
    with op.batch_alter_table("chain_requests", schema=None) as batch_op:
        batch_op.create_index(
            "ix_chain_requests_status_created", ["status", "created_at"], unique=False
        )

    op.create_table(
        "chains",
        sa.Column("chain_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("short_name", sa.String(length=100), nullable=False),
        sa.Column("network", sa.String(length=100), nullable=True),
        sa.Column("vm", sa.String(length=20), server_default="evm", nullable=False),
        sa.Column("native_currency_name", sa.String(length=100), nullable=False),
        sa.Column("native_currency_symbol", sa.String(length=40), nullable=False),
        sa.Column("native_currency_decimals", sa.Integer(), nullable=False),
        sa.Column("info_url", sa.String(length=2048), nullable=True),
        sa.Column("icon", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=20), server_default="active", nullable=False),
        sa.Column("explorers", sa.JSON(), nullable=False),
        sa.Column("public_rpc_urls", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("chain_id > 0", name=op.f("ck_chains_chain_id_positive")),
        sa.CheckConstraint(
            "native_currency_decimals >= 0", name=op.f("ck_chains_decimals_not_negative")
        ),
        sa.PrimaryKeyConstraint("chain_id", name=op.f("pk_chains")),
    )
    op.create_table(
        "customers",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("balance_nano", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_customers")),
        sa.UniqueConstraint("email", name=op.f("uq_customers_email")),
    )
    op.create_table(
        "node_requests",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("vm", sa.String(length=20), server_default="evm", nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=True),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("privacy_policy_url", sa.String(length=2048), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("screening", sa.JSON(), nullable=True),
        sa.Column("submitter_ip", sa.String(length=45), nullable=True),
        sa.Column("review_note", sa.Text(), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_requests")),
    )
    with op.batch_alter_table("node_requests", schema=None) as batch_op:
        batch_op.create_index(
            "ix_node_requests_status_created", ["status", "created_at"], unique=False
        )

    op.create_table(
        "providers",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_providers")),
        sa.UniqueConstraint("slug", name=op.f("uq_providers_slug")),
    )
    op.create_table(
        "api_keys",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("name", sa.String(length=200), server_default="", nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_hint", sa.String(length=20), nullable=False),
        sa.Column("allowed_domains", sa.JSON(), nullable=False),
        sa.Column("routing_strategy", sa.String(length=20), nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.text("(true)"), nullable=False),
        sa.Column(
            "bypass_credit_check", sa.Boolean(), server_default=sa.text("(false)"), nullable=False
        ),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_api_keys_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_customer_id"), ["customer_id"], unique=False)

    op.create_table(
        "credit_ledger",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("amount_nano", sa.BigInteger(), nullable=False),
        sa.Column("balance_after_nano", sa.BigInteger(), nullable=False),
        sa.Column("reference", sa.String(length=200), nullable=True),
        sa.Column("note", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_credit_ledger_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credit_ledger")),
        sa.UniqueConstraint(
            "customer_id", "reference", name=op.f("uq_credit_ledger_customer_id_reference")
        ),
    )
    with op.batch_alter_table("credit_ledger", schema=None) as batch_op:
        batch_op.create_index(
            "ix_credit_ledger_customer_created", ["customer_id", "created_at"], unique=False
        )

    op.create_table(
        "management_tokens",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("token_hint", sa.String(length=20), nullable=False),
        sa.Column("role", sa.String(length=20), server_default="customer", nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_management_tokens_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_management_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_management_tokens_token_hash")),
    )
    with op.batch_alter_table("management_tokens", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_management_tokens_customer_id"), ["customer_id"], unique=False
        )

    op.create_table(
        "plans",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "provider_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("price_nano", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("quota", sa.Numeric(precision=38, scale=9), nullable=True),
        sa.Column("quota_unit", sa.String(length=40), nullable=True),
        sa.Column("overage_price_nano", sa.BigInteger(), nullable=True),
        sa.Column("overage_limit", sa.Numeric(precision=38, scale=9), nullable=True),
        sa.Column("rate_limit_req", sa.Integer(), nullable=True),
        sa.Column("rate_limit_req_interval_sec", sa.Integer(), nullable=True),
        sa.Column("rate_limit_cr_nano", sa.BigInteger(), nullable=True),
        sa.Column("rate_limit_cr_interval_sec", sa.Integer(), nullable=True),
        sa.Column("billing_fixed_day", sa.Integer(), nullable=True),
        sa.Column("billing_interval_days", sa.Integer(), nullable=True),
        sa.Column("billing_anchored_start_date", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("price_nano >= 0", name=op.f("ck_plans_price_not_negative")),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_plans_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plans")),
        sa.UniqueConstraint("provider_id", "name", name=op.f("uq_plans_provider_id_name")),
    )
    op.create_table(
        "provider_customers",
        sa.Column(
            "customer_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column(
            "provider_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_provider_customers_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_provider_customers_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("customer_id", name=op.f("pk_provider_customers")),
    )
    op.create_table(
        "nodes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("plan_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("vm", sa.String(length=20), server_default="evm", nullable=False),
        sa.Column("node_target_type", sa.String(length=40), server_default="full", nullable=False),
        sa.Column("rate_limit", sa.Integer(), server_default="0", nullable=False),
        sa.Column("rate_limit_interval_sec", sa.Integer(), server_default="1", nullable=False),
        sa.Column("source", sa.String(length=40), server_default="provider", nullable=False),
        sa.Column("status", sa.String(length=40), server_default="healthy", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("rate_limit >= 0", name=op.f("ck_nodes_rate_limit_not_negative")),
        sa.CheckConstraint("rate_limit_interval_sec > 0", name=op.f("ck_nodes_interval_positive")),
        sa.ForeignKeyConstraint(
            ["chain_id"], ["chains.chain_id"], name=op.f("fk_nodes_chain_id_chains")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_nodes_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("url", name=op.f("uq_nodes_url")),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_nodes_chain_id"), ["chain_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_nodes_plan_id"), ["plan_id"], unique=False)

    op.create_table(
        "plan_methods",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("plan_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("method", sa.String(length=100), nullable=False),
        sa.Column("vm", sa.String(length=20), nullable=False),
        sa.Column("node_target_type", sa.String(length=40), nullable=False),
        sa.Column("cost_nano", sa.BigInteger(), nullable=False),
        sa.Column("rate_limit", sa.Integer(), nullable=True),
        sa.Column("rate_limit_interval_sec", sa.Integer(), nullable=True),
        sa.Column("chain_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("cost_nano >= 0", name=op.f("ck_plan_methods_cost_not_negative")),
        sa.ForeignKeyConstraint(
            ["chain_id"], ["chains.chain_id"], name=op.f("fk_plan_methods_chain_id_chains")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["plans.id"],
            name=op.f("fk_plan_methods_plan_id_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_methods")),
    )
    with op.batch_alter_table("plan_methods", schema=None) as batch_op:
        batch_op.create_index(
            "uq_plan_methods_all_chains_row",
            ["plan_id", "vm", "method", "node_target_type"],
            unique=True,
            sqlite_where=sa.text("chain_id IS NULL"),
            postgresql_where=sa.text("chain_id IS NULL"),
        )
        batch_op.create_index(
            "uq_plan_methods_chain_row",
            ["plan_id", "vm", "method", "node_target_type", "chain_id"],
            unique=True,
            sqlite_where=sa.text("chain_id IS NOT NULL"),
            postgresql_where=sa.text("chain_id IS NOT NULL"),
        )

    op.create_table(
        "usage_aggregates",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "customer_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "api_key_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("method", sa.String(length=100), nullable=False),
        sa.Column("scenario", sa.String(length=40), nullable=False),
        sa.Column("bucket_start", sa.DateTime(), nullable=False),
        sa.Column("request_count", sa.BigInteger(), nullable=False),
        sa.Column("credits_nano", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_key_id"],
            ["api_keys.id"],
            name=op.f("fk_usage_aggregates_api_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name=op.f("fk_usage_aggregates_customer_id_customers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_aggregates")),
        sa.UniqueConstraint(
            "customer_id",
            "api_key_id",
            "chain_id",
            "method",
            "scenario",
            "bucket_start",
            name=op.f(
                "uq_usage_aggregates_customer_id_api_key_id_chain_id_method_scenario_bucket_start"
            ),
        ),
    )
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.create_index(
            "ix_usage_aggregates_customer_bucket", ["customer_id", "bucket_start"], unique=False
        )

    op.create_table(
        "ws_nodes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("plan_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("status", sa.String(length=40), server_default="healthy", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chain_id"], ["chains.chain_id"], name=op.f("fk_ws_nodes_chain_id_chains")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_ws_nodes_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ws_nodes")),
        sa.UniqueConstraint("url", name=op.f("uq_ws_nodes_url")),
    )
    with op.batch_alter_table("ws_nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ws_nodes_chain_id"), ["chain_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_ws_nodes_plan_id"), ["plan_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("ws_nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ws_nodes_plan_id"))
        batch_op.drop_index(batch_op.f("ix_ws_nodes_chain_id"))

    op.drop_table("ws_nodes")
    with op.batch_alter_table("usage_aggregates", schema=None) as batch_op:
        batch_op.drop_index("ix_usage_aggregates_customer_bucket")

    op.drop_table("usage_aggregates")
    with op.batch_alter_table("plan_methods", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_plan_methods_chain_row",
            sqlite_where=sa.text("chain_id IS NOT NULL"),
            postgresql_where=sa.text("chain_id IS NOT NULL"),
        )
        batch_op.drop_index(
            "uq_plan_methods_all_chains_row",
            sqlite_where=sa.text("chain_id IS NULL"),
            postgresql_where=sa.text("chain_id IS NULL"),
        )

    op.drop_table("plan_methods")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_nodes_plan_id"))
        batch_op.drop_index(batch_op.f("ix_nodes_chain_id"))

    op.drop_table("nodes")
    op.drop_table("provider_customers")
    op.drop_table("plans")
    with op.batch_alter_table("management_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_management_tokens_customer_id"))

    op.drop_table("management_tokens")
    with op.batch_alter_table("credit_ledger", schema=None) as batch_op:
        batch_op.drop_index("ix_credit_ledger_customer_created")

    op.drop_table("credit_ledger")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_customer_id"))

    op.drop_table("api_keys")
    op.drop_table("providers")
    with op.batch_alter_table("node_requests", schema=None) as batch_op:
        batch_op.drop_index("ix_node_requests_status_created")

    op.drop_table("node_requests")
    op.drop_table("customers")
    op.drop_table("chains")
    with op.batch_alter_table("chain_requests", schema=None) as batch_op:
        batch_op.drop_index("ix_chain_requests_status_created")

    op.drop_table("chain_requests")
