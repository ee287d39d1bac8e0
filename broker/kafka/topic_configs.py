"""Kafka topic configs over Strata's topic policies: pure mapping, both ways.

A Kafka topic's configs are not stored apart: each Kafka config that means something in Strata
is a view of a topic policy (`/admin/topic-policies/<t>/<ns>/<topic>`, `broker.records.policies`),
so `pulsar-admin topics set-retention` and Kafka's `alter_configs` change the same thing:

- `retention.ms` -> `retention_policies.retentionTimeInMinutes`: ms rounded UP to minutes; -1 = no
  time bound;
- `retention.bytes` -> `retention_policies.retentionSizeInMB`: bytes rounded UP to MiB; -1 = no
  size bound;
- `cleanup.policy` -> `compactionThreshold` (bytes): `compact` (or `compact,delete`) is a threshold
  > 0 (the namespace's, else COMPACT_THRESHOLD_BYTES) so the compactor runs; `delete` is 0 (off,
  even where the namespace compacts);
- `max.message.bytes` -> `maxMessageSize` (Pulsar's TopicPolicies field name), bytes in
  1..broker_max_message_bytes; the Kafka produce path checks it (`broker.kafka.admin.max_message_bytes`).

`min.insync.replicas` is listed read-only (the ledgers' ack quorum).

What `retention.ms` means for a Kafka topic: Strata's retention (`cursor.retention`) keeps data
that every subscription has consumed for that long (or up to that size); data a durable
subscription still needs is never deleted by retention. A topic with no subscription at all (a
Kafka topic before Kafka groups become subscriptions) keeps data only as retention allows: its
closed ledgers older than `retention.ms` are deleted. Retention works on whole ledgers, so data
may outlive `retention.ms` by up to one ledger's span, and the open ledger is never trimmed. With
Strata's default retention (0, 0) and no subscription, nothing but the open ledger is kept: set
`retention.ms` on Kafka topics (or retention on their namespace).

Retention is one (time, size) pair in Strata and two configs in Kafka: setting one Kafka value
leaves the other at its Kafka default, -1 (unbounded), except that a 0 pairs with 0 (Strata's
"keep nothing once consumed"; a 0 with any other value is refused, as Pulsar refuses it). A
topic with its own retention pair reports both values as set on the topic. A value past Pulsar's
int32 fields (over 2^31-1 minutes or MiB, e.g. Long.MAX_VALUE for "forever") is stored as -1.

`cleanup.policy=compact,delete` is accepted and reads back as `compact`: Strata's compaction
leaves retention in force (the compacted view is kept apart from the data retention trims).

The functions here take and return plain values (explicit configs: name -> Kafka value text, only
those set on the topic), so they are tested without a broker; `broker.kafka.admin` reads and
writes the policies.

What must hold: `to_policies(explicit)` followed by `explicit_configs` gives back `explicit`
(values normalized: rounded up to whole minutes / MiB, `compact,delete` as `compact`); every value
written passes the checks Pulsar's admin API applies to the same policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.compaction import threshold
from broker.records import policies
from common.config import Config
from cursor.retention import RetentionPolicy

MIB = 1024 * 1024
MS_PER_MINUTE = 60_000
COMPACT_THRESHOLD_BYTES = 100 * MIB     # `cleanup.policy=compact` when the namespace sets no threshold
LONG_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1        # Pulsar's retention fields are Java ints

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
CLEANUP_POLICY = "cleanup.policy"
MAX_MESSAGE_BYTES = "max.message.bytes"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
WRITABLE = (CLEANUP_POLICY, MAX_MESSAGE_BYTES, RETENTION_BYTES, RETENTION_MS)   # the ones a client may set
MAX_MESSAGE_SIZE_KEY = "maxMessageSize"   # topic policy field (bytes), Pulsar's TopicPolicies name

# DescribeConfigs' ConfigSource and ConfigType (Kafka's DescribeConfigsResponse)
SOURCE_TOPIC = 1            # DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = 4    # STATIC_BROKER_CONFIG
SOURCE_DEFAULT = 5          # DEFAULT_CONFIG
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST = 1, 2, 3, 5, 7
CONFIG_TYPES = {RETENTION_MS: TYPE_LONG, RETENTION_BYTES: TYPE_LONG, CLEANUP_POLICY: TYPE_LIST,
                MAX_MESSAGE_BYTES: TYPE_INT, MIN_INSYNC_REPLICAS: TYPE_INT}
CLEANUP_VALUES = frozenset({"delete", "compact"})


class ConfigRefused(ValueError):
    """A config name or value Strata does not take (INVALID_CONFIG, with this message)."""


@dataclass(frozen=True)
class ConfigEntry:
    """One config as DescribeConfigs lists it."""

    name: str
    value: str
    source: int             # SOURCE_*
    read_only: bool = False
    config_type: int = TYPE_STRING

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT

    def to_wire(self) -> dict:
        return {"name": self.name, "value": self.value, "read_only": self.read_only,
                "config_source": self.source, "is_default": self.is_default, "is_sensitive": False,
                "synonyms": [], "config_type": self.config_type, "documentation": None}


# --- values -------------------------------------------------------------------------------------

def _long(name: str, text: str | None, low: int, high: int = LONG_MAX) -> int:
    try:
        value = int((text or "").strip())
    except ValueError:
        raise ConfigRefused(f"{name} must be an integer, not {text!r}") from None
    if not low <= value <= high:
        raise ConfigRefused(f"{name} must be in {low}..{high}, not {value}")
    return value


def _up(value: int, unit: int) -> int:
    """A Kafka amount in a Strata unit, rounded up; -1 stays -1 (unbounded), and so does an amount
    past Pulsar's int32 field (Kafka tools write Long.MAX_VALUE for "forever")."""
    if value < 0:
        return -1
    whole = -(-value // unit)
    return -1 if whole > INT32_MAX else whole


def cleanup_policy(text: str | None) -> frozenset[str]:
    """`delete`, `compact` or both (comma-separated, any order); ConfigRefused otherwise."""
    parts = frozenset(p.strip() for p in (text or "").split(",") if p.strip())
    if not parts or not parts <= CLEANUP_VALUES:
        raise ConfigRefused(f"cleanup.policy must be delete, compact or compact,delete, not {text!r}")
    return parts


def check(name: str, text: str | None, config: Config) -> str:
    """The normalized Kafka value of a config a client sets; ConfigRefused for an unknown name
    (or a read-only one) or a bad value."""
    if name == RETENTION_MS:
        return str(_long(name, text, -1))
    if name == RETENTION_BYTES:
        return str(_long(name, text, -1))
    if name == CLEANUP_POLICY:
        return "compact" if "compact" in cleanup_policy(text) else "delete"
    if name == MAX_MESSAGE_BYTES:
        return str(_long(name, text, 1, config.broker_max_message_bytes))
    if name == MIN_INSYNC_REPLICAS:
        raise ConfigRefused("min.insync.replicas is the namespace's ack quorum: read-only here")
    raise ConfigRefused(f"unknown or unsupported topic config {name!r}; Strata takes " + ", ".join(WRITABLE))


def checked(configs: dict[str, str | None], config: Config) -> dict[str, str]:
    """Every config of a request checked and normalized (ConfigRefused at the first bad one),
    including the retention pair's rule."""
    out = {name: check(name, text, config) for name, text in configs.items()}
    retention_pair(out)
    return out


def retention_pair(explicit: dict[str, str]) -> tuple[int, int] | None:
    """Strata's (minutes, MiB) for the explicit retention configs; None when neither is set."""
    ms_text, bytes_text = explicit.get(RETENTION_MS), explicit.get(RETENTION_BYTES)
    if ms_text is None and bytes_text is None:
        return None
    minutes = _up(int(ms_text), MS_PER_MINUTE) if ms_text is not None else None
    mib = _up(int(bytes_text), MIB) if bytes_text is not None else None
    if minutes is None:
        minutes = 0 if mib == 0 else -1
    if mib is None:
        mib = 0 if minutes == 0 else -1
    if (minutes == 0) != (mib == 0):
        raise ConfigRefused("retention.ms 0 and retention.bytes 0 go together (keep nothing once consumed); "
                            "one of them 0 with the other not 0 is refused")
    return minutes, mib


# --- both ways ----------------------------------------------------------------------------------

def to_policies(explicit: dict[str, str], ns_policies: dict, config: Config,
                topic_policies: dict | None = None) -> dict[str, object]:
    """The topic policy fields that hold `explicit` (checked values); a field None is removed,
    so writing every one of them replaces the topic's whole Kafka-visible set. `compact` keeps
    the topic's own threshold when it has one (`topic_policies`: its current fields)."""
    pair = retention_pair(explicit)
    cleanup = explicit.get(CLEANUP_POLICY)
    compaction: int | None = None
    if cleanup is not None:
        compaction = 0
        if "compact" in cleanup_policy(cleanup):
            own = int((topic_policies or {}).get(threshold.TOPIC_KEY) or 0)
            inherited = threshold.effective(ns_policies, config, None)
            compaction = own if own > 0 else inherited if inherited > 0 else COMPACT_THRESHOLD_BYTES
    size = explicit.get(MAX_MESSAGE_BYTES)
    return {
        policies.RETENTION_KEY: (None if pair is None
                                 else {"retentionTimeInMinutes": pair[0], "retentionSizeInMB": pair[1]}),
        threshold.TOPIC_KEY: compaction,
        MAX_MESSAGE_SIZE_KEY: int(size) if size is not None else None,
    }


def created_defaults(explicit: dict[str, str], ns_policies: dict, config: Config) -> dict[str, str]:
    """`explicit` plus what a topic created through Kafka gets by default: Kafka's retention
    (`kafka_default_retention_ms`, 7 days) when neither the request nor the namespace sets one.
    Without it a topic nobody subscribes to would keep only its open ledger (Strata's retention
    counts acknowledged data, and Kafka consumers reading by offset acknowledge nothing)."""
    wanted = config.kafka_default_retention_ms
    if wanted == 0 or RETENTION_MS in explicit or RETENTION_BYTES in explicit or policies.RETENTION_KEY in ns_policies:
        return explicit
    return {**explicit, RETENTION_MS: str(wanted)}


def _retention_values(time_minutes: int, size_mb: int) -> dict[str, str]:
    return {RETENTION_MS: str(-1 if time_minutes < 0 else time_minutes * MS_PER_MINUTE),
            RETENTION_BYTES: str(-1 if size_mb < 0 else size_mb * MIB)}


def explicit_configs(topic_policies: dict) -> dict[str, str]:
    """The Kafka configs set on the topic itself, read from its policy fields."""
    out: dict[str, str] = {}
    retention = topic_policies.get(policies.RETENTION_KEY)
    if retention is not None:
        out.update(_retention_values(int(retention["retentionTimeInMinutes"]), int(retention["retentionSizeInMB"])))
    compaction = topic_policies.get(threshold.TOPIC_KEY)
    if compaction is not None:
        out[CLEANUP_POLICY] = "compact" if int(compaction) > 0 else "delete"
    size = topic_policies.get(MAX_MESSAGE_SIZE_KEY)
    if size is not None:
        out[MAX_MESSAGE_BYTES] = str(int(size))
    return out


def default_configs(ns_policies: dict, config: Config) -> dict[str, str]:
    """What each writable config is when the topic does not set it (the namespace's, else the
    broker's)."""
    retention = policies.retention_of(ns_policies, config)
    out = _retention_values(retention.time_minutes, retention.size_mb)
    out[CLEANUP_POLICY] = "compact" if threshold.effective(ns_policies, config, None) > 0 else "delete"
    out[MAX_MESSAGE_BYTES] = str(config.broker_max_message_bytes)
    return out


def describe(topic_policies: dict, ns_policies: dict, config: Config, keys: list[str] | None) -> list[ConfigEntry]:
    """A topic's configs as DescribeConfigs lists them (`keys` None: all; unknown keys are left
    out, as Kafka does)."""
    explicit = explicit_configs(topic_policies)
    defaults = default_configs(ns_policies, config)
    entries = []
    for name in WRITABLE:
        if name in explicit:
            entries.append(ConfigEntry(name, explicit[name], SOURCE_TOPIC, config_type=CONFIG_TYPES[name]))
        else:
            entries.append(ConfigEntry(name, defaults[name], SOURCE_DEFAULT, config_type=CONFIG_TYPES[name]))
    entries.append(ConfigEntry(MIN_INSYNC_REPLICAS, str(config.ledger_ack_quorum), SOURCE_DEFAULT,
                               read_only=True, config_type=TYPE_INT))
    return [e for e in entries if keys is None or e.name in keys]


def describe_broker(config: Config, keys: list[str] | None) -> list[ConfigEntry]:
    """The broker resource: a few read-only values from Strata's settings."""
    retention = RetentionPolicy(config.retention_time_minutes, config.retention_size_mb)
    minutes = retention.time_minutes
    entries = [
        ConfigEntry("log.retention.ms", str(-1 if minutes < 0 else minutes * MS_PER_MINUTE),
                    SOURCE_STATIC_BROKER, True, TYPE_LONG),
        ConfigEntry("num.partitions", str(config.kafka_default_partitions), SOURCE_STATIC_BROKER, True, TYPE_INT),
        ConfigEntry("auto.create.topics.enable", str(config.kafka_auto_create_topics).lower(),
                    SOURCE_STATIC_BROKER, True, TYPE_BOOLEAN),
        ConfigEntry("message.max.bytes", str(config.broker_max_message_bytes), SOURCE_STATIC_BROKER, True, TYPE_INT),
        ConfigEntry(MIN_INSYNC_REPLICAS, str(config.ledger_ack_quorum), SOURCE_STATIC_BROKER, True, TYPE_INT),
    ]
    return [e for e in entries if keys is None or e.name in keys]


def max_message_bytes_of(topic_policies: dict, config: Config) -> int:
    """The largest Kafka record batch the topic takes: its `max.message.bytes`, else the broker's."""
    size = topic_policies.get(MAX_MESSAGE_SIZE_KEY)
    return int(size) if size is not None else config.broker_max_message_bytes


# --- incremental edits --------------------------------------------------------------------------

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_incremental(explicit: dict[str, str], defaults: dict[str, str],
                      ops: list[tuple[str, int, str | None]], config: Config) -> dict[str, str]:
    """The explicit configs after IncrementalAlterConfigs' operations (name, op, value):
    SET checks and sets, DELETE returns to the default, APPEND/SUBTRACT only for the list config
    `cleanup.policy`; ConfigRefused for a bad value, ValueError("...") for an operation that does
    not apply (INVALID_REQUEST)."""
    out = dict(explicit)
    for name, op, text in ops:
        if op == SET:
            out[name] = check(name, text, config)
        elif op == DELETE:
            if name not in WRITABLE:
                check(name, None, config)       # refuses it, naming what Strata takes
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name != CLEANUP_POLICY:
                raise ValueError(f"{'APPEND' if op == APPEND else 'SUBTRACT'} applies to list configs only; "
                                 f"{name} is not one")
            current = set(cleanup_policy(out.get(name, defaults[CLEANUP_POLICY])))
            given = cleanup_policy(text)
            current = current | given if op == APPEND else current - given
            # retention always applies in Strata: with compact gone, what is left is delete
            out[name] = "compact" if "compact" in current else "delete"
        else:
            raise ValueError(f"unknown config operation {op}")
    retention_pair(out)
    return out
