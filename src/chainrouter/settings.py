"""Process settings: `CHAINROUTER_*` environment variables over an optional TOML file over defaults.

Settings are validated once at start; `SettingsError` carries one line per bad setting, naming the
environment variable and what it accepts, and the command line exits non-zero with it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from chainrouter.domain.chains import MAX_CHAIN_ID
from chainrouter.domain.money import MoneyError, parse_credits
from chainrouter.domain.verification import VerifyMode
from chainrouter.validation import error_message

ENV_PREFIX = "CHAINROUTER_"
# What holding one WebSocket subscription may cost an hour: 100 credits, a method call's most.
MAX_HOLDING_NANO_PER_HOUR = 100 * 10**9
CONFIG_FILE_ENV = "CHAINROUTER_CONFIG_FILE"


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class LogFormat(StrEnum):
    AUTO = "auto"  # text on a terminal, JSON lines otherwise
    JSON = "json"
    TEXT = "text"


class RpcServer(StrEnum):
    """The router's executor (router/executors): its HTTP server and its client to nodes."""

    NATIVE = "native"  # chainrouter._native: server and client in Rust, stepping the pipeline
    PYTHON = "python"  # uvicorn and aiohttp, the pipeline on an asyncio event loop


class ServeRole(StrEnum):
    RPC = "rpc"  # the RPC router (data plane) only
    API = "api"  # the management API only
    WATCHER = "watcher"  # the deposit watcher only (docs/billing.md)
    ALL = "all"


