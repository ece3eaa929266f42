"""Configuration: the SERVICE_* variables of the spec. A missing or out-of-range value stops the
server before it speaks MCP, with a message naming the variable and what it accepts."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.companion.config import ConfigError, load_config
from chainrouter.domain.credentials import SecretKind, generate_secret
from tests.anvil import free_port
from tests.companion.conftest import COMPANION_COMMAND, Service, companion_env

KEY = generate_secret(SecretKind.API_KEY)
TOKEN = generate_secret(SecretKind.MANAGEMENT_TOKEN)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        COMPANION_COMMAND,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_defaults_follow_the_spec() -> None:
    config = load_config({"SERVICE_API_KEY": KEY})
    assert (config.timeout_ms, config.retry_attempts) == (20_000, 2)
    assert config.management_token is None
    assert config.api_server_url == "http://127.0.0.1:8080"
    # The backup router of the default set-up (spec section 1: retries alternate with it).
    assert config.router_urls == ("http://127.0.0.1:8545", "http://127.0.0.1:8546")


def test_a_primary_set_elsewhere_has_no_default_backup() -> None:
    config = load_config({"SERVICE_API_KEY": KEY, "SERVICE_BASE_URL": "https://rpc.example"})
    assert config.router_urls == ("https://rpc.example",)


def test_urls_lose_a_trailing_slash_and_the_backup_joins_the_rotation() -> None:
    config = load_config(
        {
            "SERVICE_API_KEY": KEY,
            "SERVICE_BASE_URL": "https://rpc.example/",
            "SERVICE_BACKUP_BASE_URL": "https://rpc-backup.example",
            "SERVICE_API_SERVER_URL": "https://api.example/v/",
            "SERVICE_MGMT_TOKEN": TOKEN,
        }
    )
    assert config.router_urls == ("https://rpc.example", "https://rpc-backup.example")
    assert config.api_server_url == "https://api.example/v"
    assert config.management_token == TOKEN


def test_empty_values_count_as_unset() -> None:
    config = load_config(
        {"SERVICE_API_KEY": KEY, "SERVICE_MGMT_TOKEN": "", "SERVICE_TIMEOUT_MS": " "}
    )
    assert (config.management_token, config.timeout_ms) == (None, 20_000)


@given(st.integers(min_value=-(10**7), max_value=10**7))
def test_timeout_is_accepted_exactly_in_its_range(value: int) -> None:
    environ = {"SERVICE_API_KEY": KEY, "SERVICE_TIMEOUT_MS": str(value)}
    if 1000 <= value <= 120_000:
        assert load_config(environ).timeout_ms == value
    else:
        with pytest.raises(ConfigError, match=r"SERVICE_TIMEOUT_MS must be .* 1000 to 120000"):
            load_config(environ)


@given(st.integers(min_value=-100, max_value=100))
def test_retry_attempts_are_accepted_exactly_in_their_range(value: int) -> None:
    environ = {"SERVICE_API_KEY": KEY, "SERVICE_RETRY_ATTEMPTS": str(value)}
    if 0 <= value <= 5:
        assert load_config(environ).retry_attempts == value
    else:
        with pytest.raises(ConfigError, match=r"SERVICE_RETRY_ATTEMPTS must be .* 0 to 5"):
            load_config(environ)


@given(st.text(max_size=30))
def test_any_text_is_accepted_or_refused_with_a_named_variable(text: str) -> None:
    for name in ("SERVICE_TIMEOUT_MS", "SERVICE_RETRY_ATTEMPTS", "SERVICE_BASE_URL"):
        problem = None
        try:
            load_config({"SERVICE_API_KEY": KEY, name: text})
        except ConfigError as exc:
            problem = str(exc)
        assert problem is None or problem.startswith(name)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"SERVICE_API_KEY": None}, "SERVICE_API_KEY is required"),
        ({"SERVICE_API_KEY": "  "}, "SERVICE_API_KEY is required"),
        ({"SERVICE_API_KEY": TOKEN}, "SERVICE_API_KEY must start with 'crk_' (this looks like a"),
        ({"SERVICE_API_KEY": "crk_short"}, "SERVICE_API_KEY must have at least 32 characters"),
        ({"SERVICE_MGMT_TOKEN": KEY}, "SERVICE_MGMT_TOKEN must start with 'crm_' (this looks like"),
        (
            {"SERVICE_TIMEOUT_MS": "999"},
            "SERVICE_TIMEOUT_MS must be an integer from 1000 to 120000",
        ),
        ({"SERVICE_TIMEOUT_MS": "120001"}, "SERVICE_TIMEOUT_MS must be an integer from 1000 to"),
        ({"SERVICE_TIMEOUT_MS": "20s"}, "SERVICE_TIMEOUT_MS must be an integer from 1000 to"),
        ({"SERVICE_RETRY_ATTEMPTS": "6"}, "SERVICE_RETRY_ATTEMPTS must be an integer from 0 to 5"),
        ({"SERVICE_RETRY_ATTEMPTS": "-1"}, "SERVICE_RETRY_ATTEMPTS must be an integer from 0 to 5"),
        ({"SERVICE_BASE_URL": "127.0.0.1:8545"}, "SERVICE_BASE_URL must be an http:// or https://"),
        ({"SERVICE_BACKUP_BASE_URL": "ftp://x"}, "SERVICE_BACKUP_BASE_URL must be an http://"),
        ({"SERVICE_API_SERVER_URL": "http://:99"}, "SERVICE_API_SERVER_URL must be an http://"),
        ({"SERVICE_BASE_URL": "http://h:99999"}, "SERVICE_BASE_URL must be an http://"),
    ],
)
def test_a_bad_variable_stops_the_server_with_a_message_naming_it(
    service: Service, overrides: dict[str, str | None], message: str
) -> None:
    done = _run(companion_env(service, **overrides))
    assert done.returncode == 2
    assert done.stdout == ""  # stdout belongs to the protocol
    assert f"chainrouter mcp: {message}" in done.stderr
    secret = overrides.get("SERVICE_API_KEY") or overrides.get("SERVICE_MGMT_TOKEN")
    if secret and secret.strip():
        assert secret not in done.stderr


def test_a_token_the_api_refuses_stops_the_server(service: Service) -> None:
    unknown = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    done = _run(companion_env(service, SERVICE_MGMT_TOKEN=unknown))
    assert done.returncode == 2
    assert "SERVICE_MGMT_TOKEN was refused by the management API" in done.stderr
    assert unknown not in done.stderr


def test_a_good_configuration_serves_until_stdin_closes(service: Service) -> None:
    done = _run(companion_env(service, SERVICE_MGMT_TOKEN=service.customer_token))
    assert done.returncode == 0, done.stderr
    assert "serving 18 tools over stdio" in done.stderr  # 13 RPC, 5 customer
    assert service.api_key not in done.stderr
    assert service.customer_token not in done.stderr


def test_an_unreachable_api_at_start_leaves_the_rpc_and_customer_tools(service: Service) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    env = companion_env(
        service,
        SERVICE_MGMT_TOKEN=service.provider_token,
        SERVICE_API_SERVER_URL=dead,
        SERVICE_RETRY_ATTEMPTS="0",
    )
    done = _run(env)
    assert done.returncode == 0, done.stderr
    assert "provider tools are off until a restart" in done.stderr
    assert "serving 18 tools over stdio" in done.stderr
