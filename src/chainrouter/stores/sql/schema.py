"""The relational schema, shared by SQLite and PostgreSQL.

Money columns hold integer nano-credits (`*_nano`, BIGINT): exact, and summed by the database
without rounding. Secrets are never stored, only their SHA-256 hex digests (`*_hash`).
Alembic migrations in `migrations/` create this schema; a test checks they agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)


class UtcDateTime(TypeDecorator[datetime]):
    """Timestamps are stored as naive UTC and always come back timezone-aware (UTC).

    SQLite has no time zones; storing naive UTC on both backends keeps comparisons and ordering
    identical everywhere.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# BIGINT primary keys autoincrement on PostgreSQL; SQLite only does so for INTEGER.
IdType = BigInteger().with_variant(Integer(), "sqlite")


def _id() -> Column[int]:
    return Column("id", IdType, primary_key=True, autoincrement=True)


def _timestamps() -> tuple[Column[datetime], Column[datetime]]:
    return (
        Column("created_at", UtcDateTime(), nullable=False, default=utcnow),
        Column("updated_at", UtcDateTime(), nullable=False, default=utcnow, onupdate=utcnow),
    )


chains = Table(
    "chains",
    metadata,
    Column("chain_id", BigInteger, primary_key=True, autoincrement=False),
    Column("name", String(200), nullable=False),
    Column("short_name", String(100), nullable=False),
    Column("network", String(100)),
    Column("vm", String(20), nullable=False, server_default="evm"),
    Column("native_currency_name", String(100), nullable=False),
    Column("native_currency_symbol", String(40), nullable=False),
    Column("native_currency_decimals", Integer, nullable=False),
    Column("info_url", String(2048)),
    Column("icon", String(200)),
    Column("status", String(20), nullable=False, server_default="active"),
    Column("explorers", JSON, nullable=False),
    Column("public_rpc_urls", JSON, nullable=False),
    # Times an administrator purged the routers' cached answers of the chain (docs/cache.md).
    Column("cache_generation", Integer, nullable=False, server_default="0"),
    *_timestamps(),
    CheckConstraint("chain_id > 0", name="chain_id_positive"),
    CheckConstraint("native_currency_decimals >= 0", name="decimals_not_negative"),
)

providers = Table(
    "providers",
    metadata,
    _id(),
    Column("slug", String(64), nullable=False, unique=True),
    Column("name", String(200), nullable=False),
    *_timestamps(),
)

