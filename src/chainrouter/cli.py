"""The `chainrouter` command line.

Exit codes: 0 success, 1 the work failed (bad operator file, unreachable database, ...),
2 bad usage or invalid settings.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from chainrouter.logs import configure_logging
from chainrouter.net.http_bounds import BoundedHttpTools
from chainrouter.settings import RpcServer, ServeRole, Settings, SettingsError, load_settings

log = logging.getLogger("chainrouter")

EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure to report in one message and exit with `EXIT_FAILED`."""


def _engine(settings: Settings, *, require_schema: bool = True) -> Engine:
    from chainrouter.stores.sql.engine import create_database_engine
    from chainrouter.stores.sql.migrate import SchemaNotCurrentError, require_current_schema

    engine = create_database_engine(settings.database_url)
    if require_schema:
        try:
            require_current_schema(engine)
        except SchemaNotCurrentError as exc:
            raise CommandError(str(exc)) from None
    return engine


def _cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from chainrouter.stores.sql import migrate

    engine = _engine(settings, require_schema=False)
    if args.current:
        print(migrate.current_revision(engine) or "(empty)")
        return 0
    if args.downgrade:
        migrate.downgrade(engine, args.downgrade)
    else:
        migrate.upgrade(engine, args.revision)
    print(f"database schema at revision {migrate.current_revision(engine) or '(empty)'}")
    return 0


