"""Pulsar's broker.conf / standalone.conf read as Strata settings.

    values = read_pulsar_conf("conf/standalone.conf")      # {"broker_tls_port": 6651, ...}
    config = load_config("conf/standalone.conf")            # the same, through common.config

The file is Java properties (`key=value`, `key: value` or `key value`; `#` and `!` comment lines;
a trailing backslash continues a line; `\\t`, `\\uXXXX`... escapes; the last of a repeated key wins),
values trimmed as Pulsar's configuration loader trims them. Each Pulsar key in `PULSAR_KEYS` names
the Strata setting(s) it sets and how its value converts (seconds to our `_ms`, megabytes to bytes,
Pulsar's provider class names to ours, ...).

- A blank value (`tokenSecretKey=`) is unset: the setting keeps its default. Except the four
  ports, where blank is Pulsar's "not served" (apache/pulsar#11681: `brokerServicePort=` and
  `webServicePort=` turn the plain ports off): -1 here.
- `basicAuthConf` may instead come as Pulsar's Java system property `pulsar.auth.basic.conf`,
  which Pulsar users set through `PULSAR_EXTRA_OPTS="-Dpulsar.auth.basic.conf=/path/.htpasswd"`
  (AuthenticationProviderBasic reads the setting first, then that property); read from the
  environment given to `read_pulsar_conf`.
- `backlogQuotaDefaultLimitGB` > 0 wins over `backlogQuotaDefaultLimitBytes`, as in Pulsar's
  BacklogQuotaManager.
- A key Strata does not map is ignored; those with a value are named in one WARNING per file
  per process (a real broker.conf has hundreds, most for components Strata does not have).

What must hold: a mapped key with a value that does not convert, or lies outside the setting's
bounds, is a ConfigError naming the Pulsar key (and the file), never a silent default. Relations
between settings are checked afterwards by common.config, as for a TOML file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import SETTINGS_BY_NAME, auth_providers, csv_setting
from common.errors import ConfigError

log = logging.getLogger("strata.config")

GIB = 1024 * 1024 * 1024
MIB = 1024 * 1024
BASIC_CONF_PROPERTY = "pulsar.auth.basic.conf"       # Pulsar's Java system property for basicAuthConf
TOKEN_CLIENT_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
DEFAULT_AUTHORIZATION_PROVIDER = "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"
_INT = re.compile(r"[+-]?\d+")
_SECRET_KEYS = frozenset({"brokerClientAuthenticationParameters", "tokenSecretKey", "basicAuthConf"})
_warned_files: set[str] = set()     # files whose ignored keys were logged (once per process)


def _int(raw: str) -> int:
    if not _INT.fullmatch(raw):
        raise ValueError("an integer")
    return int(raw)


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise ValueError("true or false")
    return lowered == "true"


def _text(raw: str) -> str:
    return raw


def _choice(*allowed: str) -> Callable[[str], str]:
    def convert(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(" or ".join(allowed))
        return raw
    return convert


def _times(factor: int) -> Callable[[str], int]:
    def convert(raw: str) -> int:
        value = _int(raw)
        return value if value < 0 else value * factor    # -1 stays "off"
    return convert


def _providers(raw: str) -> str:
    try:
        return ",".join(auth_providers({"authentication_providers": raw}))
    except ConfigError:
        raise ValueError("a comma list of AuthenticationProviderToken, AuthenticationProviderTls, "
                         "AuthenticationProviderBasic (org.apache.pulsar.broker.authentication.*)") from None


def _roles(raw: str) -> str:
    return ",".join(csv_setting(raw))


def _offload_driver(raw: str) -> str:
    if raw.lower() in ("s3", "aws-s3"):
        return "s3"
    raise ValueError("S3 or aws-s3 (Strata offloads to S3 only)")


def _broker_client_token(raw: str) -> str:
    """brokerClientAuthenticationParameters of Pulsar's AuthenticationToken: token:<jwt>,
    file:///path, or the JSON {"token": ...} / {"file": ...}; our setting takes the JWT or the file."""
    if raw.startswith("token:"):
        return raw[len("token:"):]
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except ValueError:
            raise ValueError('token:<jwt>, file:///path or {"token": "<jwt>"}') from None
        found = data.get("token") or data.get("file") if isinstance(data, dict) else None
        if not isinstance(found, str) or not found:
            raise ValueError('token:<jwt>, file:///path or {"token": "<jwt>"}')
        return found
    return raw


