import os
import subprocess
import sys

import pytest

from common.config import SETTINGS, default_config, load_config
from common.errors import ConfigError
from launch.process import REPO_ROOT


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
    {"cursor_writer_ops_per_transaction_max": 2_000, "metadata_put_many_ops_max": 1_000},
    {"ledger_bookie_request_payload_bytes_max": 8 * 1024 * 1024},  # over bookie_entry_bytes_max
    {"metadata_async_threads_max": 16, "metadata_pool_connections": 4, "metadata_pool_overflow_max": 8},
    {"bookie_bind_host": "0.0.0.0"},                         # a wildcard bind needs an advertised host
    {"bookie_bind_host": "::"},
    {"bookie_advertised_host": "0.0.0.0"},                   # nobody can connect to a wildcard
    {"broker_advertised_host": "0.0.0.0"},
    {"broker_bind_host": ""},
])
def test_bad_values_are_typed_errors(bad):
    with pytest.raises(ConfigError):
        default_config(**bad)


def test_listen_and_advertised_hosts():
    cfg = default_config(bookie_bind_host="0.0.0.0", bookie_advertised_host="bookie-1",
                         broker_bind_host="::", broker_advertised_host="broker-1")
    assert (cfg.bookie_bind_host, cfg.bookie_advertised_host) == ("0.0.0.0", "bookie-1")
    # every port listens on loopback unless told otherwise (a deployment sets 0.0.0.0, compose.yaml does)
    cfg = default_config()
    assert (cfg.broker_bind_host, cfg.broker_admin_bind_host) == ("127.0.0.1", "127.0.0.1")
    assert (cfg.bookie_bind_host, cfg.bookie_advertised_host) == ("127.0.0.1", "")


def test_every_setting_has_a_unit_or_is_a_count_flag_or_name():
    """Names carry units: a number is in _ms/_s/_minutes/_seconds/_bytes/_mb, or is a
    count (_max/_entries/...), a port, a ratio; strings are hosts or a transport name."""
    units = ("_ms", "_bytes", "_bytes_max", "_bytes_min", "_bytes_high", "_mb", "_minutes", "_seconds")
    counts = ("_max", "_entries", "_size", "_quorum", "_port", "_connections", "_per_pass",
              "_ratio_max", "_bundles", "_partitions")
    for s in SETTINGS:
        if s.type in (int, float):
            assert s.name.endswith(units + counts), s.name
            assert s.min is not None and s.max is not None, s.name
        assert s.doc, s.name


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


# Retention pairs (time minutes, size MB), Pulsar's meanings: 0 = keep nothing acked, -1 = no
# bound. A 0 makes sense only paired with 0: (0, -1) would say "keep nothing" and "keep forever".
RETENTION_REFUSED = [(0, -1), (-1, 0), (0, 10), (10, 0)]
RETENTION_ACCEPTED = [(0, 0), (-1, -1), (-1, 5), (5, -1), (5, 10)]


def _retention_env(time_minutes: int, size_mb: int) -> dict[str, str]:
    return {"STRATA_RETENTION_TIME_MINUTES": str(time_minutes), "STRATA_RETENTION_SIZE_MB": str(size_mb)}


@pytest.mark.parametrize("time_minutes,size_mb", RETENTION_REFUSED)
def test_retention_with_a_lone_zero_is_refused(tmp_path, time_minutes, size_mb):
    f = tmp_path / "strata.toml"
    f.write_text(f"[strata]\nretention_time_minutes = {time_minutes}\nretention_size_mb = {size_mb}\n")
    with pytest.raises(ConfigError, match="retention"):
        load_config(f, env={})
    with pytest.raises(ConfigError, match="retention"):
        load_config(env=_retention_env(time_minutes, size_mb))


@pytest.mark.parametrize("time_minutes,size_mb", RETENTION_ACCEPTED)
def test_retention_pairs_that_make_sense_are_accepted(time_minutes, size_mb):
    cfg = load_config(env=_retention_env(time_minutes, size_mb))
    assert (cfg.retention_time_minutes, cfg.retention_size_mb) == (time_minutes, size_mb)


@pytest.mark.parametrize("time_minutes,size_mb", [(0, -1), (-1, 0)])
def test_standalone_refuses_to_start_with_a_lone_zero_retention(tmp_path, time_minutes, size_mb):
    """The real start-up path: `strata standalone` exits 2 with the reason, before any bookie
    or broker runs (so nothing listens and nothing is written but the empty data dir)."""
    env = {**os.environ, **_retention_env(time_minutes, size_mb)}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(tmp_path / "d"),
                           "--port", "0", "--admin-port", "0"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "retention: 0 is valid only paired with 0" in proc.stderr
    assert not list((tmp_path / "d").iterdir())
