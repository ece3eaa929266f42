"""Settings: environment over an optional TOML file over defaults, validated with clear messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from chainrouter.router.latency import TailPolicy
from chainrouter.router.runtime import tail_policies
from chainrouter.settings import LogLevel, ServeRole, SettingsError, load_settings


def test_defaults_give_an_embedded_sqlite_service_on_the_conventional_ports() -> None:
    settings = load_settings()
    assert settings.database_url.startswith("sqlite:///")
    assert settings.api_port == 8080
    assert settings.role is ServeRole.ALL


def test_environment_variables_set_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINROUTER_DATABASE_URL", "postgresql://u@db/chainrouter")
    monkeypatch.setenv("CHAINROUTER_LOG_LEVEL", "debug")
    monkeypatch.setenv("CHAINROUTER_CHAIN_IMPORT_TIMEOUT_S", "5")
    settings = load_settings()
    assert settings.database_url == "postgresql://u@db/chainrouter"
    assert settings.log_level is LogLevel.DEBUG
    assert settings.chain_import_timeout_s == 5


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CHAINROUTER_LOG_LEVEL", "loud", "must be one of: 'debug', 'info', 'warning' or 'error'"),
        ("CHAINROUTER_ROLE", "proxy", "must be one of: 'rpc', 'api', 'watcher' or 'all'"),
        ("CHAINROUTER_API_PORT", "70000", "must be <= 65535"),
        ("CHAINROUTER_API_PORT", "eighty", "must be an integer"),
        ("CHAINROUTER_DATABASE_URL", "mysql://x/y", "must start with sqlite:// or postgresql://"),
        ("CHAINROUTER_CHAIN_IMPORT_MAX_BYTES", "10", "must be >= 1024"),
        ("CHAINROUTER_CHAIN_IMPORT_MAX_BYTES", str(2**40), "must be <= 268435456"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_it_accepts(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert f"{variable}: {message}" in str(caught.value)
    assert repr(value) in str(caught.value)


def test_every_bad_setting_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINROUTER_API_PORT", "0")
    monkeypatch.setenv("CHAINROUTER_LOG_LEVEL", "verbose")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "CHAINROUTER_API_PORT" in str(caught.value)
    assert "CHAINROUTER_LOG_LEVEL" in str(caught.value)


def test_a_mistyped_variable_is_an_error_not_silently_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHAINROUTER_DATABSE_URL", "postgresql://db/x")
    with pytest.raises(SettingsError, match="CHAINROUTER_DATABSE_URL: unknown setting"):
        load_settings()


def test_a_toml_file_supplies_values_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "chainrouter.toml"
    config.write_text('api_port = 9090\nlog_level = "warning"\n')
    monkeypatch.setenv("CHAINROUTER_CONFIG_FILE", str(config))
    monkeypatch.setenv("CHAINROUTER_API_PORT", "9999")
    settings = load_settings()
    assert (settings.api_port, settings.log_level) == (9999, LogLevel.WARNING)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("api_port = 0\n", "CHAINROUTER_API_PORT: must be >= 1"),
        ("colour = 'blue'\n", "colour (in CHAINROUTER_CONFIG_FILE): unknown setting"),
        ("api_port = \n", "is not valid TOML"),
    ],
)
def test_mistakes_in_the_toml_file_are_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str, message: str
) -> None:
    config = tmp_path / "chainrouter.toml"
    config.write_text(content)
    monkeypatch.setenv("CHAINROUTER_CONFIG_FILE", str(config))
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings()


def test_a_missing_settings_file_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHAINROUTER_CONFIG_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(SettingsError, match="CHAINROUTER_CONFIG_FILE: no such file"):
        load_settings()


def test_every_setting_is_in_the_configuration_reference() -> None:
    from chainrouter.settings import ENV_PREFIX, Settings
    from tests.conftest import REPO_ROOT

    reference = (REPO_ROOT / "docs" / "configuration.md").read_text()
    missing = [
        ENV_PREFIX + name.upper()
        for name in Settings.model_fields
        if f"`{ENV_PREFIX}{name.upper()}`" not in reference
    ]
    assert missing == []


def test_each_chain_may_have_its_own_hedging_and_time_outs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINROUTER_HEDGE_DELAY_FLOOR_MS", "5")
    monkeypatch.setenv(
        "CHAINROUTER_CHAIN_TAIL", '{"137": {"hedge_max": 0, "upstream_timeout_s": 4}}'
    )
    policies = tail_policies(load_settings())
    assert policies.policy(1) == TailPolicy(hedge_floor_s=0.005)
    assert policies.policy(137) == TailPolicy(
        hedge_max=0, hedge_floor_s=0.005, timeout_ceiling_s=4.0
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"0": {"hedge_max": 1}}', "chain IDs must be between 1"),
        ('{"1": {"hedge_maximum": 1}}', "hedge_maximum"),
        ('{"1": {"hedge_max": 9}}', "must be <= 8"),
    ],
)
def test_a_bad_chain_tail_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("CHAINROUTER_CHAIN_TAIL", value)
    with pytest.raises(SettingsError, match=message):
        load_settings()


@pytest.mark.parametrize(
    "prices",
    ['{"*:*": "0.1"}', '{"0:eth_call": "0.1"}', '{"1:": "0.1"}', '{"*": "-0.1"}', '{"*": "1e-7"}'],
)
def test_a_cache_price_list_that_could_bill_other_than_it_shows_is_refused(
    monkeypatch: pytest.MonkeyPatch, prices: str
) -> None:
    monkeypatch.setenv("CHAINROUTER_CACHE_PRICES", prices)
    with pytest.raises(SettingsError, match="CACHE_PRICES"):
        load_settings()