@dataclass(frozen=True)
class PulsarKey:
    pulsar: str                          # Pulsar's name
    ours: tuple[str, ...]                # the Strata setting(s) it sets
    convert: Callable[[str], Any]        # Pulsar's text -> our value (ValueError: what was expected)
    blank: Any = None                    # the value a blank sets (None: blank leaves the default)


def _key(pulsar: str, ours: str | tuple[str, ...], convert: Callable[[str], Any] = _text,
         blank: Any = None) -> PulsarKey:
    return PulsarKey(pulsar, (ours,) if isinstance(ours, str) else ours, convert, blank)


PULSAR_KEYS: tuple[PulsarKey, ...] = (
    # ports and addresses
    _key("brokerServicePort", "broker_port", _int, blank=-1),
    _key("brokerServicePortTls", "broker_tls_port", _int, blank=-1),
    _key("webServicePort", "broker_admin_port", _int, blank=-1),
    _key("webServicePortTls", "broker_admin_tls_port", _int, blank=-1),
    _key("bindAddress", ("broker_bind_host", "broker_admin_bind_host")),
    _key("advertisedAddress", "broker_advertised_host"),
    _key("advertisedListeners", "advertised_listeners"),
    _key("internalListenerName", "internal_listener_name"),
    _key("clusterName", "cluster_name"),
    # TLS
    _key("tlsCertificateFilePath", "tls_cert_file"),
    _key("tlsKeyFilePath", "tls_key_file"),
    _key("tlsTrustCertsFilePath", "tls_trust_certs_file"),
    _key("tlsRequireTrustedClientCertOnConnect", "tls_require_trusted_client_cert_on_connect", _bool),
    # authentication
    _key("authenticationEnabled", "authentication_enabled", _bool),
    _key("authenticationProviders", "authentication_providers", _providers),
    _key("tokenSecretKey", "token_secret_key"),
    _key("tokenPublicKey", "token_public_key"),
    _key("tokenPublicAlg", "token_public_alg"),
    _key("tokenAuthClaim", "token_auth_claim"),
    _key("tokenAudienceClaim", "token_audience_claim"),
    _key("tokenAudience", "token_audience"),
    _key("tokenAllowedClockSkewSeconds", "token_allowed_clock_skew_seconds", _int),
    _key("basicAuthConf", "basic_auth_conf"),
    _key("authenticationRefreshCheckSeconds", "authentication_refresh_check_interval_ms", _times(1000)),
    _key("brokerClientAuthenticationParameters", "broker_client_auth_token", _broker_client_token),
    _key("authenticateMetricsEndpoint", "metrics_require_auth", _bool),
    # authorization
    _key("authorizationEnabled", "authorization_enabled", _bool),
    _key("superUserRoles", "super_user_roles", _roles),
    _key("anonymousUserRole", "anonymous_user_role"),
    _key("authorizationAllowWildcardsMatching", "authorization_allow_wildcards_matching", _bool),
    # retention, TTL, backlog quotas, compaction, bundles
    _key("defaultRetentionTimeInMinutes", "retention_time_minutes", _int),
    _key("defaultRetentionSizeInMB", "retention_size_mb", _int),
    _key("ttlDurationDefaultInSeconds", "ttl_seconds", _int),
    _key("backlogQuotaCheckEnabled", "backlog_quota_check_enabled", _bool),
    _key("backlogQuotaCheckIntervalInSeconds", "backlog_quota_check_interval_ms", _times(1000)),
    _key("backlogQuotaDefaultLimitBytes", "backlog_quota_default_limit_bytes", _int),
    _key("backlogQuotaDefaultLimitSecond", "backlog_quota_default_limit_seconds", _int),
    _key("backlogQuotaDefaultRetentionPolicy", "backlog_quota_default_policy",
         _choice("producer_request_hold", "producer_exception", "consumer_backlog_eviction")),
    _key("brokerServiceCompactionThresholdInBytes", "compaction_threshold_bytes", _int),
    _key("defaultNumberOfNamespaceBundles", "broker_default_namespace_bundles", _int),
    # managed ledger and cold tier
    _key("managedLedgerDefaultEnsembleSize", "ledger_ensemble_size", _int),
    _key("managedLedgerDefaultWriteQuorum", "ledger_write_quorum", _int),
    _key("managedLedgerDefaultAckQuorum", "ledger_ack_quorum", _int),
    _key("managedLedgerMaxEnsembleSize", "managed_ledger_ensemble_max", _int),
    _key("managedLedgerMaxWriteQuorum", "managed_ledger_write_quorum_max", _int),
    _key("managedLedgerMaxAckQuorum", "managed_ledger_ack_quorum_max", _int),
    _key("managedLedgerMaxEntriesPerLedger", "managed_ledger_rollover_entries", _int),
    _key("managedLedgerMinLedgerRolloverTimeMinutes", "managed_ledger_rollover_min_age_ms", _times(60_000)),
    _key("managedLedgerMaxLedgerRolloverTimeMinutes", "managed_ledger_rollover_age_ms", _times(60_000)),
    _key("managedLedgerMaxSizePerLedgerMbytes", "managed_ledger_rollover_bytes", _times(MIB)),
    _key("managedLedgerOffloadDriver", "offload_driver", _offload_driver),
    _key("s3ManagedLedgerOffloadBucket", "offload_s3_bucket"),
    _key("s3ManagedLedgerOffloadRegion", "offload_s3_region"),
    _key("s3ManagedLedgerOffloadServiceEndpoint", "offload_s3_endpoint"),
    _key("managedLedgerOffloadAutoTriggerSizeThresholdBytes", "offload_threshold_bytes", _int),
    _key("managedLedgerOffloadThresholdInSeconds", "offload_threshold_seconds", _int),
    _key("managedLedgerOffloadDeletionLagMs", "offload_deletion_lag_ms", _int),
    _key("managedLedgerDataReadPriority", "offload_read_priority",
         _choice("tiered-storage-first", "bookkeeper-first")),
    # other broker settings with the same meaning
    _key("keepAliveIntervalSeconds", "broker_keepalive_interval_ms", _times(1000)),
    _key("maxUnackedMessagesPerConsumer", "broker_consumer_unacked_messages_max", _int),
    _key("subscriptionPatternMaxLength", "broker_subscription_pattern_length_max", _int),
    _key("brokerDeduplicationEntriesInterval", "broker_dedup_snapshot_interval_entries", _int),
    _key("brokerDeduplicationMaxNumberOfProducers", "broker_dedup_producers_max", _int),
    _key("exposeTopicLevelMetricsInPrometheus", "broker_metrics_topic_level", _bool),
)

