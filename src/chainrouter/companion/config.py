"""The companion's configuration: the SERVICE_* environment variables of the spec, read once at
start. A missing or out-of-range value stops the server with a message that names the variable and
what it accepts, because an MCP client shows a server's stderr and little else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from chainrouter.domain.credentials import SecretKind, secret_format_problem

DEFAULT_API_SERVER_URL = "http://127.0.0.1:8080"
DEFAULT_ROUTER_URL = "http://127.0.0.1:8545"
# The backup router beside the default primary (the demo's, `chainrouter serve` on 8546): used
# when SERVICE_BACKUP_BASE_URL is unset and SERVICE_BASE_URL is the default too. A primary set
# elsewhere has no known backup, and retries go to it again.
DEFAULT_BACKUP_ROUTER_URL = "http://127.0.0.1:8546"

TIMEOUT_MS_RANGE = (1000, 120_000)
DEFAULT_TIMEOUT_MS = 20_000
RETRY_ATTEMPTS_RANGE = (0, 5)
DEFAULT_RETRY_ATTEMPTS = 2


class ConfigError(Exception):
    """A variable is missing or holds a value the companion cannot use."""


@dataclass(frozen=True)
class CompanionConfig:
    api_key: str
    management_token: str | None
    api_server_url: str
    router_url: str
    backup_router_url: str | None  # None: retries go to the primary router again
    timeout_ms: int
    retry_attempts: int

    @property
    def router_urls(self) -> tuple[str, ...]:
        """The routers that retries alternate between, primary first."""
        if self.backup_router_url is None or self.backup_router_url == self.router_url:
            return (self.router_url,)
        return (self.router_url, self.backup_router_url)


def load_config(environ: Mapping[str, str]) -> CompanionConfig:
    def value(name: str) -> str | None:
        # MCP client configurations often carry "" for a variable the user has not filled in.
        text = environ.get(name, "").strip()
        return text or None

    api_key = value("SERVICE_API_KEY")
    if api_key is None:
        raise ConfigError(
            "SERVICE_API_KEY is required: the RPC API key (crk_...) that router calls use"
        )
    _check_secret("SERVICE_API_KEY", api_key, SecretKind.API_KEY)
    token = value("SERVICE_MGMT_TOKEN")
    if token is not None:
        _check_secret("SERVICE_MGMT_TOKEN", token, SecretKind.MANAGEMENT_TOKEN)
    router = value("SERVICE_BASE_URL")
    backup = value("SERVICE_BACKUP_BASE_URL")
    if backup is None and router is None:
        backup = DEFAULT_BACKUP_ROUTER_URL
    return CompanionConfig(
        api_key=api_key,
        management_token=token,
        api_server_url=_url(
            "SERVICE_API_SERVER_URL", value("SERVICE_API_SERVER_URL") or DEFAULT_API_SERVER_URL
        ),
        router_url=_url("SERVICE_BASE_URL", router or DEFAULT_ROUTER_URL),
        backup_router_url=None if backup is None else _url("SERVICE_BACKUP_BASE_URL", backup),
        timeout_ms=_integer(
            "SERVICE_TIMEOUT_MS",
            value("SERVICE_TIMEOUT_MS"),
            DEFAULT_TIMEOUT_MS,
            TIMEOUT_MS_RANGE,
            "milliseconds per request",
        ),
        retry_attempts=_integer(
            "SERVICE_RETRY_ATTEMPTS",
            value("SERVICE_RETRY_ATTEMPTS"),
            DEFAULT_RETRY_ATTEMPTS,
            RETRY_ATTEMPTS_RANGE,
            "extra attempts after a retryable failure",
        ),
    )


def _check_secret(name: str, secret: str, kind: SecretKind) -> None:
    problem = secret_format_problem(secret, kind)
    if problem is None:
        return
    other = SecretKind.MANAGEMENT_TOKEN if kind is SecretKind.API_KEY else SecretKind.API_KEY
    hint = ""
    if secret.startswith(other.value):
        hint = (
            " (this looks like a management token)"
            if other is SecretKind.MANAGEMENT_TOKEN
            else " (this looks like an RPC API key)"
        )
    # The value itself is a secret: never echo it.
    raise ConfigError(f"{name} {problem}{hint}")


def _url(name: str, text: str) -> str:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise ConfigError(f"{name} must be an http:// or https:// URL; got {text!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must be an http:// or https:// URL; got {text!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{name} must not carry a query or fragment; got {text!r}")
    return text.rstrip("/")


def _integer(
    name: str, text: str | None, default: int, allowed: tuple[int, int], meaning: str
) -> int:
    if text is None:
        return default
    low, high = allowed
    try:
        number = int(text, 10)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ConfigError(
            f"{name} must be an integer from {low} to {high} ({meaning}); got {text!r}"
        )
    return number