def _cmd_apply(settings: Settings, args: argparse.Namespace) -> int:
    from chainrouter.operator_config.apply import apply_config
    from chainrouter.operator_config.load import ConfigFileError, load_config_file
    from chainrouter.operator_config.model import json_schema

    if args.print_schema:
        print(json.dumps(json_schema(), indent=2))
        return 0
    if args.file is None:
        raise CommandError("apply needs a FILE (or --print-schema)")
    try:
        config = load_config_file(Path(args.file))
        report = apply_config(_engine(settings), config, dry_run=args.dry_run)
    except ConfigFileError as exc:
        print(f"{args.file}: nothing was applied:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_FAILED
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    heading = "dry run, nothing was written" if args.dry_run else "applied"
    print(f"{args.file}: {heading}" + ("" if report.changed else " (no changes)"))
    for line in report.summary_lines():
        print(f"  {line}")
    if report.generated:
        print("\nNew secrets, shown this once (only their hashes are stored):")
        for item in report.generated:
            print(f"  {item.path} ({item.owner_email}, {item.name!r}): {item.secret}")
    return 0


def _cmd_chains_import(settings: Settings, args: argparse.Namespace) -> int:
    from chainrouter.catalog.importer import import_catalog
    from chainrouter.catalog.parse import CatalogFormatError
    from chainrouter.catalog.source import CatalogSourceError

    try:
        report = import_catalog(
            _engine(settings),
            args.source,
            max_bytes=settings.chain_import_max_bytes,
            timeout_s=settings.chain_import_timeout_s,
        )
    except (CatalogSourceError, CatalogFormatError) as exc:
        raise CommandError(f"{args.source}: {exc}") from None
    for problem in report.problems:
        print(f"skipped {problem}", file=sys.stderr)
    print(report.summary())
    return 0


def _cmd_tokens(settings: Settings, args: argparse.Namespace) -> int:
    from chainrouter.domain.enums import Role
    from chainrouter.management import admin
    from chainrouter.management.errors import ManagementError

    engine = _engine(settings)
    try:
        if args.tokens_command == "create":
            customer = admin.find_customer(engine, args.customer)
            issued = admin.issue_token(engine, customer.id, label=args.label, role=Role(args.role))
            print(f"token {issued.token.id} ({issued.token.role.value}) for {customer.email}")
            print(f"secret, shown this once: {issued.secret}")
        elif args.tokens_command == "revoke":
            token = admin.revoke_token(engine, args.token_id)
            print(f"token {token.id} ({token.label!r}) revoked at {token.revoked_at}")
        else:
            customer = admin.find_customer(engine, args.customer)
            for token in admin.list_tokens(engine, customer.id):
                state = "revoked" if token.revoked_at else "active"
                print(f"{token.id}\t{token.role.value}\t{state}\t{token.token_hint}\t{token.label}")
    except ManagementError as exc:
        raise CommandError(exc.message) from None
    return 0


def _cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    role = ServeRole(args.role) if args.role else settings.role
    _engine(settings).dispose()  # fail fast, with one clear message, on a bad database or schema
    if role is ServeRole.API:
        return _serve_api(settings)
    if role is ServeRole.RPC:
        return _serve_rpc(settings)
    if role is ServeRole.WATCHER:
        return _serve_watcher(settings)
    # All: the management API in a child process, the router in this one; each has its own
    # server and event loop, as they would when run as separate roles. The deposit watcher too,
    # in a child of its own, when it has a key to read with.
    roles = [ServeRole.API] + ([ServeRole.WATCHER] if settings.deposit_watch_api_key else [])
    children = [
        subprocess.Popen(  # noqa: S603 (this same program, a role of the enum)
            [sys.executable, "-m", "chainrouter.cli", "serve", "--role", r.value]
        )
        for r in roles
    ]
    try:
        return _serve_rpc(settings)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def _serve_watcher(settings: Settings) -> int:
    from chainrouter.payments.watcher import run_watcher, watcher_url

    if not settings.deposit_watch_api_key:
        raise CommandError(
            "the deposit watcher needs CHAINROUTER_DEPOSIT_WATCH_API_KEY, an API key of the "
            "operator's to read chains through the router with (docs/billing.md)"
        )
    depths = settings.chain_cache_finality_depth
    return run_watcher(
        _engine(settings),
        url=watcher_url(settings.deposit_watch_rpc_url, settings.rpc_host, settings.rpc_port),
        api_key=settings.deposit_watch_api_key,
        interval_s=settings.deposit_watch_interval_s,
        finality_depth=lambda chain_id: depths.get(chain_id, settings.cache_finality_depth),
    )


def _serve_api(settings: Settings) -> int:
    import uvicorn

    from chainrouter.api.app import build_api_app

    uvicorn.run(
        build_api_app(_engine(settings), settings),
        host=settings.api_host,
        port=settings.api_port,
        # Slow heads and bodies are bounded, and so are the connections held at once.
        http=BoundedHttpTools.bound(
            settings.request_head_timeout_s, settings.request_body_timeout_s
        ),
        limit_concurrency=settings.max_connections,
        log_level=settings.log_level.value,
        log_config=None,  # its records go through our handler (logs.py): JSON or text alike
        access_log=False,
        # The client's address is decided by CHAINROUTER_TRUSTED_PROXIES alone (net/client_ip.py):
        # uvicorn would otherwise take X-Forwarded-For from any peer on 127.0.0.1.
        proxy_headers=False,
    )
    return 0


def _serve_rpc(settings: Settings) -> int:
    if settings.free_tier_enabled and not settings.trusted_proxies:
        log.info("free tier on: client IPs are taken from the socket (no trusted proxies)")
    if settings.rpc_server is RpcServer.NATIVE:
        from chainrouter.router.executors.native import serve_native

        return serve_native(settings)

    import uvicorn

    # uvicorn stops gracefully on SIGTERM or SIGINT, then raises the signal again under the
    # handlers it found: these make that a clean exit (status 0), the usage written.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    options: dict[str, Any] = {
        "factory": True,
        "host": settings.rpc_host,
        "port": settings.rpc_port,
        "loop": "uvloop",
        "http": BoundedHttpTools,  # bounds set by each worker from its settings (executors/asgi.py)
        "ws_max_size": settings.ws_max_message_bytes,
        "limit_concurrency": settings.max_connections,
        "lifespan": "on",
        # The client's address is the router's to decide (trusted proxies), never uvicorn's.
        "proxy_headers": False,
        "server_header": False,
        "date_header": False,
        "access_log": False,
        "log_level": settings.log_level.value,
        "log_config": None,  # its records go through our handler (logs.py): JSON or text alike
        "backlog": 2048,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
    }
    app = "chainrouter.router.executors.asgi:create_app"
    if settings.rpc_workers > 1:
        # uvicorn's supervisor stops its workers itself: no drain delay (docs/deployment.md).
        uvicorn.run(app, workers=settings.rpc_workers, **options)
        return 0
    from chainrouter.router.executors.asgi import DrainingServer

    server = DrainingServer(uvicorn.Config(app, **options), delay_s=settings.drain_delay_s)
    server.run()
    return 0 if server.started else EXIT_FAILED  # as uvicorn.run: a failed start is a failure


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chainrouter",
        description="JSON-RPC router for EVM chains. Settings come from CHAINROUTER_* variables "
        "(see docs/configuration.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the service")
    serve.add_argument("--role", choices=[r.value for r in ServeRole], help="overrides the setting")
    serve.set_defaults(handler=_cmd_serve)

    apply = commands.add_parser("apply", help="create or update what an operator file declares")
    apply.add_argument("file", nargs="?", help="operator configuration file (YAML)")
    apply.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    apply.add_argument("--print-schema", action="store_true", help="print the file's JSON Schema")
    apply.set_defaults(handler=_cmd_apply)

    chains = commands.add_parser("chains", help="the chain catalog")
    chain_commands = chains.add_subparsers(dest="chains_command", required=True, metavar="ACTION")
    chains_import = chain_commands.add_parser(
        "import", help="import chain metadata in the ethereum-lists chains.json format"
    )
    chains_import.add_argument("source", help="a file path or an http(s) URL")
    chains_import.set_defaults(handler=_cmd_chains_import)

    tokens = commands.add_parser("tokens", help="management tokens")
    token_commands = tokens.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    create = token_commands.add_parser("create", help="issue a token (the secret is shown once)")
    create.add_argument("--customer", required=True, help="customer id or e-mail")
    create.add_argument("--label", required=True, help="what the token is for")
    create.add_argument(
        "--role", default="customer", choices=["customer", "agent", "administrator"]
    )
    revoke = token_commands.add_parser("revoke", help="revoke a token for good")
    revoke.add_argument("token_id", type=int)
    listing = token_commands.add_parser("list", help="a customer's tokens (never the secrets)")
    listing.add_argument("--customer", required=True, help="customer id or e-mail")
    tokens.set_defaults(handler=_cmd_tokens)

    migrate = commands.add_parser("migrate", help="bring the database schema up to date")
    migrate.add_argument("--revision", default="head", help="target revision (default: head)")
    migrate.add_argument("--downgrade", metavar="REVISION", help="go down to REVISION ('base')")
    migrate.add_argument("--current", action="store_true", help="print the current revision")
    migrate.set_defaults(handler=_cmd_migrate)

    commands.add_parser(
        "mcp",
        help="the companion MCP server over stdio (configured by SERVICE_* variables)",
        description="Runs the companion MCP server on stdin/stdout for an AI agent's MCP client. "
        "It reads SERVICE_API_KEY (required), SERVICE_MGMT_TOKEN, SERVICE_API_SERVER_URL, "
        "SERVICE_BASE_URL, SERVICE_BACKUP_BASE_URL, SERVICE_TIMEOUT_MS and "
        "SERVICE_RETRY_ATTEMPTS; see docs/mcp-companion.md.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "mcp":
        # The companion runs on a user's machine: it has its own settings (SERVICE_*), not the
        # service's, and no database.
        from chainrouter.companion.server import main as companion_main

        return companion_main()
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"chainrouter: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(settings.log_level, settings.log_format)
    handler: Callable[[Settings, argparse.Namespace], int] = args.handler
    try:
        return handler(settings, args)
    except CommandError as exc:
        print(f"chainrouter: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OperationalError as exc:
        from chainrouter.stores.sql.engine import describe_database

        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        print(
            f"chainrouter: cannot use the database {describe_database(settings.database_url)}: "
            f"{reason}",
            file=sys.stderr,
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