class TailOverrides(BaseModel):
    """One chain's own hedging and time-out settings (`Settings.chain_tail`); unset: the
    process-wide setting of the same name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hedge_max: int | None = Field(default=None, ge=0, le=8)
    hedge_quantile: float | None = Field(default=None, ge=0.5, le=0.999)
    hedge_delay_floor_ms: float | None = Field(default=None, ge=0, le=60_000)
    hedge_delay_ceiling_ms: float | None = Field(default=None, ge=0, le=600_000)
    adaptive_timeout_multiplier: float | None = Field(default=None, ge=1, le=1000)
    adaptive_timeout_floor_s: float | None = Field(default=None, gt=0, le=300)
    upstream_timeout_s: float | None = Field(default=None, gt=0, le=300)


class Settings(BaseSettings):
    """Everything an operator may set. Field docs are the configuration reference."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
        use_enum_values=False,
    )

    database_url: str = Field(
        default="sqlite:///chainrouter.db",
        description="SQLAlchemy URL: sqlite:///PATH (default, WAL mode) or postgresql://USER@HOST/DB.",
    )
    role: ServeRole = Field(
        default=ServeRole.ALL, description="What `serve` runs: rpc, api or all."
    )
    api_host: str = Field(default="127.0.0.1", description="Address the management API listens on.")
    api_port: int = Field(default=8080, ge=1, le=65535, description="Port of the management API.")
    api_max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest management API request body, in bytes; larger bodies get HTTP 413, "
        "and no body of a route that needs a token is read before the token is checked.",
    )
    log_level: LogLevel = Field(default=LogLevel.INFO, description="debug, info, warning or error.")
    log_format: LogFormat = Field(
        default=LogFormat.AUTO,
        description="json: one JSON object per line; text: for people; auto: text when standard "
        "error is a terminal, else JSON.",
    )
    request_log_level: LogLevel = Field(
        default=LogLevel.DEBUG,
        description="The level of the router's one line per request (batch id, key id, chain, "
        "methods, nodes, attempts, status, duration); written when CHAINROUTER_LOG_LEVEL is at "
        "or below it, so the default (debug) writes none at the default info. Costs CPU per "
        "request (docs/operations.md).",
    )
    chain_import_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        # The catalog is held and parsed in memory (several times its size): the shared registry
        # is under 1 MiB.
        le=256 * 1024 * 1024,
        description="Largest chain catalog `chains import` downloads or reads, in bytes.",
    )
    chain_import_timeout_s: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="Time limit for the whole download of a chain catalog (connecting, headers "
        "and body), seconds.",
    )

    redis_url: str | None = Field(
        default=None,
        description="redis://HOST:PORT/DB. When set, rate limits (per node, plan, method and "
        "free-tier IP) and the response cache's answers (unless cache_redis_url is set) are "
        "shared by every router using it; unset, each process keeps its own. Its keys must "
        "never be evicted: maxmemory-policy noeviction.",
    )
    redis_timeout_s: float = Field(
        default=0.1,
        gt=0,
        le=5,
        description="How long a rate limit in Redis may take (connecting, waiting for one of "
        "its connections, the command) before this process limits on its own for a while, "
        "seconds (with redis_url).",
    )
    rpc_host: str = Field(default="127.0.0.1", description="Address the RPC router listens on.")
    rpc_port: int = Field(default=8545, ge=1, le=65535, description="Port of the RPC router.")
    rpc_workers: int = Field(
        default=1, ge=1, le=64, description="RPC router worker processes (one event loop each)."
    )
    rpc_server: RpcServer = Field(
        default=RpcServer.NATIVE,
        description="The router's executor: `native` (the HTTP server and the client to nodes in "
        "Rust, the pipeline in Python; faster, see docs/benchmarks.md), or `python` (uvicorn and "
        "aiohttp, all in Python on an asyncio event loop).",
    )
    max_body_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=1024,
        description="Largest RPC request body accepted, in bytes; larger bodies get HTTP 413.",
    )
    request_head_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Time a client gets to send a request's head (its line and headers), from "
        "its connection or the request's first byte, seconds; slower: the connection is "
        "closed. The router (either executor) and the management API.",
    )
    request_body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Time a client gets to send a request's whole body after its head, seconds; "
        "slower: the connection is closed (the native executor first answers HTTP 408). The "
        "router and the management API.",
    )
    max_connections: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Most connections one server process holds open at once (each router "
        "worker, the API). The native executor stops accepting beyond it, so new ones wait in "
        "the kernel's backlog; uvicorn (the Python executor, the API) answers 503 beyond it.",
    )
    drain_delay_s: float = Field(
        default=0.0,
        ge=0,
        le=300,
        description="After SIGTERM, how long a router keeps serving while GET /health answers "
        "503 draining, so that its load balancer stops sending it new requests before it stops "
        "accepting: at least the balancer's time to mark it down (HAProxy: inter x fall). A "
        "second SIGTERM or SIGINT ends the wait. 0: stop accepting at once.",
    )
    shutdown_grace_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="At a stop, how long the requests in flight get to finish once the router "
        "stops accepting, seconds; then the usage is written and the process exits.",
    )
    ws_max_subscriptions: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Most subscriptions one WebSocket connection holds.",
    )
    ws_max_filter_entries: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most logs filter addresses and topics one WebSocket connection's "
        "subscriptions hold together.",
    )
    ws_max_connections_per_address: int = Field(
        default=50,
        ge=1,
        le=100_000,
        description="Most WebSocket connections one API key holds open at once from one client "
        "address (an IPv6 address's /64), per router process; more: the upgrade is refused "
        "with HTTP 429. A dapp's visitors on its one public key each count on their own.",
    )
    ws_max_connections_per_customer: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Most WebSocket connections one customer's keys together hold open at "
        "once, per router process; more: HTTP 429.",
    )
    ws_max_subscriptions_per_customer: int = Field(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="Most subscriptions one customer's connections together hold, per router "
        "process; more: the eth_subscribe is refused.",
    )
    ws_max_filter_entries_per_customer: int = Field(
        default=200_000,
        ge=1,
        le=100_000_000,
        description="Most logs filter addresses and topics one customer's subscriptions "
        "together hold, per router process; more: the eth_subscribe is refused.",
    )
    ws_recheck_interval_s: float = Field(
        default=0.5,
        gt=0,
        le=1.0,
        description="How often each router process runs the upgrade's access checks again on "
        "its open WebSocket connections, seconds: a key deactivated, revoked or re-domained, "
        "or a customer out of credits, loses its connections within this after the router "
        "reloads its configuration (sync_interval_s), whether or not they are sent anything.",
    )
    ws_feed_grace_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="How long a chain's WebSocket feed stays subscribed at its node after its "
        "last client left, seconds: churn (subscribe, unsubscribe, subscribe) and reloaded "
        "pages do not make the router dial the provider's node each time. 0: stopped at once.",
    )
    ws_feed_dial_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Least time between two dials of one WebSocket node by a router "
        "process's feeds, seconds: subscribers arriving, leaving and coming back never make "
        "the router dial a node faster than this (its health checks keep their own interval).",
    )
    ws_feed_dial_backoff_max_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="Longest rest of a WebSocket node after failed dials, seconds: after n "
        "failures in a row (a refused dial, or a connection that failed before lasting this "
        "long) its feeds dial it again ws_feed_dial_interval_s x 2^n after the last dial at "
        "the earliest, at most this.",
    )
    ws_subscribe_wait_s: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description="How long an eth_subscribe waits, seconds, for its chain's feed to be "
        "subscribed at some WebSocket node when it is not already; past it the call gets "
        "-32009 and nothing is held.",
    )
    ws_subscription_holding_credits_per_hour: str = Field(
        default="0",
        pattern=r"^[0-9]{1,3}(\.[0-9]{1,9})?$",
        description="What holding one WebSocket subscription open costs its customer per "
        "hour, in credits (an exact decimal, at most 100), charged pro rata for the time held, "
        "beside its notifications. No provider earns it. 0: holding is free.",
    )
    ws_subscription_holding_step_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How often the time subscriptions were held is charged, seconds (and "
        "when each ends, for the rest).",
    )
    ws_send_queue: int = Field(
        default=1000,
        ge=2,
        le=100_000,
        description="Messages that may wait for one WebSocket client; a client that lets more "
        "pile up is closed (code 4008), never slowing the others.",
    )
    ws_health_check_interval_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Target time between two health checks of one WebSocket node (each dials "
        "the node and asks its chain ID, a newHeads subscription and its head over one "
        "connection). Each router process checks every WebSocket node.",
    )
    ws_max_message_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest WebSocket message taken from a client, or from a node, in bytes.",
    )
    max_batch_size: int = Field(
        default=100, ge=1, le=10_000, description="Most requests in one JSON-RPC batch."
    )
    max_response_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Largest upstream answer accepted, in bytes; a larger one counts as a "
        "failure of that node and the router fails over.",
    )
    price_notice_s: float = Field(
        default=24 * 3600.0,
        ge=0,
        le=365 * 24 * 3600.0,
        description="How long after a provider makes a method dearer (PUT or POST of its price "
        "rows) the new price applies, seconds; the old price holds until then, and a cheaper "
        "price applies at once. Administrators and the operator file price at once. 0: at once.",
    )
    max_answer_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=0,
        description="Largest answer to one RPC request (one call, or a whole batch), in bytes: "
        "the calls' answers are counted as they end, and one that would take the request past "
        "it gets an error of its own instead (-32014, the bound in `data`), unbilled; the "
        "batch's other items keep their answers. 0: no bound (for measurements only).",
    )
    upstream_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Time one upstream node gets to answer, seconds (checked in 10 ms ticks).",
    )
    request_deadline_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Time a call gets across all its failover attempts, seconds; when it runs "
        "out the client gets HTTP 504.",
    )
    hedge_max: int = Field(
        default=2,
        ge=0,
        le=8,
        description="Further attempts a read may have in flight beside its first when that one "
        'is slower than its node\'s usual (docs/router.md, "Tail latency"); the first good '
        "answer wins and alone is billed. 0: never hedge. Writes never are.",
    )
    hedge_quantile: float = Field(
        default=0.95,
        ge=0.5,
        le=0.999,
        description="An attempt is hedged once it has taken longer than this quantile of its "
        "node's recent answer times for that kind of call.",
    )
    hedge_delay_floor_ms: float = Field(
        default=2.0,
        ge=0,
        le=60_000,
        description="Shortest wait before a hedge, milliseconds.",
    )
    hedge_delay_ceiling_ms: float = Field(
        default=1000.0,
        ge=0,
        le=600_000,
        description="Longest wait before a hedge, milliseconds.",
    )
    adaptive_timeout_multiplier: float = Field(
        default=10.0,
        ge=1,
        le=1000,
        description="A quick call's time-out (a look-up of bounded size, such as "
        "eth_blockNumber or eth_getBalance) is this times its node's recent p99, within "
        "adaptive_timeout_floor_s and upstream_timeout_s. Other calls get upstream_timeout_s.",
    )
    adaptive_timeout_floor_s: float = Field(
        default=1.0,
        gt=0,
        le=300,
        description="Shortest time-out of a quick call, seconds.",
    )
    chain_tail: dict[int, TailOverrides] = Field(
        default_factory=dict,
        description="Per chain, any of hedge_max, hedge_quantile, hedge_delay_floor_ms, "
        "hedge_delay_ceiling_ms, adaptive_timeout_multiplier, adaptive_timeout_floor_s and "
        "upstream_timeout_s in place of the settings above. In the environment: a JSON object "
        'by chain ID, e.g. {"1": {"hedge_max": 0}}.',
    )
    cache_max_bytes: int = Field(
        # 16 MiB: a worker with the whole registry (about 120 MB) stays under 150 MB when full.
        default=16 * 1024 * 1024,
        ge=0,
        le=64 * 1024**3,
        description="Bytes the response cache may take in each router process: three quarters a "
        "ring the answers are written into, a quarter its index (least recently used out first, "
        "near enough); the process grows by this much as the cache fills. 0: no response cache "
        "(docs/cache.md).",
    )
    cache_finality_depth: int = Field(
        default=128,
        ge=1,
        le=1_000_000,
        description="Blocks behind the chain head taken as final where no node of a chain answers "
        "the `finalized` tag.",
    )
    chain_cache_finality_depth: dict[int, int] = Field(
        default_factory=dict,
        description="Per chain, cache_finality_depth in its place. In the environment: a JSON "
        'object by chain ID, e.g. {"137": 256}.',
    )
    cache_prices: dict[str, str] = Field(
        default_factory=dict,
        description="What an answer from the cache costs, in credits (exact decimal strings), by "
        '"<chainId>:<method>", "<chainId>:*", "*:<method>" or "*" (the most specific wins; '
        'none: free). No provider earns it. E.g. {"*": "0.0000001"}.',
    )
    cache_redis_url: str | None = Field(
        default=None,
        description="redis://HOST:PORT/DB of the Redis the response cache shares answers "
        "through; unset: redis_url's. Best a Redis instance of its own (maxmemory with "
        "allkeys-lru), so that answers can neither evict rate limits nor fill their Redis.",
    )
    cache_redis_timeout_s: float = Field(
        default=0.05,
        gt=0,
        le=5,
        description="How long a cache look-up in Redis may take before the call goes to a node "
        "as if nothing were cached, seconds (with cache_redis_url or redis_url).",
    )
    cache_epoch_share_interval_s: float = Field(
        default=1.0,
        ge=0.1,
        le=60,
        description="How often a router reads the chains' finality epochs the routers share in "
        "the cache's Redis and publishes the regresses it saw, seconds: another router's "
        "regress reaches this one within about two of these (with a Redis; docs/cache.md).",
    )
    cache_redis_ttl_s: int = Field(
        default=7 * 24 * 3600,
        ge=60,
        le=365 * 24 * 3600,
        description="How long Redis keeps a cached answer, seconds (with a Redis).",
    )
    cache_redis_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=64 * 1024,
        le=1024**4,
        description="The most bytes of answers the routers keep in the cache's Redis together "
        "(an answer counts its bytes, three times its key and 100 bytes), oldest out first, "
        "whichever Redis it is: the limits' one too, whose keys are never deleted for room "
        "(docs/cache.md).",
    )
    cache_replay_max_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=0,
        le=4 * 1024**3,
        description="Bytes each native router worker may keep of the pipeline's decisions it "
        "applies itself to later calls in their scope: forwards, and answers from the response "
        "cache (oldest out first; request bodies up to 16 KiB). 0: none, every request through "
        'the pipeline (docs/router.md, "Scoped decisions").',
    )
    repeat_forwards: bool = Field(
        default=True,
        description="Whether the pipeline hands the native server its forwards too, not only its "
        "answers from the cache: a later call in the decision's scope is sent by the server "
        "itself to the node the pipeline chose, billed by the ledger as the pipeline bills; "
        "within the memo's bound and age (CHAINROUTER_CACHE_REPLAY_MAX_BYTES, _MAX_AGE_S; "
        'docs/router.md, "Scoped decisions").',
    )
    upstream_batch_max: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="The most calls of one client batch the native server sends a node in one "
        "upstream batch when it serves them under decisions, unless the node's own batch limit "
        "(its declared or probed capabilities) is lower; 1: each call on its own "
        '(docs/router.md, "Scoped decisions").',
    )
    cache_replay_max_age_s: float = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="How long the native server applies a decision the pipeline handed it, "
        "seconds (a forward 1 s at most), besides the epochs that end it at once; then the "
        'pipeline decides that call once more (docs/router.md, "Scoped decisions").',
    )
    coalesce: bool = Field(
        default=True,
        description="Identical read-only calls in flight at once share one upstream attempt.",
    )
    upstream_connect_timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Time to open a connection to an upstream, seconds."
    )
    sync_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="How often a router checks storage for changed keys, nodes and prices "
        "(and reloads them), seconds. A revoked key stops working within this time plus the "
        "reload (well under a second for 6,000 nodes).",
    )
    usage_flush_interval_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="How often metered usage is written and balances re-read, seconds. Also "
        "the window in which concurrent routers can overdraw a balance (see docs/router.md).",
    )
    health_storage_stale_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="A router whose storage has not answered for this long reports itself "
        "unavailable (GET /health 503): its keys, prices and balances are that old and its "
        "usage is not being written.",
    )
    usage_journal_dir: str = Field(
        default="var/usage-journal",
        description="Where each router process journals the usage it meters until storage has "
        "it, so that a router killed without warning loses none (replayed at the next start; "
        "docs/router.md). Relative to the working directory; empty: no journal.",
    )
    health_check_interval_s: float = Field(
        default=15.0, gt=0, le=3600, description="Target time between two checks of one node."
    )
    health_check_max_per_s: float = Field(
        default=100.0,
        gt=0,
        le=10_000,
        description="Most health checks a router process starts per second; with many nodes "
        "a round takes longer than health_check_interval_s instead of flooding anything.",
    )
    health_check_concurrency: int = Field(
        default=32, ge=1, le=1024, description="Most health checks in flight at once."
    )
    health_check_timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Time a node gets to answer a health check."
    )
    capability_probe_interval_s: float = Field(
        default=3600.0,
        ge=0,
        le=86_400,
        description="How often a router probes each node's capabilities (tracing, state depth, "
        "block history; docs/router.md), seconds; one node at a time, a few calls each. "
        "0: never (declarations, screening and the nodes' own errors only).",
    )
    max_block_lag: int = Field(
        default=2,
        ge=0,
        le=1_000_000,
        description="A node more than this many blocks behind its chain's head (the highest "
        "head nodes of two providers reached) is lagging: it serves no call that reads the head "
        "(`latest`, `pending`, `eth_blockNumber` ...), only calls pinned to blocks it has "
        "(docs/integrity.md).",
    )
    chain_max_block_lag: dict[int, int] = Field(
        default_factory=dict,
        description="Per chain, max_block_lag in its place (a chain of quick blocks may allow "
        'more). In the environment: a JSON object by chain ID, e.g. {"42161": 20}.',
    )
    verify: VerifyMode = Field(
        default=VerifyMode.CACHE,
        description="What the router proves of nodes' answers before serving them "
        "(docs/integrity.md, Proofs): `off`; `cache`, every answer the response cache keeps is "
        "proven (eth_getProof, block roots) or, where the chain offers no proof, agreed by a "
        "node of another provider, before it is served and kept; `always`, that and every "
        "provable answer pinned to a block.",
    )
    chain_verify: dict[int, VerifyMode] = Field(
        default_factory=dict,
        description="Per chain, verify in its place. In the environment: a JSON object by "
        'chain ID, e.g. {"1": "always"}.',
    )
    audit_rate: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="The share of nodes' answers audited: asked again of another provider's "
        "node, off the answer's path; a node a majority of two providers outvotes is cordoned "
        '(docs/integrity.md, "Audits"). 0: no audits.',
    )
    chain_audit_rate: dict[int, float] = Field(
        default_factory=dict,
        description="Per chain, audit_rate in its place. In the environment: a JSON object by "
        'chain ID, e.g. {"1": 0.05}.',
    )
    audit_watched_rate: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="The share audited of the answers of nodes younger than a day, or back "
        "from a cordon for less than a day (never below the chain's audit_rate).",
    )
    audit_referees: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Nodes asked at most per audit: the first, and more on a disagreement.",
    )
    max_logs_block_range: int = Field(
        default=10_000,
        ge=1,
        description="Widest eth_getLogs block range served; wider queries get -32005. A "
        "range wider than every node's own limit but within this one is split across nodes.",
    )
    logs_split_max_parts: int = Field(
        default=16,
        ge=1,
        le=1000,
        description="Most ranges one eth_getLogs query is split into; a query that would need "
        "more gets -32005 with the widest range a node serves.",
    )
    logs_split_concurrency: int = Field(
        default=4, ge=1, le=64, description="Ranges of one split query asked at once."
    )
    free_tier_enabled: bool = Field(
        default=True, description="Serve the anonymous free tier at /rpc/evm/{chainId}."
    )
    free_tier_ip_requests: int = Field(
        default=60, ge=1, description="Free-tier calls one client IP may make per interval."
    )
    free_tier_ip_interval_s: float = Field(
        default=60.0, gt=0, description="The free tier's per-IP interval, seconds."
    )
    free_tier_ip_answer_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        description="Bytes of answers one client IP may receive from the free tier per "
        "free_tier_ip_interval_s, beside its calls; an answer past it gets HTTP 429, -32029 "
        "instead (per router process, or per Redis when redis_url is set).",
    )
    free_tier_capacity_per_s: int = Field(
        default=200,
        ge=1,
        description="Free-tier calls per second across all IPs (per router process, or per "
        "Redis when redis_url is set); beyond it: -32030.",
    )
    signup_url: str | None = Field(
        default=None,
        description="Where free-tier limit messages send people to get an API key.",
    )
    metrics_networks: list[str] = Field(
        default_factory=lambda: ["127.0.0.0/8", "::1/128"],
        description="Networks (CIDR) whose hosts may read GET /metrics on the router and the "
        "API (the socket's peer address; no forwarded header counts). Empty: no /metrics "
        'route. In the environment: a JSON list, e.g. ["10.0.0.0/8"].',
    )
    metrics_dir: Path = Field(
        default=Path("var/metrics"),
        description="Where the workers of one router (CHAINROUTER_RPC_WORKERS above 1) leave "
        "their counts for each other, so that a scrape of any of them answers for all. "
        "Relative to the working directory.",
    )
    public_rpc_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        max_length=300,
        description="The router's address as customers reach it, e.g. https://rpc.example.com: "
        "the dashboard shows each chain's RPC URL (and its ws:// or wss:// form) under it. "
        "Unset: http://RPC_HOST:RPC_PORT.",
    )
    signup_enabled: bool = Field(
        default=False,
        description="Let anyone create a customer account from the dashboard (POST /signup), "
        "with signup_free_credits granted and a first management token. For demos and "
        "trials; off by default.",
    )
    signup_free_credits: str = Field(
        default="0",
        pattern=r"^[0-9]{1,6}(\.[0-9]{1,9})?$",
        description="Credits granted to each account made by sign-up, an exact decimal "
        "(at most 999999.999999999).",
    )
    signups_per_ip_per_day: int = Field(
        default=3, ge=1, le=1000, description="Sign-ups one client IP may make in 24 hours."
    )
    api_cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) of a dashboard served elsewhere that may "
        "call the management API from a browser; a preflight from any other origin gets no "
        "CORS grant. The API's own dashboard (/dashboard) needs none. In the environment: a "
        'JSON list, e.g. ["https://app.example.com"].',
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For "
        "names the client, for the router's free tier and the API's per-IP limits, "
        'e.g. ["10.0.0.0/8"]. In the environment: a JSON list.',
    )

    usage_default_rows: int = Field(
        default=20,
        ge=1,
        description="Rows per section of a usage report when the request names no limit.",
    )
    usage_max_rows: int = Field(
        default=1000,
        ge=1,
        description="Most rows per section a usage report may ask for; more is HTTP 422.",
    )
    price_list_requests: int = Field(
        default=30, ge=1, description="Price-list requests one client IP may make per interval."
    )
    price_list_interval_s: float = Field(
        default=60.0, gt=0, description="The price lists' per-IP interval, seconds."
    )
    api_writes_per_token: int = Field(
        default=60,
        ge=1,
        description="Writes (POST, PUT, PATCH, DELETE) one management token may make per "
        "interval, whatever its role; more is HTTP 429 with Retry-After. Reads are not counted.",
    )
    api_writes_interval_s: float = Field(
        default=60.0, gt=0, description="The management tokens' write interval, seconds."
    )
    chain_requests_per_ip_per_day: int = Field(
        default=5,
        ge=1,
        description="Chain submissions one IP may make in 24 hours (agent and administrator "
        "tokens are exempt).",
    )
    node_requests_per_ip_per_day: int = Field(
        default=3,
        ge=1,
        description="Node submissions one IP may make in 24 hours (same exemption).",
    )
    outbound_timeout_s: float = Field(
        default=8.0,
        gt=0,
        le=120,
        description="Time the service gives a URL it screens (a submitted or registered node) "
        "for one request, connection included, seconds.",
    )
    outbound_max_response_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Largest answer read from a URL being screened, in bytes.",
    )
    outbound_allow_private: bool = Field(
        default=False,
        description="FOR TESTS AND DEVELOPMENT ONLY: let screening and the router dial loopback, "
        "private and link-local addresses. Logged as a warning at start when on.",
    )
    outbound_trusted_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDR) the operator trusts as destinations although they are not "
        "public, e.g. its own nodes on a private network: screening and the router may dial "
        'them. In the environment: a JSON list, e.g. ["10.20.0.0/16"].',
    )
    outbound_ca_file: Path | None = Field(
        default=None,
        description="Extra CA certificates (PEM) trusted when dialling https:// and wss:// URLs "
        "(screening, and the router's calls to nodes), in addition to the system's; for private "
        "CAs and tests.",
    )
    # Buying credits (docs/billing.md).
    deposit_watch_api_key: str | None = Field(
        default=None,
        pattern=r"^crk_[A-Za-z0-9_-]{32,256}$",
        description="An API key (crk_...) of the operator's, with bypass_credit_check and "
        "allowed domain *, that the deposit watcher reads chains with through the router. "
        "Unset: no watcher (`serve --role all` starts one only when it is set).",
    )
    deposit_watch_rpc_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        max_length=300,
        description="The router the deposit watcher reads through, e.g. http://10.0.0.5:8545. "
        "Unset: this host's router (http://RPC_HOST:RPC_PORT).",
    )
    deposit_watch_interval_s: float = Field(
        default=1.0,
        ge=0.05,
        le=3600,
        description="Time between two rounds of the deposit watcher, seconds: a deposit is "
        "credited within about this long of its block becoming final.",
    )
    stripe_secret_key: str | None = Field(
        default=None,
        description="Stripe's secret API key (sk_live_... or sk_test_...). With "
        "stripe_webhook_secret: card payments through Stripe Checkout; either unset: none.",
    )
    stripe_webhook_secret: str | None = Field(
        default=None,
        description="The signing secret (whsec_...) of the Stripe webhook endpoint "
        "POST /billing/stripe/webhook.",
    )
    stripe_api_base: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+/?$",
        description="FOR TESTS: where the Stripe library sends API calls instead of Stripe's "
        "(a local stand-in; Stripe cannot be reached from the test machines).",
    )

    @field_validator("trusted_proxies", "outbound_trusted_networks", "metrics_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
        return value

    @field_validator("api_cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+", entry) or len(entry) > 300:
                raise ValueError(f"{entry!r} is not an origin such as https://app.example.com")
        return value

    @field_validator("cache_prices")
    @classmethod
    def _cache_prices(cls, value: dict[str, str]) -> dict[str, str]:
        for key, price in value.items():
            chain, _, method = key.partition(":")
            if key != "*" and not (
                (chain == "*" or (chain.isdigit() and 1 <= int(chain) <= MAX_CHAIN_ID))
                and 0 < len(method) <= 100
                and key != "*:*"  # spelled "*"
            ):
                raise ValueError(
                    f'cache price keys are "<chainId>:<method>", "<chainId>:*", "*:<method>" or '
                    f'"*", got {key[:120]!r}'
                )
            try:
                if parse_credits(price) < 0:
                    raise ValueError(f"cache price of {key!r} must not be negative")
            except MoneyError as exc:
                raise ValueError(f"cache price of {key!r} {exc}") from None
        return value

    @field_validator("ws_subscription_holding_credits_per_hour")
    @classmethod
    def _holding_price(cls, value: str) -> str:
        if parse_credits(value) > MAX_HOLDING_NANO_PER_HOUR:
            raise ValueError("must be at most 100 credits an hour")
        return value

    def ws_subscription_holding_nano_per_hour(self) -> int:
        return parse_credits(self.ws_subscription_holding_credits_per_hour)

    def cache_prices_nano(self) -> dict[str, int]:
        return {key: parse_credits(price) for key, price in self.cache_prices.items()}

    @field_validator("chain_cache_finality_depth")
    @classmethod
    def _depth_chain_ids(cls, value: dict[int, int]) -> dict[int, int]:
        wrong = [c for c, depth in value.items() if not 1 <= c <= MAX_CHAIN_ID or depth < 1]
        if wrong:
            raise ValueError(
                f"chain IDs must be between 1 and {MAX_CHAIN_ID}, depths >= 1: {wrong}"
            )
        return value

    @field_validator("chain_verify")
    @classmethod
    def _verify_chain_ids(cls, value: dict[int, VerifyMode]) -> dict[int, VerifyMode]:
        wrong = [chain for chain in value if not 1 <= chain <= MAX_CHAIN_ID]
        if wrong:
            raise ValueError(f"chain IDs must be between 1 and {MAX_CHAIN_ID}: {wrong}")
        return value

    @field_validator("chain_audit_rate")
    @classmethod
    def _audit_chain_ids(cls, value: dict[int, float]) -> dict[int, float]:
        wrong = [c for c, rate in value.items() if not 1 <= c <= MAX_CHAIN_ID or not 0 <= rate <= 1]
        if wrong:
            raise ValueError(
                f"chain IDs must be between 1 and {MAX_CHAIN_ID}, rates 0 to 1: {wrong}"
            )
        return value

    @field_validator("chain_max_block_lag")
    @classmethod
    def _lag_chain_ids(cls, value: dict[int, int]) -> dict[int, int]:
        wrong = [c for c, lag in value.items() if not 1 <= c <= MAX_CHAIN_ID or not lag >= 0]
        if wrong or any(lag > 1_000_000 for lag in value.values()):
            raise ValueError(
                f"chain IDs must be between 1 and {MAX_CHAIN_ID}, lags 0 to 1,000,000: {wrong}"
            )
        return value

    @field_validator("chain_tail")
    @classmethod
    def _chain_ids(cls, value: dict[int, TailOverrides]) -> dict[int, TailOverrides]:
        wrong = [chain_id for chain_id in value if not 1 <= chain_id <= MAX_CHAIN_ID]
        if wrong:
            raise ValueError(f"chain IDs must be between 1 and {MAX_CHAIN_ID}: {wrong}")
        return value

    @field_validator("redis_url", "cache_redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("database_url")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        scheme = value.split(":", 1)[0].split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("must start with sqlite:// or postgresql://")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config_file)))
        return tuple(sources)


class SettingsError(Exception):
    """Invalid settings; `str()` is the message for the operator, one line per problem."""


# Variables with the prefix that are not settings: the file pointer and the test suite's own.
_NON_SETTING_VARIABLES = frozenset({CONFIG_FILE_ENV})
_NON_SETTING_PREFIXES = ("CHAINROUTER_TEST_",)


def _describe(field_name: str, error: ErrorDetails) -> str:
    inner = ".".join(str(part) for part in error["loc"][1:])
    if error["type"] == "extra_forbidden" and inner:
        return f"{ENV_PREFIX}{field_name.upper()}: {inner} is not a known key"
    if error["type"] == "extra_forbidden":
        return f"{field_name} (in {CONFIG_FILE_ENV}): unknown setting; see docs/configuration.md"
    got = error.get("input")
    shown = "" if got is None or isinstance(got, dict) else f" (got {got!r})"
    return f"{ENV_PREFIX}{field_name.upper()}: {error_message(error)}{shown}"


def _unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A mistyped variable must not be ignored silently: it would leave a default in force."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    return sorted(
        name
        for name in environ
        if name.startswith(ENV_PREFIX)
        and name not in known
        and name not in _NON_SETTING_VARIABLES
        and not name.startswith(_NON_SETTING_PREFIXES)
    )


def load_settings(**overrides: Any) -> Settings:
    """Read and validate the settings, raising `SettingsError` with a readable message."""
    config_file = os.environ.get(CONFIG_FILE_ENV)
    if config_file:
        path = Path(config_file)
        if not path.is_file():
            raise SettingsError(f"{CONFIG_FILE_ENV}: no such file: {config_file}")
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(
                f"{CONFIG_FILE_ENV}: {config_file} is not valid TOML: {exc}"
            ) from None
    lines = [
        f"{name}: unknown setting; see docs/configuration.md"
        for name in _unknown_variables(os.environ)
    ]
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        lines += [_describe(str(err["loc"][0]) if err["loc"] else "?", err) for err in exc.errors()]
    if lines:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines))
    return settings