plans = Table(
    "plans",
    metadata,
    _id(),
    Column("provider_id", ForeignKey("providers.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("price_nano", BigInteger, nullable=False, server_default="0"),
    Column("quota", Numeric(38, 9)),
    Column("quota_unit", String(40)),
    Column("overage_price_nano", BigInteger),
    Column("overage_limit", Numeric(38, 9)),
    Column("rate_limit_req", Integer),
    Column("rate_limit_req_interval_sec", Integer),
    Column("rate_limit_cr_nano", BigInteger),
    Column("rate_limit_cr_interval_sec", Integer),
    Column("billing_fixed_day", Integer),
    Column("billing_interval_days", Integer),
    Column("billing_anchored_start_date", UtcDateTime()),
    *_timestamps(),
    UniqueConstraint("provider_id", "name"),
    CheckConstraint("price_nano >= 0", name="price_not_negative"),
)

plan_methods = Table(
    "plan_methods",
    metadata,
    _id(),
    Column("plan_id", ForeignKey("plans.id", ondelete="CASCADE"), nullable=False),
    Column("method", String(100), nullable=False),
    Column("vm", String(20), nullable=False),
    Column("node_target_type", String(40), nullable=False),
    Column("cost_nano", BigInteger, nullable=False),
    Column("rate_limit", Integer),
    Column("rate_limit_interval_sec", Integer),
    # NULL: the price applies on every chain; a chain-specific row wins over it.
    Column("chain_id", ForeignKey("chains.chain_id"), nullable=True),
    # A provider's dearer price, and when it applies: the price notice after it was set (0021).
    Column("next_cost_nano", BigInteger, nullable=True),
    Column("next_cost_from", UtcDateTime(), nullable=True),
    *_timestamps(),
    CheckConstraint("cost_nano >= 0", name="cost_not_negative"),
    # One price per (plan, vm, method, target, chain). NULLs are distinct in a plain unique
    # constraint, so the all-chains row gets its own partial index.
    Index(
        "uq_plan_methods_chain_row",
        "plan_id",
        "vm",
        "method",
        "node_target_type",
        "chain_id",
        unique=True,
        sqlite_where=text("chain_id IS NOT NULL"),
        postgresql_where=text("chain_id IS NOT NULL"),
    ),
    Index(
        "uq_plan_methods_all_chains_row",
        "plan_id",
        "vm",
        "method",
        "node_target_type",
        unique=True,
        sqlite_where=text("chain_id IS NULL"),
        postgresql_where=text("chain_id IS NULL"),
    ),
)

nodes = Table(
    "nodes",
    metadata,
    _id(),
    Column("plan_id", ForeignKey("plans.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("chain_id", ForeignKey("chains.chain_id"), nullable=False, index=True),
    Column("url", String(2048), nullable=False, unique=True),
    Column("vm", String(20), nullable=False, server_default="evm"),
    Column("node_target_type", String(40), nullable=False, server_default="full"),
    Column("rate_limit", Integer, nullable=False, server_default="0"),
    Column("rate_limit_interval_sec", Integer, nullable=False, server_default="1"),
    Column("source", String(40), nullable=False, server_default="provider"),
    Column("status", String(40), nullable=False, server_default="healthy"),
    Column("capabilities", JSON),  # as declared (Capabilities.as_json); null: none declared
    Column("verified_capabilities", JSON),  # as screening's probes found them
    # A cordon (status `cordoned`): why and when; what its answers disputed came to in all; and
    # until when it is audited at the higher rate once back (router/cordon.py).
    Column("cordon_reason", Text),
    Column("cordoned_at", UtcDateTime()),
    Column("watched_until", UtcDateTime()),
    Column("disputed_calls", BigInteger, nullable=False, server_default="0"),
    Column("disputed_nano", BigInteger, nullable=False, server_default="0"),
    *_timestamps(),
    CheckConstraint("rate_limit >= 0", name="rate_limit_not_negative"),
    CheckConstraint("rate_limit_interval_sec > 0", name="interval_positive"),
)

ws_nodes = Table(
    "ws_nodes",
    metadata,
    _id(),
    Column("plan_id", ForeignKey("plans.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("chain_id", ForeignKey("chains.chain_id"), nullable=False, index=True),
    Column("url", String(2048), nullable=False, unique=True),
    Column("status", String(40), nullable=False, server_default="healthy"),
    *_timestamps(),
)

customers = Table(
    "customers",
    metadata,
    _id(),
    Column("name", String(200), nullable=False),
    Column("email", String(320), nullable=False, unique=True),
    # Running total of credit_ledger.amount_nano for this customer, updated in the same
    # transaction as every ledger insert, so that reading a balance is one row.
    Column("balance_nano", BigInteger, nullable=False, server_default="0"),
    # The dashboard warns below this balance; 0: no warning (migration 0017).
    Column("low_balance_alert_nano", BigInteger, nullable=False, server_default="0"),
    # The address a self-service sign-up gave: unverified, so never an identity and never
    # unique; `email` then holds a placeholder that no lookup matches (migration 0017).
    Column("contact_email", String(320)),
    *_timestamps(),
)

# A customer acts for at most one provider; a provider may have several customer accounts.
provider_customers = Table(
    "provider_customers",
    metadata,
    Column(
        "customer_id",
        ForeignKey("customers.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("provider_id", ForeignKey("providers.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False, default=utcnow),
)

api_keys = Table(
    "api_keys",
    metadata,
    _id(),
    Column(
        "customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("name", String(200), nullable=False, server_default=""),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_hint", String(20), nullable=False),
    Column("allowed_domains", JSON, nullable=False),
    Column("routing_strategy", String(20), nullable=False),
    Column("active", Boolean, nullable=False, server_default=text("true")),
    Column("bypass_credit_check", Boolean, nullable=False, server_default=text("false")),
    # Calls per interval, the key's own limit; 0: none (migration 0008).
    Column("rate_limit", Integer, nullable=False, server_default="0"),
    Column("rate_limit_interval_sec", Integer, nullable=False, server_default="1"),
    # Spend per UTC day above which the dashboard and /account raise an alert; 0: none (0017).
    Column("spend_alert_nano", BigInteger, nullable=False, server_default="0"),
    # Every provable answer proven, whatever the chain's setting (0020; docs/integrity.md).
    Column("verified", Boolean, nullable=False, server_default=text("false")),
    # The most one call may cost; 0: no cap (0018).
    Column("max_price_per_call_nano", BigInteger, nullable=False, server_default="0"),
    *_timestamps(),
)

management_tokens = Table(
    "management_tokens",
    metadata,
    _id(),
    Column(
        "customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("label", String(200), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("token_hint", String(20), nullable=False),
    Column("role", String(20), nullable=False, server_default="customer"),
    Column("revoked_at", UtcDateTime()),
    *_timestamps(),
)

credit_ledger = Table(
    "credit_ledger",
    metadata,
    _id(),
    Column("customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(20), nullable=False),
    Column("amount_nano", BigInteger, nullable=False),
    Column("balance_after_nano", BigInteger, nullable=False),
    # Idempotency: a purchase or grant carrying a reference is recorded once per customer.
    Column("reference", String(200)),
    Column("note", Text, nullable=False, server_default=""),
    Column("created_at", UtcDateTime(), nullable=False, default=utcnow),
    UniqueConstraint("customer_id", "reference"),
    Index("ix_credit_ledger_customer_created", "customer_id", "created_at"),
    # Ledger pages: a customer's rows newest first, from `before_id` down (accounts.py).
    Index("ix_credit_ledger_customer_id", "customer_id", "id"),
)

usage_aggregates = Table(
    "usage_aggregates",
    metadata,
    _id(),
    Column("customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False),
    Column("api_key_id", ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=False),
    Column("chain_id", BigInteger, nullable=False),
    Column("method", String(100), nullable=False),
    Column("scenario", String(40), nullable=False),
    Column("bucket_start", UtcDateTime(), nullable=False),  # the hour the calls fell in
    Column("request_count", BigInteger, nullable=False),
    Column("credits_nano", BigInteger, nullable=False),
    UniqueConstraint("customer_id", "api_key_id", "chain_id", "method", "scenario", "bucket_start"),
    Index("ix_usage_aggregates_customer_bucket", "customer_id", "bucket_start"),
    # Hourly series filtered by key or by chain read only that key's or chain's rows.
    Index("ix_usage_aggregates_customer_key_bucket", "customer_id", "api_key_id", "bucket_start"),
    Index("ix_usage_aggregates_customer_chain_bucket", "customer_id", "chain_id", "bucket_start"),
)

# Roll-ups written in the same transaction as `usage_aggregates`, so that a 90-day report reads
# days, not hours. Whole UTC days of a report window come from `usage_daily`, the partial days
# at its edges from the hourly rows; `usage_hourly_totals` serves an unfiltered hourly series.
usage_daily = Table(
    "usage_daily",
    metadata,
    _id(),
    Column("customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False),
    Column("api_key_id", ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=False),
    Column("chain_id", BigInteger, nullable=False),
    Column("method", String(100), nullable=False),
    Column("scenario", String(40), nullable=False),
    Column("day", UtcDateTime(), nullable=False),  # midnight UTC
    Column("request_count", BigInteger, nullable=False),
    Column("credits_nano", BigInteger, nullable=False),
    # Unique, and covering on PostgreSQL: a report's scan of a window never visits the table.
    Index(
        "uq_usage_daily_customer_day_dimensions",
        "customer_id",
        "day",
        "api_key_id",
        "chain_id",
        "method",
        "scenario",
        unique=True,
        postgresql_include=["request_count", "credits_nano"],
    ),
)

usage_hourly_totals = Table(
    "usage_hourly_totals",
    metadata,
    Column(
        "customer_id",
        ForeignKey("customers.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("bucket_start", UtcDateTime(), primary_key=True),
    Column("request_count", BigInteger, nullable=False),
    Column("credits_nano", BigInteger, nullable=False),
)

# What each plan's nodes answered, by the hour the calls were made in, added to by every usage
# flush in the same transaction; routers sum the current cycle's hours (domain/plan_cycle.py) to
# order economy routes by what the operator pays next. By hour, not by cycle: a change of the
# plan's billing terms counts what was already used into the new cycle.
plan_hourly_usage = Table(
    "plan_hourly_usage",
    metadata,
    Column(
        "plan_id", ForeignKey("plans.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    ),
    Column("hour", UtcDateTime(), primary_key=True),
    Column("request_count", BigInteger, nullable=False),
    Column("credits_nano", BigInteger, nullable=False),
)

# Which router flushes of usage are in storage, per customer: a flush retried after a commit
# whose outcome was lost finds itself here and writes nothing twice, charged or free. Rows are
# only needed while a router may still retry the flush; `stores.sql.usage` prunes old ones.
usage_flushes = Table(
    "usage_flushes",
    metadata,
    Column(
        "customer_id",
        ForeignKey("customers.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("reference", String(200), primary_key=True),
    Column("written_at", UtcDateTime(), nullable=False),
    Index("ix_usage_flushes_written_at", "written_at"),
)


def _health(key: str, nodes: str) -> list[Column[Any]]:
    """A node's last reported health, keyed by the node (`key` refers to `nodes.id`)."""
    return [
        Column(
            key,
            ForeignKey(f"{nodes}.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        Column("in_sync", Boolean, nullable=False),
        Column("head_block", BigInteger),
        Column("latency_ms", Numeric(12, 3)),
        Column("consecutive_failures", Integer, nullable=False),
        Column("checked_at", UtcDateTime(), nullable=False),
    ]


# What routers' health checkers last saw of each node, written by every router every few
# seconds (the latest report wins); the API reads it for node status and the price list.
node_health = Table(
    "node_health",
    metadata,
    *_health("node_id", "nodes"),
    Column("capabilities", JSON),  # what the reporting router knows the node can answer
)

# The same for WebSocket nodes (router/ws/node_health.py): another id space, another table.
ws_node_health = Table("ws_node_health", metadata, *_health("ws_node_id", "ws_nodes"))

# What audits and proofs found of each HTTP node, in all (router/node_checks.py): every router
# adds what it counted since its last flush (`n = n + d`), and keeps the latest of each time.
node_checks = Table(
    "node_checks",
    metadata,
    Column(
        "node_id", ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    ),
    Column("audits_passed", BigInteger, nullable=False, server_default="0"),
    Column("audits_failed", BigInteger, nullable=False, server_default="0"),
    Column("proofs_checked", BigInteger, nullable=False, server_default="0"),
    Column("proofs_failed", BigInteger, nullable=False, server_default="0"),
    Column("last_audit_passed_at", UtcDateTime()),
    Column("last_audit_failed_at", UtcDateTime()),
    Column("last_proof_checked_at", UtcDateTime()),
    Column("last_proof_failed_at", UtcDateTime()),
)

chain_requests = Table(
    "chain_requests",
    metadata,
    _id(),
    Column("status", String(20), nullable=False, server_default="pending"),
    Column("name", String(200), nullable=False),
    Column("chain_id", BigInteger, nullable=False),
    Column("short_name", String(100)),
    Column("native_currency_name", String(100)),
    Column("native_currency_decimals", Integer),
    Column("info_url", String(2048)),
    Column("icon_url", String(2048)),
    Column("rpc_urls", JSON, nullable=False),
    Column("explorer_urls", JSON, nullable=False),
    Column("requestor_email", String(320)),
    Column("requestor_name", String(200)),
    Column("screening", JSON),  # outcome per submitted RPC URL
    Column("submitter_ip", String(45)),  # what the limit counts: an IPv4 address or an IPv6 /64
    # Sent with an agent or administrator token: not counted against the IP's daily limit.
    Column("limit_exempt", Boolean, nullable=False, server_default=text("false")),
    Column("review_note", Text),
    Column("reviewed_at", UtcDateTime()),
    *_timestamps(),
    Index("ix_chain_requests_status_created", "status", "created_at"),
    Index("ix_chain_requests_submitter_ip_created", "submitter_ip", "created_at"),
)

node_requests = Table(
    "node_requests",
    metadata,
    _id(),
    Column("status", String(20), nullable=False, server_default="pending"),
    Column("name", String(200), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("vm", String(20), nullable=False, server_default="evm"),
    Column("chain_id", BigInteger),  # as the node reported it during screening
    Column("email", String(320)),
    Column("privacy_policy_url", String(2048)),
    Column("notes", Text),
    Column("screening", JSON),
    Column("submitter_ip", String(45)),  # what the limit counts: an IPv4 address or an IPv6 /64
    Column("limit_exempt", Boolean, nullable=False, server_default=text("false")),
    Column("review_note", Text),
    Column("reviewed_at", UtcDateTime()),
    *_timestamps(),
    Index("ix_node_requests_status_created", "status", "created_at"),
    Index("ix_node_requests_submitter_ip_created", "submitter_ip", "created_at"),
)

# One row (id 1). Every write of what routers cache (keys, chains, plans, prices, nodes, credits)
# increments `version` in the same transaction; routers poll this row and reload when it moves.
config_version = Table(
    "config_version",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", BigInteger, nullable=False),
    Column("changed_at", UtcDateTime(), nullable=False),
    CheckConstraint("id = 1", name="single_row"),
)

# -- Buying credits (docs/billing.md) ---------------------------------------------------------

# What the operator file's `payments` section says beyond its assets. One row (id 1), absent
# until a file with `payments` is applied.
payment_settings = Table(
    "payment_settings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    # The account's BIP-32 extended public key; customers' addresses are its children m/0/{id}.
    Column("deposit_xpub", String(200)),
    Column("card_min_credits_nano", BigInteger),
    Column("card_max_credits_nano", BigInteger),
    Column("card_success_url", String(2048)),
    Column("card_cancel_url", String(2048)),
    Column("updated_at", UtcDateTime(), nullable=False, default=utcnow),
    CheckConstraint("id = 1", name="single_row"),
)

# The assets accepted on each chain. Decimals are kept as exact decimal text: SQLite would hold a
# NUMERIC as a double.
deposit_assets = Table(
    "deposit_assets",
    metadata,
    _id(),
    Column("chain_id", ForeignKey("chains.chain_id"), nullable=False),
    Column("asset", String(42), nullable=False),  # `native`, or a contract address (lower case)
    Column("symbol", String(40), nullable=False, server_default=""),
    Column("credits_per_unit", String(80), nullable=False),
    Column("decimals", Integer),  # null: the chain's native decimals, or the token's decimals()
    Column("confirmations", Integer),  # null: credited once the chain's finalized block is there
    Column("minimum", String(80), nullable=False, server_default="0"),  # whole units
    Column("start_block", BigInteger),  # null: the chain's head when it is first watched
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    *_timestamps(),
    UniqueConstraint("chain_id", "asset"),
)

# Every deposit address shown to a customer, so that any watcher knows whose an address is, and
# an address once shown is watched for good (even after the operator changes the key).
deposit_addresses = Table(
    "deposit_addresses",
    metadata,
    Column("address", String(42), primary_key=True, autoincrement=False),  # lower case
    Column(
        "customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("xpub", String(200), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False, default=utcnow),
    UniqueConstraint("xpub", "customer_id"),
)

# Deposits found on chain, in whatever state (domain/deposits.py). One row per transfer: the
# same (chain, transaction, log) found again by any watcher is the same row.
deposits = Table(
    "deposits",
    metadata,
    _id(),
    Column("chain_id", BigInteger, nullable=False),
    Column("asset", String(42), nullable=False),
    Column("tx_hash", String(66), nullable=False),
    Column("log_index", Integer, nullable=False),  # -1: a native transfer
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", String(66), nullable=False),
    Column("sender", String(42), nullable=False),
    Column("recipient", String(42), nullable=False),
    Column(
        "customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("amount", String(80), nullable=False),  # base units, decimal text (up to 2**256)
    Column("decimals", Integer, nullable=False),  # of the asset, as its worth was computed with
    Column("credits_nano", BigInteger, nullable=False),  # its worth at the asset's rate
    Column("state", String(20), nullable=False),
    Column("ledger_id", BigInteger),  # the purchase, once credited
    Column("seen_at", UtcDateTime(), nullable=False, default=utcnow),
    Column("final_at", UtcDateTime()),
    Column("updated_at", UtcDateTime(), nullable=False, default=utcnow),
    UniqueConstraint("chain_id", "tx_hash", "log_index"),
    Index("ix_deposits_customer_id_id", "customer_id", "id"),
    Index("ix_deposits_chain_id_state", "chain_id", "state"),
)

# Each watched asset's progress on its chain: the first block not yet read for crediting, and
# the head and final block the last round saw. Watchers take the row's lock to credit, one at a
# time.
deposit_cursors = Table(
    "deposit_cursors",
    metadata,
    Column("chain_id", BigInteger, primary_key=True, autoincrement=False),
    Column("asset", String(42), primary_key=True),
    Column("next_block", BigInteger, nullable=False),
    Column("head_block", BigInteger),
    Column("final_block", BigInteger),
    Column("checked_at", UtcDateTime(), nullable=False, default=utcnow),
)

# Card payments: each Stripe Checkout session made for a customer, and what became of it.
card_payments = Table(
    "card_payments",
    metadata,
    Column("session_id", String(255), primary_key=True, autoincrement=False),
    Column(
        "customer_id", ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("credits_nano", BigInteger, nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("payment_intent", String(255), index=True),
    Column("state", String(20), nullable=False),  # open, paid, mismatch
    Column("ledger_id", BigInteger),
    *_timestamps(),
)