PULSAR_KEYS_BY_NAME: dict[str, PulsarKey] = {k.pulsar: k for k in PULSAR_KEYS}

# Keys read with others, or accepted at the value Strata implements (anything else: ignored, warned).
_HANDLED_ELSEWHERE = frozenset({"backlogQuotaDefaultLimitGB", "brokerClientAuthenticationPlugin"})
_ACCEPTED_AT = {"authorizationProvider": frozenset({DEFAULT_AUTHORIZATION_PROVIDER})}


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text → {key: trimmed value} (the last of a repeated key wins)."""
    out: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_entry(logical)
        if key:
            out[_unescape(key)] = _unescape(value).strip()
    return out


def _logical_lines(text: str) -> list[str]:
    lines, pending = [], ""
    for physical in text.splitlines():
        stripped = physical.lstrip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:                 # an odd number of backslashes continues the line
            pending += stripped[:-1]
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _split_entry(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped '=', ':' or whitespace; one separator is skipped."""
    index, escaped = 0, False
    while index < len(line):
        char = line[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[index + 2:index + 6]):
            out.append(chr(int(text[index + 2:index + 6], 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        index += 2
    return "".join(out)


def read_pulsar_conf(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Strata settings a Pulsar .conf file sets: {setting name: checked value}."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return settings_from_properties(parse_properties(text), str(path), os.environ if env is None else env)


def settings_from_properties(props: Mapping[str, str], source: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Map Pulsar's keys to ours (see the module docstring); ConfigError names the Pulsar key."""
    props = dict(props)
    if not props.get("basicAuthConf"):
        from_env = _basic_conf_from_extra_opts(env.get("PULSAR_EXTRA_OPTS", ""))
        if from_env:
            props["basicAuthConf"] = from_env
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for name, raw in props.items():
        key = PULSAR_KEYS_BY_NAME.get(name)
        if key is not None:
            out.update(_mapped(key, raw, source))
        elif name in _HANDLED_ELSEWHERE:
            continue
        elif raw and raw not in _ACCEPTED_AT.get(name, ()):
            ignored.append(name)
    _apply_backlog_gb(props, out, source)
    _check_client_plugin(props, out, ignored)
    _warn_ignored(source, ignored)
    return out


def _mapped(key: PulsarKey, raw: str, source: str) -> dict[str, Any]:
    if raw == "":
        return {} if key.blank is None else dict.fromkeys(key.ours, key.blank)
    shown = {} if key.pulsar in _SECRET_KEYS else {"value": raw}     # a bad secret is not echoed
    try:
        value = key.convert(raw)
    except ValueError as exc:
        raise ConfigError(f"{key.pulsar} in {source} must be {exc}", **shown) from None
    for name in key.ours:
        setting = SETTINGS_BY_NAME[name]
        if (setting.min is not None and value < setting.min) or (setting.max is not None and value > setting.max):
            raise ConfigError(f"{key.pulsar} in {source} is out of range ({name} takes {setting.min:g}.."
                              f"{setting.max:g})", **shown)
    return dict.fromkeys(key.ours, value)


def _apply_backlog_gb(props: Mapping[str, str], out: dict[str, Any], source: str) -> None:
    raw = props.get("backlogQuotaDefaultLimitGB", "")
    if not raw:
        return
    try:
        gib = float(raw)
    except ValueError:
        raise ConfigError(f"backlogQuotaDefaultLimitGB in {source} must be a number", value=raw) from None
    if gib > 0:                                    # Pulsar: GB > 0 wins over the Bytes setting
        out["backlog_quota_default_limit_bytes"] = int(gib * GIB)


def _check_client_plugin(props: Mapping[str, str], out: dict[str, Any], ignored: list[str]) -> None:
    """brokerClientAuthenticationParameters are a token only with the token plugin (or none named)."""
    plugin = props.get("brokerClientAuthenticationPlugin", "")
    if plugin in ("", TOKEN_CLIENT_PLUGIN):
        return
    ignored.append("brokerClientAuthenticationPlugin")
    if out.pop("broker_client_auth_token", None) is not None:
        ignored.append("brokerClientAuthenticationParameters")


def _basic_conf_from_extra_opts(extra_opts: str) -> str:
    """-Dpulsar.auth.basic.conf=<value> out of PULSAR_EXTRA_OPTS ('' when absent)."""
    try:
        words = shlex.split(extra_opts)
    except ValueError:
        words = extra_opts.split()
    prefix = f"-D{BASIC_CONF_PROPERTY}="
    found = [word[len(prefix):] for word in words if word.startswith(prefix)]
    return found[-1] if found else ""


def _warn_ignored(source: str, ignored: list[str]) -> None:
    if not ignored or source in _warned_files:
        return
    _warned_files.add(source)
    log.warning("%s: %d Pulsar setting(s) Strata does not use were ignored: %s",
                source, len(ignored), ", ".join(sorted(ignored)))
