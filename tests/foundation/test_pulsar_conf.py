"""common.pulsar_conf: Pulsar's broker.conf / standalone.conf keys read as Strata settings."""

from __future__ import annotations

import logging

import pytest

from common import pulsar_conf
from common.config import load_config
from common.errors import ConfigError
from common.pulsar_conf import parse_properties, read_pulsar_conf

SECURE_CONF = """\
# a TLS-only broker with token and mTLS authentication, as Pulsar's security docs set it up
brokerServicePort=
brokerServicePortTls=6651
webServicePort=
webServicePortTls=8443
bindAddress=127.0.0.1
advertisedAddress=localhost
clusterName=recipe
tlsCertificateFilePath=/etc/pulsar/broker.cert.pem
tlsKeyFilePath=/etc/pulsar/broker.key-pk8.pem
tlsTrustCertsFilePath=/etc/pulsar/ca.cert.pem
tlsRequireTrustedClientCertOnConnect=false
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,\\
  org.apache.pulsar.broker.authentication.AuthenticationProviderTls
tokenSecretKey=file:///etc/pulsar/secret.key
tokenAuthClaim=
tokenAudienceClaim=aud
tokenAudience=strata
tokenAllowedClockSkewSeconds=5
authenticationRefreshCheckSeconds=30
authorizationEnabled=true
authorizationProvider=org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider
superUserRoles=admin, broker ,
anonymousUserRole=
authorizationAllowWildcardsMatching=true
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=token:eyJhbGciOiJIUzI1NiJ9.e30.sig
"""


