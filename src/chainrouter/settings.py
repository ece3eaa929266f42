"""Process settings: `CHAINROUTER_*` environment variables over an optional TOML file over defaults.

Settings are validated once at start; `SettingsError` carries one line per bad setting, naming the
environment variable and what it accepts, and the command line exits non-zero with it.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from chainrouter.validation import error_message

ENV_PREFIX = "CHAINROUTER_"
CONFIG_FILE_ENV = "CHAINROUTER_CONFIG_FILE"


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class ServeRole(StrEnum):
    RPC = "rpc"  # the RPC router (data plane) only
    API = "api"  # the management API only
    ALL = "all"


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
    log_level: LogLevel = Field(default=LogLevel.INFO, description="debug, info, warning or error.")
    chain_import_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Largest chain catalog `chains import` downloads or reads, in bytes.",
    )
    chain_import_timeout_s: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="Time limit for downloading a chain catalog, seconds.",
    )

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
