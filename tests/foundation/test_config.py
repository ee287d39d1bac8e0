import pytest

from common.config import SETTINGS, default_config, load_config
from common.errors import ConfigError


def test_defaults_validate():
    cfg = default_config()
    for s in SETTINGS:
        assert getattr(cfg, s.name) == s.default


def test_file_env_and_override_precedence(tmp_path):
    f = tmp_path / "strata.toml"
    f.write_text("[strata]\nbroker_port = 7000\nledger_add_timeout_ms = 2000\n")
    cfg = load_config(f, env={"STRATA_BROKER_PORT": "7100"}, ledger_add_timeout_ms=3000)
    assert cfg.broker_port == 7100
    assert cfg.ledger_add_timeout_ms == 3000


@pytest.mark.parametrize("bad", [
    {"broker_port": 70000},
    {"broker_port": "abc"},
    {"bookie_unsafe_skip_fsync": "maybe"},
    {"no_such_setting": 1},
    {"ledger_ensemble_size": 1, "ledger_write_quorum": 2},
    {"retention_time_minutes": 0, "retention_size_mb": 10},
])
def test_bad_values_are_typed_errors(bad):
    with pytest.raises(ConfigError):
        default_config(**bad)


def test_unknown_setting_in_file(tmp_path):
    f = tmp_path / "strata.toml"
    f.write_text("bogus = 1\n")
    with pytest.raises(ConfigError):
        load_config(f, env={})


def test_config_is_read_only():
    cfg = default_config()
    with pytest.raises(AttributeError):
        cfg.broker_port = 1
    assert cfg.replace(broker_port=1234).broker_port == 1234