def _write(tmp_path, text: str, name: str = "broker.conf"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_properties_syntax():
    props = parse_properties("# comment\n! bang comment\n\n  a = 1 \nb:2\nc 3\nd=\ne=x\\\n   y\n"
                             "f=tab\\tand\\u0041\ng=first\ng=last\nh\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "", "e": "xy", "f": "tab\tandA", "g": "last", "h": ""}


def test_security_keys_map_to_our_settings(tmp_path):
    values = read_pulsar_conf(_write(tmp_path, SECURE_CONF), env={})
    assert values["broker_port"] == -1 and values["broker_admin_port"] == -1      # blank port: not served
    assert values["broker_tls_port"] == 6651 and values["broker_admin_tls_port"] == 8443
    assert values["broker_bind_host"] == values["broker_admin_bind_host"] == "127.0.0.1"
    assert values["broker_advertised_host"] == "localhost" and values["cluster_name"] == "recipe"
    assert values["tls_key_file"] == "/etc/pulsar/broker.key-pk8.pem"
    assert values["tls_require_trusted_client_cert_on_connect"] is False
    assert values["authentication_enabled"] is True
    assert values["authentication_providers"] == "token,tls"
    assert values["token_secret_key"] == "file:///etc/pulsar/secret.key"
    assert "token_auth_claim" not in values                       # blank: the default (sub) stays
    assert values["token_audience"] == "strata" and values["token_allowed_clock_skew_seconds"] == 5
    assert values["authentication_refresh_check_interval_ms"] == 30_000
    assert values["super_user_roles"] == "admin,broker"
    assert "anonymous_user_role" not in values
    assert values["authorization_allow_wildcards_matching"] is True
    assert values["broker_client_auth_token"] == "eyJhbGciOiJIUzI1NiJ9.e30.sig"


def test_load_config_reads_a_conf_file_and_env_still_wins(tmp_path):
    path = _write(tmp_path, SECURE_CONF)
    config = load_config(path, env={"STRATA_BROKER_TLS_PORT": "7651"})
    assert config.broker_tls_port == 7651 and config.broker_port == -1
    assert config.authorization_enabled and config.super_user_roles == "admin,broker"
    assert config.token_auth_claim == "sub"


def test_retention_ttl_offload_and_quota_keys(tmp_path):
    text = ("defaultRetentionTimeInMinutes=60\ndefaultRetentionSizeInMB=100\nttlDurationDefaultInSeconds=30\n"
            "backlogQuotaCheckIntervalInSeconds=5\nbacklogQuotaDefaultLimitGB=2\nbacklogQuotaDefaultLimitBytes=7\n"
            "backlogQuotaDefaultRetentionPolicy=producer_exception\nmanagedLedgerOffloadDriver=aws-s3\n"
            "s3ManagedLedgerOffloadBucket=cold\nmanagedLedgerOffloadDeletionLagMs=1000\n"
            "managedLedgerOffloadThresholdInSeconds=-1\nmanagedLedgerMaxLedgerRolloverTimeMinutes=5\n"
            "managedLedgerMinLedgerRolloverTimeMinutes=1\nmanagedLedgerMaxSizePerLedgerMbytes=16\n")
    config = load_config(_write(tmp_path, text), env={})
    assert (config.retention_time_minutes, config.retention_size_mb, config.ttl_seconds) == (60, 100, 30)
    assert config.backlog_quota_check_interval_ms == 5_000
    assert config.backlog_quota_default_limit_bytes == 2 * 1024 ** 3      # Pulsar: GB > 0 wins over Bytes
    assert config.backlog_quota_default_policy == "producer_exception"
    assert config.offload_driver == "s3" and config.offload_s3_bucket == "cold"
    assert config.offload_deletion_lag_ms == 1000 and config.offload_threshold_seconds == -1
    assert config.managed_ledger_rollover_age_ms == 300_000 and config.managed_ledger_rollover_min_age_ms == 60_000
    assert config.managed_ledger_rollover_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("line, pulsar_key", [
    ("brokerServicePortTls=sixty", "brokerServicePortTls"),
    ("webServicePortTls=70000", "webServicePortTls"),
    ("authenticationEnabled=yes please", "authenticationEnabled"),
    ("authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderSasl",
     "authenticationProviders"),
    ("authenticationRefreshCheckSeconds=-5", "authenticationRefreshCheckSeconds"),
    ("managedLedgerOffloadDriver=filesystem", "managedLedgerOffloadDriver"),
    ("backlogQuotaDefaultRetentionPolicy=drop_everything", "backlogQuotaDefaultRetentionPolicy"),
    ("backlogQuotaDefaultLimitGB=lots", "backlogQuotaDefaultLimitGB"),
])
def test_a_bad_value_names_the_pulsar_key(tmp_path, line, pulsar_key):
    with pytest.raises(ConfigError) as caught:
        read_pulsar_conf(_write(tmp_path, line + "\n"), env={})
    assert pulsar_key in str(caught.value)


def test_a_bad_secret_is_not_echoed(tmp_path):
    with pytest.raises(ConfigError) as caught:
        read_pulsar_conf(_write(tmp_path, 'brokerClientAuthenticationParameters={"tokn": "s3cr3t"}\n'), env={})
    assert "brokerClientAuthenticationParameters" in str(caught.value) and "s3cr3t" not in str(caught.value)


def test_unmapped_keys_are_warned_once_and_ignored(tmp_path, caplog):
    path = _write(tmp_path, "zookeeperServers=zk:2181\nnumIOThreads=\nbrokerServicePort=6650\n"
                            "authorizationProvider=org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider\n"
                            "proxyRoles=proxy\n")
    pulsar_conf._warned_files.discard(str(path))
    with caplog.at_level(logging.WARNING, logger="strata.config"):
        assert read_pulsar_conf(path, env={}) == {"broker_port": 6650}
        read_pulsar_conf(path, env={})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "proxyRoles" in warnings[0] and "zookeeperServers" in warnings[0]
    assert "numIOThreads" not in warnings[0] and "authorizationProvider" not in warnings[0]   # blank / as Strata


def test_basic_auth_conf_from_pulsar_extra_opts(tmp_path):
    path = _write(tmp_path, "basicAuthConf=\n")
    env = {"PULSAR_EXTRA_OPTS": "-Xmx1g -Dpulsar.auth.basic.conf=/etc/pulsar/.htpasswd"}
    assert read_pulsar_conf(path, env=env) == {"basic_auth_conf": "/etc/pulsar/.htpasswd"}
    set_in_file = _write(tmp_path, "basicAuthConf=file:///a/htpasswd\n", "b.conf")
    assert read_pulsar_conf(set_in_file, env=env) == {"basic_auth_conf": "file:///a/htpasswd"}   # the setting first


def test_broker_client_parameters_forms(tmp_path):
    for raw, expected in (("file:///etc/broker.token", "file:///etc/broker.token"),
                          ('{"token": "abc.def.ghi"}', "abc.def.ghi"), ("abc.def.ghi", "abc.def.ghi")):
        path = _write(tmp_path, f"brokerClientAuthenticationParameters={raw}\n")
        assert read_pulsar_conf(path, env={})["broker_client_auth_token"] == expected
    other_plugin = _write(tmp_path, "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth."
                                    "AuthenticationTls\nbrokerClientAuthenticationParameters=tlsCertFile:/c\n")
    assert "broker_client_auth_token" not in read_pulsar_conf(other_plugin, env={})


def test_relations_still_checked_after_mapping(tmp_path):
    with pytest.raises(ConfigError):       # both Pulsar ports off: nothing served
        load_config(_write(tmp_path, "brokerServicePort=\nbrokerServicePortTls=\n"), env={})


# The keys Strata maps, at the values Pulsar's own conf/standalone.conf ships (blank ones included),
# plus a few it ignores: such a file loads, and changes only what it says.
PULSAR_STANDALONE_DEFAULTS = {
    "brokerServicePort": "6650", "webServicePort": "8080", "bindAddress": "0.0.0.0", "advertisedAddress": "",
    "clusterName": "standalone", "backlogQuotaCheckEnabled": "true", "backlogQuotaCheckIntervalInSeconds": "60",
    "backlogQuotaDefaultLimitGB": "10", "backlogQuotaDefaultLimitSecond": "-1", "ttlDurationDefaultInSeconds": "0",
    "brokerDeduplicationMaxNumberOfProducers": "10000", "brokerDeduplicationEntriesInterval": "1000",
    "defaultNumberOfNamespaceBundles": "4", "maxUnackedMessagesPerConsumer": "50000", "tlsCertificateFilePath": "",
    "tlsKeyFilePath": "", "tlsTrustCertsFilePath": "", "tlsRequireTrustedClientCertOnConnect": "false",
    "authenticationEnabled": "false", "authenticationProviders": "", "authorizationEnabled": "false",
    "authorizationProvider": "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider",
    "authorizationAllowWildcardsMatching": "false", "superUserRoles": "", "brokerClientAuthenticationPlugin": "",
    "brokerClientAuthenticationParameters": "", "anonymousUserRole": "", "basicAuthConf": "", "tokenSecretKey": "",
    "tokenPublicKey": "", "tokenAuthClaim": "", "tokenAudienceClaim": "", "tokenAudience": "",
    "managedLedgerDefaultEnsembleSize": "1", "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1", "managedLedgerMaxEntriesPerLedger": "50000",
    "managedLedgerMinLedgerRolloverTimeMinutes": "10", "managedLedgerMaxLedgerRolloverTimeMinutes": "240",
    "managedLedgerMaxSizePerLedgerMbytes": "2048", "defaultRetentionTimeInMinutes": "0",
    "defaultRetentionSizeInMB": "0", "keepAliveIntervalSeconds": "30", "exposeTopicLevelMetricsInPrometheus": "true",
    "metadataStoreUrl": "", "numIOThreads": "", "tlsEnabled": "false", "webSocketServiceEnabled": "true",
}


def test_pulsar_standalone_defaults_load(tmp_path):
    text = "\n".join(f"{key}={value}" for key, value in PULSAR_STANDALONE_DEFAULTS.items()) + "\n"
    config = load_config(_write(tmp_path, text, "standalone.conf"), env={})
    defaults = load_config(env={})
    assert (config.broker_port, config.broker_admin_port, config.broker_tls_port) == (6650, 8080, -1)
    assert config.broker_bind_host == config.broker_admin_bind_host == "0.0.0.0"
    assert config.backlog_quota_default_limit_bytes == 10 * 1024 ** 3
    assert not config.authentication_enabled and not config.authorization_enabled
    assert config.managed_ledger_rollover_bytes == 2 * 1024 ** 3
    for name in ("token_auth_claim", "token_audience_claim", "broker_advertised_host", "retention_time_minutes",
                 "managed_ledger_rollover_age_ms", "broker_keepalive_interval_ms", "ledger_ensemble_size"):
        assert getattr(config, name) == getattr(defaults, name), name
