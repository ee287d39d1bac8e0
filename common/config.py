"""One declarative table of every Strata setting.

Each `Setting` has a name (with its unit in the name), a type, a default, bounds, a doc line, the
command-line flags that set it, and the `Section` of the table it sits under.
`load_config()` merges, in order: the defaults, a TOML file (flat `name = value` pairs, or under a
`[strata]` table), environment variables `STRATA_<NAME>` (upper case), then explicit overrides;
it checks every value against its type and bounds and the relations between settings, and returns
a frozen `Config`. Unknown names are an error, not a silent no-op.

Generated from the table by `python -m common.settings_doc`: common/settings_fields.py (each
setting's name and type, which `Config` inherits, so mypy checks every `config.<name>` read and
every keyword override) and docs/configuration.md (the settings reference).

What must hold: a `Config` that exists is valid; nothing reads a setting that is not in `SETTINGS`
(mypy refuses it; at run time it is an AttributeError naming it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from common.errors import ConfigError
from common.invariant import present
from common.settings_fields import SettingsFields

if TYPE_CHECKING:
    from common.settings_fields import SettingValues

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# Listen on every interface: fine to bind, meaningless to advertise.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})


@dataclass(frozen=True)
class Setting:
    name: str                       # lower case, unit last (STYLE 11); STRATA_<NAME> in the environment
    type: type                      # int, float, bool or str
    default: Any
    min: float | None = None        # inclusive bounds of a number (None: a bool or str, unbounded)
    max: float | None = None
    doc: str = ""                   # what it means, one line (the settings reference shows it)
    flags: tuple[str, ...] = ()     # command-line flags that set it: "strata broker --port" (none: file, env only)
    section: str = ""               # title of the Section above it in the table ('': built outside the table)


@dataclass(frozen=True)
class Section:
    """A heading of the table: the settings after it, up to the next heading, are its own."""
    title: str
    doc: str                        # one line: what its settings are about


def _sectioned(table: tuple[Section | Setting, ...]) -> tuple[Setting, ...]:
    """The table's settings, each stamped with the title of the heading above it."""
    out: list[Setting] = []
    section: Section | None = None
    for item in table:
        if isinstance(item, Section):
            section = item
        else:
            section = present(section, "the table opens with a Section", setting=item.name)
            out.append(dataclasses.replace(item, section=section.title))
    return tuple(out)


# Settings in sections. After a change, run `python -m common.settings_doc`: it writes the typed
# fields (common/settings_fields.py) and the reference page (docs/configuration.md) from this table.
TABLE: tuple[Section | Setting, ...] = (
    Section("metadata store", "the metadata store (SQLite or PostgreSQL) every node shares"),
    Setting("metadata_value_bytes_max", int, 8 * MIB, 1, 64 * MIB, "largest value one key may hold"),
    Setting("metadata_session_lease_ms", int, 10_000, 500, 600_000,
            "ephemeral keys vanish this long after the owner stops renewing", flags=("strata cluster up --lease-ms",)),
    Setting("metadata_watch_poll_ms", int, 100, 10, 5_000, "how often watchers poll the change log"),
    Setting("metadata_op_timeout_ms", int, 5_000, 100, 120_000,
            "bound on one metadata operation, including a database that is down"),
    Setting("metadata_start_wait_ms", int, 30_000, 0, 600_000,
            "how long a starting broker or bookie keeps trying to reach the metadata store before it "
            "gives up and exits (as Pulsar's broker waits out its ZooKeeper session timeout)"),
    Setting("metadata_changelog_keep_ms", int, 300_000, 10_000, 86_400_000,
            "how long change-log rows are kept for watchers"),
    Setting("metadata_pool_connections", int, 4, 1, 1_024,
            "database connections kept open per store"),
    Setting("metadata_pool_overflow_max", int, 8, 0, 1_024,
            "extra database connections opened under load per store, closed when returned"),
    Setting("metadata_async_threads_max", int, 8, 1, 1_024,
            "threads running metadata calls for asyncio code, per AsyncMetadataStore"),
    Setting("metadata_async_calls_in_flight_max", int, 256, 1, 1_000_000,
            "metadata calls queued or running per AsyncMetadataStore; further callers wait"),
    Setting("metadata_watches_max", int, 10_000, 1, 10_000_000,
            "watches one store may hold; past it a new watch is refused (LimitExceeded)"),
    Setting("metadata_watch_rows_per_poll_max", int, 1_000, 1, 1_000_000,
            "change-log rows read per poll; a poll that gets this many polls again at once"),
    Setting("metadata_list_prefix_keys_max", int, 100_000, 1, 100_000_000,
            "most keys one list_prefix() returns (ask for less, or page by sub-prefix)"),
    Setting("metadata_put_many_ops_max", int, 10_000, 1, 1_000_000,
            "most writes in one put_many() transaction, which holds the write lock that long"),
    Section("bookie", "a bookie: the storage node `strata bookie` runs"),
    Setting("bookie_entry_bytes_max", int, 5 * MIB + 64 * KIB, 1 * KIB, 64 * MIB,
            "largest entry a bookie stores (5 MiB plus headers)"),
    Setting("bookie_journal_group_commit_wait_ms", float, 0.0, 0.0, 1000.0,
            "extra time an add waits for others to share its fsync (0: none; adds arriving during an fsync share the "
            "next one anyway)"),
    Setting("bookie_journal_group_commit_bytes_max", int, 4 * MIB, 4 * KIB, 256 * MIB,
            "flush the journal once this many bytes are buffered"),
    Setting("bookie_segment_file_bytes_max", int, 256 * MIB, 1 * MIB, 16 * GIB,
            "roll to a new segment file past this size"),
    Setting("bookie_checkpoint_interval_ms", int, 10_000, 100, 3_600_000,
            "how often segments are synced and old journals deleted"),
    Setting("bookie_gc_interval_ms", int, 30_000, 100, 86_400_000,
            "how often deleted ledgers' segment files are reclaimed"),
    Setting("bookie_gc_compact_live_ratio_max", float, 0.5, 0.0, 1.0,
            "compact a sealed segment whose live fraction is at or below this"),
    Setting("bookie_disk_free_bytes_min", int, 64 * MIB, 0, 1 * 1024 * GIB,
            "turn read-only when free disk falls below this"),
    Setting("bookie_unsafe_skip_fsync", bool, False, doc="UNSAFE, experiments only: acknowledge adds without fsync"),
    Setting("bookie_add_queue_entries_max", int, 10_000, 1, 10_000_000,
            "adds waiting for the journal before the bookie pushes back"),
    Setting("bookie_read_entries_max", int, 10_000, 1, 10_000_000, "most entries one read request returns"),
    Setting("bookie_port", int, 3181, 0, 65535,
            "gRPC port of `strata bookie` (0: any free port)", flags=("strata bookie --port",)),
    Setting("bookie_bind_host", str, "127.0.0.1",
            doc="address the bookie's gRPC and data ports listen on (0.0.0.0: every interface)",
            flags=("strata bookie --host",)),
    Setting("bookie_advertised_host", str, "",
            doc="host other nodes are told to connect to, and the bookie's identity in ledger metadata "
                "('': bookie_bind_host; must be set when that is a wildcard address)",
            flags=("strata bookie --advertised-host",)),
    Setting("bookie_registration_refresh_interval_ms", int, 3_000, 100, 3_600_000,
            "how often a bookie rewrites its registration (free space, read-only)"),
    Setting("bookie_read_response_bytes_max", int, 1 * MIB, 4 * KIB, 64 * MIB,
            "entry bytes per read response; one larger entry goes alone"),
    Setting("bookie_gc_compact_batch_bytes", int, 4 * MIB, 64 * KIB, 1 * GIB,
            "live entry bytes copied per batch when a segment is compacted"),
    Setting("bookie_disk_check_interval_ms", int, 1_000, 10, 600_000,
            "how often free disk space is checked (read-only below bookie_disk_free_bytes_min)"),
    Setting("bookie_add_requests_queued_max", int, 1_024, 1, 1_000_000,
            "add requests submitted to storage and not yet answered, per data connection; at this many "
            "the bookie stops reading it"),
    Setting("bookie_reads_queued_max", int, 256, 1, 1_000_000,
            "read requests waiting to be answered, per data connection; at this many the bookie stops "
            "reading it"),
    Setting("bookie_data_write_buffer_bytes_high", int, 4 * MIB, 16 * KIB, 1 * GIB,
            "unsent response bytes per data connection over which the bookie waits for the client to read"),
    Setting("bookie_journal_stop_timeout_ms", int, 10_000, 100, 600_000,
            "at shutdown, wait this long for the journal to flush (a hung disk must not keep a stopping "
            "bookie alive)"),
    Setting("bookie_stop_grace_ms", int, 2_000, 0, 600_000,
            "at shutdown, in-flight requests get this long to finish"),
    Setting("bookie_metrics_port", int, 0, 0, 65535,
            "HTTP port of the bookie's Prometheus /metrics, on bookie_bind_host (0: not served; `strata "
            "standalone` gives each bookie a free one)"),
    Setting("bookie_data_port", int, 0, 0, 65535,
            "TCP port of the bookie's framed add/read data path, same host as gRPC (0: any free port; advertised in "
            "its registration and GetInfo)"),
    Section("ledger client", "how a broker writes and reads ledgers on bookies"),
    Setting("ledger_add_timeout_ms", int, 10_000, 100, 600_000,
            "an add fails (retriable) when Qa bookies have not answered in this time"),
    Setting("ledger_read_timeout_ms", int, 10_000, 100, 600_000, "bound on one read from one bookie"),
    Setting("ledger_adds_in_flight_max", int, 10_000, 1, 1_000_000, "adds sent but not yet acknowledged, per ledger"),
    Setting("ledger_ensemble_size", int, 1, 1, 64, "E: bookies a ledger is striped over",
            flags=("strata cluster up --ensemble", "strata standalone --bookies")),
    Setting("ledger_write_quorum", int, 1, 1, 64, "Qw: copies of each entry",
            flags=("strata cluster up --write-quorum", "strata standalone --bookies")),
    Setting("ledger_ack_quorum", int, 1, 1, 64, "Qa: copies that must be durable before an add is acknowledged",
            flags=("strata cluster up --ack-quorum", "strata standalone --bookies")),
    Setting("ledger_bookie_quarantine_ms", int, 30_000, 0, 3_600_000,
            "a bookie this client saw fail is chosen for new ledgers and ensemble changes only when others are "
            "too few, for this long (a killed bookie stays registered until its lease expires)"),
    Setting("ledger_auditor_interval_ms", int, 60_000, 100, 86_400_000,
            "how often the auditor scans every ledger for copies on bookies no longer registered (it also "
            "scans as soon as a bookie's registration vanishes)"),
    Setting("ledger_auditor_enabled", bool, True,
            doc="run the auditor in this broker (finds and re-replicates under-replicated ledgers)"),
    Setting("ledger_read_runs_in_flight_max", int, 32, 1, 10_000,
            "runs of consecutive entries (one per bookie) one ledger read has in flight at once"),
    Setting("ledger_bookie_requests_in_flight_max", int, 32, 1, 100_000,
            "add requests sent to one bookie and not yet answered, per link; further adds wait and gather "
            "into bigger requests"),
    Setting("ledger_bookie_request_payload_bytes_max", int, 2 * MIB, 1 * KIB, 64 * MIB,
            "entry bytes gathered into one add request to a bookie (one larger entry goes alone)"),
    Setting("ledger_bookie_write_buffer_bytes_high", int, 1 * MIB, 16 * KIB, 1 * GIB,
            "unsent bytes on a link to a bookie over which adds wait (and gather)"),
    Section("managed ledger", "a topic's log: the ledgers it rolls over and its tail cache"),
    Setting("managed_ledger_rollover_entries", int, 50_000, 1, 10_000_000_000,
            "roll to a new ledger after this many entries"),
    Setting("managed_ledger_rollover_bytes", int, 2 * GIB, 1, 1024 * GIB, "roll to a new ledger after this many bytes"),
    Setting("managed_ledger_rollover_age_ms", int, 240 * 60_000, 1, 30 * 86_400_000,
            "roll to a new ledger after this age"),
    Setting("managed_ledger_rollover_min_age_ms", int, 10 * 60_000, 0, 30 * 86_400_000, "never roll before this age"),
    Setting("managed_ledger_ensemble_max", int, 5, 1, 64,
            "largest ensemble a persistence policy may set (Pulsar's managedLedgerMaxEnsembleSize)"),
    Setting("managed_ledger_write_quorum_max", int, 5, 1, 64,
            "largest write quorum a persistence policy may set (Pulsar's managedLedgerMaxWriteQuorum)"),
    Setting("managed_ledger_ack_quorum_max", int, 5, 1, 64,
            "largest ack quorum a persistence policy may set (Pulsar's managedLedgerMaxAckQuorum)"),
    Setting("managed_ledger_index_checkpoint_entries", int, 1_000, 1, 10_000_000,
            "the open ledger's index is checkpointed after this many new entries (a takeover reads back only "
            "the entries after the last checkpoint)"),
    Setting("managed_ledger_index_checkpoint_bytes", int, 4 * MIB, 1, 64 * GIB,
            "or after this many new bytes (batched entries are large: a takeover reads back what is unindexed)"),
    Setting("managed_ledger_index_checkpoint_interval_ms", int, 1_000, 0, 3_600_000,
            "and at most once per this interval per topic"),
    Setting("managed_ledger_cache_bytes_max", int, 256 * MIB, 0, 64 * GIB,
            "tail-read cache of recently appended entries, per broker"),
    Setting("managed_ledger_read_handles_max", int, 16, 1, 10_000,
            "closed ledgers a managed ledger keeps open for reads (the one opened first is dropped first)"),
    Section("cursor", "a subscription's position, persisted in the metadata store"),
    Setting("cursor_state_bytes_max", int, 4 * MIB, 1 * KIB, 512 * MIB,
            "largest persisted cursor state; over it is an error and a metric"),
    Setting("cursor_persist_interval_ms", int, 1_000, 0, 60_000,
            "coalesce cursor writes: at most one persist per cursor per interval"),
    Setting("cursor_writer_ops_per_transaction_max", int, 1_000, 1, 1_000_000,
            "cursor saves grouped into one metadata transaction (at most metadata_put_many_ops_max)"),
    Setting("cursor_writer_queue_max", int, 20_000, 1, 10_000_000,
            "cursor saves waiting for a group transaction per broker; further saves wait for room"),
    Section("broker", "a broker: its ports, connections, dispatch and stats"),
    Setting("broker_port", int, 6650, -1, 65535, "Pulsar binary protocol port (-1: not served, TLS only)",
            flags=("strata broker --port", "strata standalone --port")),
    Setting("broker_admin_port", int, 8080, -1, 65535, "admin HTTP port (-1: not served, HTTPS only)",
            flags=("strata broker --admin-port", "strata standalone --admin-port")),
    Setting("broker_advertised_host", str, "127.0.0.1", doc="host clients are told to connect to",
            flags=("strata broker --advertised-host",)),
    Setting("advertised_listeners", str, "",
            doc="named addresses of this broker, Pulsar's advertisedListeners: 'name:pulsar://host:port,...' "
                "(a lookup naming a listener is answered its URL; '' : none; see broker.cluster.listeners)"),
    Setting("internal_listener_name", str, "",
            doc="the listener whose pulsar:// URL is this broker's own service URL ('' : the first listener)"),
    Setting("broker_bind_host", str, "127.0.0.1",
            doc="address the Pulsar protocol ports (plain and TLS) listen on (0.0.0.0: every interface)"),
    Setting("broker_admin_bind_host", str, "127.0.0.1",
            doc="address the admin HTTP and HTTPS ports (and /metrics) listen on (0.0.0.0: every interface)"),
    Setting("broker_admin_body_bytes_max", int, 64 * KIB, 1 * KIB, 64 * MIB,
            "largest admin HTTP request body"),
    Setting("broker_topic_load_timeout_ms", int, 10_000, 100, 600_000,
            "a lookup or command waits this long for a topic to load, then gets ServiceNotReady (retried)"),
    Setting("broker_max_message_bytes", int, 5 * MIB, 1 * KIB, 64 * MIB,
            "largest message, told to clients in CONNECTED"),
    Setting("broker_frame_bytes_max", int, 5 * MIB + 10 * KIB + 1024, 2 * KIB, 65 * MIB,
            "largest frame read off the wire"),
    Setting("broker_pending_sends_max", int, 1_000, 1, 1_000_000,
            "SENDs in flight per producer before the connection stops reading"),
    Setting("broker_connection_requests_inflight_max", int, 1_000, 1, 1_000_000,
            "requests (LOOKUP, PRODUCER, SUBSCRIBE, ...) a connection may have in flight; at this many the broker "
            "stops reading it until one completes (as Pulsar's maxPendingPublishRequestsPerConnection)"),
    Setting("broker_connection_write_buffer_bytes_high", int, 8 * MIB, 16 * KIB, 1 * GIB,
            "unsent bytes queued for a client at which its consumers stop receiving; they resume when it drains to a "
            "quarter of this"),
    Setting("broker_connection_write_buffer_bytes_max", int, 64 * MIB, 64 * KIB, 4 * GIB,
            "unsent bytes queued for a client at which the broker closes the connection (a client that does not read "
            "its socket)"),
    Setting("broker_keepalive_interval_ms", int, 30_000, 100, 3_600_000,
            "PING a silent client after this long; close it after twice this long"),
    Setting("broker_dispatch_batch_entries_max", int, 100, 1, 10_000, "entries read for dispatch in one go"),
    Setting("broker_consumer_unacked_messages_max", int, 50_000, 0, 100_000_000,
            "Shared/Key_Shared: a consumer holding this many unacked messages gets no more until acks bring it to "
            "half (Pulsar's maxUnackedMessagesPerConsumer; 0: no limit)"),
    Setting("broker_partitions_max", int, 1_000, 1, 100_000, "most partitions a partitioned topic may have"),
    Setting("broker_subscription_unacked_messages_max", int, 200_000, 0, 1_000_000_000,
            "Shared/Key_Shared: a subscription holding this many unacked messages dispatches no more until acks "
            "bring it to half (Pulsar's maxUnackedMessagesPerSubscription; 0: no limit)"),
    Setting("broker_topic_producers_max", int, 0, 0, 1_000_000,
            "producers one topic may have (Pulsar's maxProducersPerTopic; 0: no limit)"),
    Setting("broker_topic_consumers_max", int, 0, 0, 1_000_000,
            "consumers one topic may have (Pulsar's maxConsumersPerTopic; 0: no limit)"),
    Setting("broker_subscription_consumers_max", int, 0, 0, 1_000_000,
            "consumers one subscription may have (Pulsar's maxConsumersPerSubscription; 0: no limit)"),
    Setting("broker_topic_subscriptions_max", int, 0, 0, 1_000_000,
            "subscriptions one topic may have (Pulsar's maxSubscriptionsPerTopic; 0: no limit)"),
    Setting("broker_namespace_topics_max", int, 0, 0, 100_000_000,
            "topics one namespace may have, partitions counted (Pulsar's maxTopicsPerNamespace; 0: no limit)"),
    Setting("broker_publish_rate_messages_max", int, 0, 0, 1_000_000_000,
            "messages per second all producers of this broker may publish together "
            "(Pulsar's brokerPublisherThrottlingMaxMessageRate; 0: no limit)"),
    Setting("broker_publish_rate_bytes_max", int, 0, 0, 1 << 40,
            "bytes per second all producers of this broker may publish together "
            "(Pulsar's brokerPublisherThrottlingMaxByteRate; 0: no limit)"),
    Setting("broker_topic_dispatch_rate_messages_max", int, 0, 0, 1_000_000_000,
            "messages per second a topic dispatches (Pulsar's dispatchThrottlingRatePerTopicInMsg; 0: no limit)"),
    Setting("broker_topic_dispatch_rate_bytes_max", int, 0, 0, 1 << 40,
            "bytes per second a topic dispatches (Pulsar's dispatchThrottlingRatePerTopicInByte; 0: no limit)"),
    Setting("broker_subscription_dispatch_rate_messages_max", int, 0, 0, 1_000_000_000,
            "messages per second a subscription dispatches "
            "(Pulsar's dispatchThrottlingRatePerSubscriptionInMsg; 0: no limit)"),
    Setting("broker_subscription_dispatch_rate_bytes_max", int, 0, 0, 1 << 40,
            "bytes per second a subscription dispatches "
            "(Pulsar's dispatchThrottlingRatePerSubscriptionInByte; 0: no limit)"),
    Setting("broker_subscribe_rate_per_consumer_max", int, 0, 0, 1_000_000,
            "subscribes one consumer name may make per period (Pulsar's subscribeThrottlingRatePerConsumer; "
            "0: no limit)"),
    Setting("broker_subscribe_rate_period_seconds", int, 30, 1, 86_400,
            "the period of broker_subscribe_rate_per_consumer_max (Pulsar's subscribeRatePeriodPerConsumerInSecond)"),
    Setting("broker_delete_inactive_topics_enabled", bool, True,
            doc="delete topics inactive past their inactive-topic policy (Pulsar's brokerDeleteInactiveTopicsEnabled)"),
    Setting("broker_delete_inactive_topics_frequency_seconds", int, 60, 1, 86_400,
            "how often inactive topics are looked for (Pulsar's brokerDeleteInactiveTopicsFrequencySeconds)"),
    Setting("broker_delete_inactive_topics_mode", str, "delete_when_no_subscriptions",
            doc="delete_when_no_subscriptions or delete_when_subscriptions_caught_up "
                "(Pulsar's brokerDeleteInactiveTopicsMode)"),
    Setting("broker_delete_inactive_topics_max_inactive_duration_seconds", int, 60, 1, 100_000_000,
            "how long a topic must be inactive before it is deleted "
            "(Pulsar's brokerDeleteInactiveTopicsMaxInactiveDurationSeconds)"),
    Setting("broker_delete_inactive_partitioned_topic_metadata_enabled", bool, False,
            doc="delete a partitioned topic's metadata once its last partition was deleted as inactive "
                "(Pulsar's brokerDeleteInactivePartitionedTopicMetadataEnabled)"),
    Setting("broker_subscription_expiration_time_minutes", int, 0, 0, 100_000_000,
            "remove a subscription with no consumer for this long (Pulsar's subscriptionExpirationTimeMinutes; "
            "0: never)"),
    Setting("broker_allow_auto_topic_creation", bool, True,
            doc="a producer or consumer may create a topic by naming it (Pulsar's allowAutoTopicCreation)"),
    Setting("broker_allow_auto_topic_creation_type", str, "non-partitioned",
            doc="what auto creation makes: non-partitioned or partitioned (Pulsar's allowAutoTopicCreationType)"),
    Setting("broker_auto_topic_partitions", int, 1, 1, 100_000,
            "partitions of an auto-created partitioned topic (Pulsar's defaultNumPartitions)"),
    Setting("broker_allow_auto_subscription_creation", bool, True,
            doc="a consumer may create a subscription by naming it (Pulsar's allowAutoSubscriptionCreation)"),
    Setting("broker_delayed_delivery_enabled", bool, True,
            doc="messages with a delivery time wait for it (Pulsar's delayedDeliveryEnabled)"),
    Setting("broker_delayed_delivery_max_delay_ms", int, 0, 0, 100_000_000_000,
            "longest delivery delay a producer may ask for (Pulsar's delayedDeliveryMaxDelayInMillis; 0: no limit)"),
    Setting("broker_subscription_pattern_length_max", int, 50, 0, 100_000,
            "longest topics pattern the broker applies to GET_TOPICS_OF_NAMESPACE; a longer one is not applied "
            "and the client filters (Pulsar's subscriptionPatternMaxLength)"),
    Setting("broker_topic_list_watchers_per_connection_max", int, 100, 1, 100_000,
            "most topic-list watchers (WATCH_TOPIC_LIST) one connection may hold"),
    Setting("broker_delayed_delivery_tick_ms", int, 200, 10, 10_000, "how often due delayed messages are checked"),
    Setting("broker_delayed_delivery_entries_max", int, 100_000, 1, 10_000_000,
            "delayed entries a subscription keeps in memory; more are found again by re-scanning storage"),
    Setting("broker_delayed_delivery_scan_entries_per_pass", int, 2_048, 1, 1_000_000,
            "entries one dispatch pass re-reads while re-scanning storage for overflowed delayed entries"),
    Setting("broker_dispatch_replay_entries_max", int, 10_000, 1, 10_000_000,
            "Shared/Key_Shared: entries waiting to be sent again (redelivered, or their consumer closed) "
            "and Key_Shared's look-ahead, per subscription; more go back to the unread range"),
    Setting("broker_dispatch_replay_cache_bytes_max", int, 64 * MIB, 0, 64 * GIB,
            "bytes of those entries kept in memory per subscription; the rest are re-read from storage"),
    Setting("broker_dedup_snapshot_interval_entries", int, 1_000, 1, 10_000_000, "entries between dedup snapshots"),
    Setting("broker_dedup_snapshot_interval_ms", int, 60_000, 100, 86_400_000,
            "longest time stored entries wait for a dedup snapshot (checked as entries are stored)"),
    Setting("broker_dedup_producers_max", int, 10_000, 1, 10_000_000,
            "producer names whose dedup marks a topic keeps; the least recently used go first"),
    Setting("broker_stats_sample_interval_ms", int, 1_000, 10, 600_000,
            "how often message/byte counters are sampled for rates"),
    Setting("broker_non_persistent_idle_ms", int, 60_000, 100, 86_400_000,
            "a non-persistent topic without producers or consumers is forgotten after this long"),
    Setting("broker_retention_check_interval_ms", int, 60_000, 10, 86_400_000,
            "how often each loaded topic's TTL and retention are applied"),
    Setting("broker_stats_rate_window_ms", int, 10_000, 100, 3_600_000,
            "msgRateIn/Out and msgThroughputIn/Out average over this window"),
    Setting("broker_metrics_topic_level", bool, True,
            doc="/metrics per topic and subscription (Pulsar's exposeTopicLevelMetricsInPrometheus); false: the "
                "same names summed per namespace"),
    Setting("broker_exclusive_producer_waiters_max", int, 1_000, 1, 1_000_000,
            "WaitForExclusive producers one topic queues; past it a new one is refused (ProducerBusy)"),
    Section("kafka", "Kafka's wire protocol on every broker (broker.kafka), over the same topics"),
    Setting("kafka_port", int, -1, -1, 65535,
            "Kafka protocol port, PLAINTEXT (SASL_PLAINTEXT when authentication is on); usually 9092 "
            "(-1: not served; 0: any free port)",
            flags=("strata broker --kafka-port", "strata standalone --kafka-port")),
    Setting("kafka_tls_port", int, -1, -1, 65535,
            "Kafka protocol over TLS, SSL (SASL_SSL when authentication is on; -1: not served; 0: any free port)"),
    Setting("kafka_bind_host", str, "",
            doc="address the Kafka ports listen on ('' : broker_bind_host)"),
    Setting("kafka_advertised_listeners", str, "",
            doc="Kafka's advertised.listeners: 'PLAINTEXT://host:port,SSL://host:port' as clients must reach "
                "this broker ('' : broker_advertised_host with the bound ports)"),
    Setting("kafka_default_namespace", str, "public/default",
            doc="the tenant/namespace a Kafka topic name without one lives in (Kafka topic t = "
                "persistent://<namespace>/t)"),
    Setting("kafka_auto_create_topics", bool, True,
            doc="a Metadata request that allows it creates a missing topic (Kafka's auto.create.topics.enable)"),
    Setting("kafka_default_partitions", int, 1, 1, 100_000,
            "partitions of a topic created by Metadata, or by CreateTopics asking -1 (Kafka's num.partitions)"),
    Setting("kafka_default_retention_ms", int, 604_800_000, -1, 2**62,
            "retention a topic created through Kafka gets when neither it nor its namespace sets one (Kafka's "
            "log.retention.ms, 7 days; -1: forever; 0: the broker's retention, which keeps nothing no "
            "subscription holds)"),
    Setting("kafka_producer_snapshot_interval_entries", int, 1_000, 1, 10_000_000,
            "idempotent Kafka batches stored between snapshots of a partition's producer state"),
    Setting("kafka_producer_snapshot_interval_ms", int, 60_000, 100, 86_400_000,
            "longest time stored idempotent Kafka batches wait for a producer-state snapshot"),
    Setting("kafka_producer_id_expiry_ms", int, 86_400_000, 1_000, 365 * 86_400_000,
            "a Kafka producer id idle this long loses its sequence state in a partition "
            "(Kafka's producer.id.expiration.ms)"),
    Setting("kafka_request_bytes_max", int, 100 * MIB, 1 * KIB, 1 * GIB,
            "largest Kafka request frame (Kafka's socket.request.max.bytes)"),
    Setting("kafka_requests_in_flight_max", int, 100, 1, 10_000,
            "requests of one Kafka connection read ahead of their responses; further reads wait"),
    Setting("kafka_fetch_wait_ms_max", int, 30_000, 0, 600_000,
            "bound on a Fetch's max_wait_ms (a client asking longer waits this long)"),
    Setting("kafka_group_min_session_timeout_ms", int, 6_000, 100, 3_600_000,
            "shortest session timeout a Kafka group member may ask (Kafka's group.min.session.timeout.ms)"),
    Setting("kafka_group_max_session_timeout_ms", int, 1_800_000, 1_000, 86_400_000,
            "longest session timeout a Kafka group member may ask (Kafka's group.max.session.timeout.ms)"),
    Setting("kafka_group_initial_rebalance_delay_ms", int, 3_000, 0, 300_000,
            "how long the first rebalance of an empty Kafka group waits for more members "
            "(Kafka's group.initial.rebalance.delay.ms)"),
    Setting("kafka_group_members_max", int, 1_000, 1, 100_000,
            "most members one Kafka group may have (Kafka's group.max.size)"),
    Setting("kafka_groups_max", int, 100_000, 1, 10_000_000,
            "most Kafka groups one broker coordinates at once; further JoinGroups are refused"),
    Section("cluster", "ownership of bundles, lookup and load balancing"),
    Setting("cluster_name", str, "standalone", doc="the cluster's name (admin /clusters, broker lists)"),
    Setting("broker_default_namespace_bundles", int, 4, 1, 128,
            "bundles a namespace gets when nothing else was asked at its creation"),
    Setting("broker_load_report_interval_ms", int, 5_000, 100, 3_600_000,
            "how often a broker rewrites its load report under /loadbalance/brokers"),
    Setting("broker_lookup_owner_wait_ms", int, 15_000, 0, 600_000,
            "a lookup of a bundle whose owner is unloading it or unreachable waits this long for its key to go"),
    Setting("broker_bundle_split_topics_max", int, 1_000, 1, 10_000_000,
            "a bundle with more topics than this is split (range_equally_divide)"),
    Setting("broker_bundle_split_msg_rate_max", float, 30_000.0, 1.0, 1e9,
            "a bundle with more msg/s (in + out) than this is split"),
    Setting("broker_bundle_auto_split", bool, True, doc="split busy bundles automatically"),
    Setting("broker_load_shedding_interval_ms", int, 60_000, 100, 86_400_000,
            "how often the leader looks for an overloaded broker to take a bundle off"),
    Setting("broker_load_shedding_ratio_max", float, 1.25, 1.0, 100.0,
            "a broker whose load score is this many times the cluster average gives up a bundle"),
    Section("retention and TTL", "broker defaults of retention and message TTL (Pulsar's defaultRetention* "
                                 "and ttlDurationDefaultInSeconds)"),
    Setting("retention_time_minutes", int, 0, -1, 10_000_000, "keep acked data this long (0: no, -1: forever)"),
    Setting("retention_size_mb", int, 0, -1, 10_000_000, "keep acked data up to this size (0: no, -1: unbounded)"),
    Setting("ttl_seconds", int, 0, 0, 10_000_000, "messages older than this are acked by TTL (0: off)"),
    Section("backlog quotas", "broker defaults of backlog quotas (Pulsar's backlogQuota* settings)"),
    Setting("backlog_quota_check_enabled", bool, True,
            doc="enforce backlog quotas: the periodic check and the refusal of producers (false: shown only)"),
    Setting("backlog_quota_check_interval_ms", int, 60_000, 10, 86_400_000,
            "how often each loaded topic's backlog is checked against its quotas"),
    Setting("backlog_quota_default_limit_bytes", int, -1, -1, 2**62,
            "broker default destination_storage quota: backlog bytes allowed per topic (-1 none)"),
    Setting("backlog_quota_default_limit_seconds", int, -1, -1, 2**62,
            "broker default message_age quota: age of the oldest unacked message allowed (-1 none)"),
    Setting("backlog_quota_default_policy", str, "producer_request_hold",
            doc="broker default quota policy: producer_request_hold, producer_exception or "
                "consumer_backlog_eviction"),
    Section("cold tier", "offload of closed ledgers to S3 (Pulsar's managedLedgerOffload* settings)"),
    Setting("offload_driver", str, "",
            doc="cold tier: \"s3\" (any S3 API: AWS, MinIO, SeaweedFS) or \"\" for none (offload refused)"),
    Setting("offload_s3_endpoint", str, "", doc="S3 endpoint URL; empty: AWS's own for the region"),
    Setting("offload_s3_region", str, "us-east-1", doc="S3 region (SigV4 signs with it)"),
    Setting("offload_s3_bucket", str, "strata-offload", doc="bucket offloaded ledgers go to"),
    Setting("offload_s3_prefix", str, "strata",
            doc="key prefix: objects are {prefix}/{tenant}/{namespace}/{topic}/ledger-{id}.parquet"),
    Setting("offload_s3_connect_timeout_ms", int, 5_000, 100, 600_000, "bound on connecting to S3"),
    Setting("offload_s3_read_timeout_ms", int, 30_000, 100, 3_600_000, "bound on one S3 response"),
    Setting("offload_s3_part_bytes", int, 8 * MIB, 5 * MIB, 1 * GIB,
            "multipart upload part size (S3's minimum is 5 MiB)"),
    Setting("offload_s3_parts_in_flight_max", int, 4, 1, 64, "parts of one object uploading at once"),
    Setting("offload_s3_throttle_attempts_max", int, 10, 1, 100,
            "attempts of one S3 call while S3 answers 503 SlowDown / 429 (backoff with full jitter between)"),
    Setting("offload_s3_throttle_backoff_max_ms", int, 5_000, 1, 600_000,
            "cap of one wait of a throttled S3 call (waits double from 50 ms up to it, each jittered)"),
    Setting("offload_s3_throttle_deadline_ms", int, 60_000, 10, 3_600_000,
            "no retry of a throttled S3 call starts after this long"),
    Setting("offload_s3_read_range_bytes", int, 1 * MIB, 64 * KIB, 512 * MIB,
            "a cold read fetches a row group in ranged GETs of at most this many bytes, in parallel"),
    Setting("offload_s3_reads_in_flight_max", int, 8, 1, 64,
            "ranged GETs of cold reads running at once, read-ahead included (per broker)"),
    Setting("offload_read_ahead_bytes_max", int, 16 * MIB, 0, 4 * GIB,
            "bytes of row groups fetched ahead of sequential readers of offloaded ledgers, per broker"),
    Setting("offload_row_group_bytes", int, 4 * MIB, 64 * KIB, 512 * MIB,
            "target payload bytes per Parquet row group (the unit of a ranged read)"),
    Setting("offload_threshold_bytes", int, -1, -1, 2**62,
            "broker default of offloadThreshold: offload once the topic's ledgers exceed it (-1 off, 0 ASAP)"),
    Setting("offload_threshold_seconds", int, -1, -1, 2**62,
            "broker default of offloadThresholdInSeconds: offload ledgers older than this (-1 off)"),
    Setting("offload_deletion_lag_ms", int, 14_400_000, -1, 2**62,
            "broker default of offloadDeletionLagMs: delete the bookie copy this long after an offload (-1 never)"),
    Setting("offload_read_priority", str, "tiered-storage-first",
            doc="read an offloaded ledger still on the bookies from S3 first, or \"bookkeeper-first\""),
    Setting("offload_read_ahead_row_groups_max", int, 4, 0, 1_000,
            "row groups fetched ahead of a sequential reader of an offloaded ledger"),
    Setting("offload_read_cache_bytes_max", int, 64 * MIB, 0, 64 * GIB,
            "bytes of fetched row groups kept for readers of offloaded ledgers, per broker"),
    Setting("offload_open_objects_max", int, 64, 1, 1_000_000,
            "offloaded objects whose footer (row-group map) a broker keeps open"),
    Setting("offload_retry_backoff_max_ms", int, 60_000, 10, 3_600_000,
            "failed offloads and cold reads are retried with backoff doubling up to this"),
    Setting("offload_attempts_max", int, 5, 1, 1_000, "attempts of one ledger's upload before status ERROR"),
    Section("topic compaction", "compaction of topics by key"),
    Setting("compaction_threshold_bytes", int, 0, 0, 2**62,
            "broker default of compactionThreshold: compact once the __compaction backlog exceeds it (0 off)"),
    Setting("compaction_keys_max", int, 5_000_000, 1, 1_000_000_000,
            "distinct keys one compaction keeps in memory; more: the compaction fails (ERROR)"),
    Setting("compaction_entries_in_flight_max", int, 256, 1, 100_000,
            "entries of the compacted ledger written at once (adds not yet confirmed)"),
    Section("cold tier: Iceberg tables", "offloaded ledgers as data files of Iceberg tables"),
    Setting("offload_iceberg_enabled", bool, True,
            doc="register offloaded ledgers as data files of their topic's Iceberg table (offload.iceberg)"),
    Setting("offload_iceberg_catalog_uri", str, "",
            doc="database of the Iceberg SqlCatalog (sqlite:///... or postgresql://...); empty: the metadata store's"),
    Setting("offload_iceberg_timeout_ms", int, 30_000, 1_000, 600_000,
            "bound on registering or removing one offloaded ledger's file in its Iceberg table"),
    Section("web console", "the browser console every broker's admin port serves (broker.admin.console_site)"),
    Setting("console_enabled", bool, True,
            doc="serve the web console at /console/ on the admin ports, and its /admin/v2/console/* routes"),
    Setting("console_assets_dir", str, "",
            doc="directory of the built console (index.html, assets/); '' : console/dist of the source tree"),
    Setting("console_audit_entries_max", int, 10_000, 1, 10_000_000,
            "audit records (admin changes, message views, refusals) a broker keeps in memory for the console"),
    Setting("console_tails_max", int, 32, 1, 10_000,
            "live tails (GET .../tail) one broker serves at once; one more is answered 503"),
    Setting("console_tail_queue_messages_max", int, 1_000, 1, 1_000_000,
            "messages a live tail holds for a browser that reads slower than they arrive; past it the tail "
            "skips ahead to the newest and says how many it dropped"),
    Setting("console_scan_entries_max", int, 100_000, 1, 10_000_000,
            "most entries one message browse (GET .../messages) may read: the upper bound of its maxScanEntries"),
    Section("security: TLS", "the TLS ports and files (Pulsar's tls* and *PortTls settings)"),
    Setting("broker_tls_port", int, -1, -1, 65535,
            "Pulsar protocol over TLS, pulsar+ssl:// (Pulsar's brokerServicePortTls, usually 6651; -1: not served; "
            "0: any free port)", flags=("strata standalone --tls-port",)),
    Setting("broker_admin_tls_port", int, -1, -1, 65535,
            "admin HTTPS and /metrics (Pulsar's webServicePortTls, usually 8443; -1: not served; 0: any free port)",
            flags=("strata standalone --admin-tls-port",)),
    Setting("tls_cert_file", str, "",
            doc="PEM certificate (chain) the broker's TLS ports present (tlsCertificateFilePath)"),
    Setting("tls_key_file", str, "", doc="PEM private key of tls_cert_file (tlsKeyFilePath)"),
    Setting("tls_trust_certs_file", str, "",
            doc="PEM CA certificates client certificates are checked against, and that this node trusts when it "
                "connects out over TLS (tlsTrustCertsFilePath)"),
    Setting("tls_require_trusted_client_cert_on_connect", bool, False,
            doc="a TLS client must present a certificate signed by tls_trust_certs_file "
                "(tlsRequireTrustedClientCertOnConnect)"),
    Setting("tls_handshake_timeout_ms", int, 10_000, 100, 600_000,
            "a TLS handshake not done in this time is dropped (a slow or garbage handshake holds nothing else)"),
    Setting("tls_min_version", str, "TLSv1.2", doc="oldest TLS version served: TLSv1.2 or TLSv1.3"),
    Section("security: authentication", "who a client is (Pulsar's authentication* and token* settings)"),
    Setting("authentication_enabled", bool, False,
            doc="clients must authenticate (authenticationEnabled); off: every client has anonymous_user_role"),
    Setting("authentication_providers", str, "",
            doc="comma list of token, tls, basic (or Pulsar's AuthenticationProvider* class names)"),
    Setting("token_secret_key", str, "",
            doc="HS256 key of the token provider: file:///path, data:;base64,<key>, env:VAR (tokenSecretKey)"),
    Setting("token_public_key", str, "",
            doc="RS256/ES256 public key (PEM or DER) of the token provider, same forms (tokenPublicKey)"),
    Setting("token_public_alg", str, "RS256", doc="algorithm of token_public_key: RS256..RS512, ES256..ES512, PS256.."),
    Setting("token_auth_claim", str, "sub", doc="the claim holding the role (tokenAuthClaim)"),
    Setting("token_audience_claim", str, "aud", doc="the claim holding the audience (tokenAudienceClaim)"),
    Setting("token_audience", str, "", doc="the audience a token must name ('': not checked) (tokenAudience)"),
    Setting("token_allowed_clock_skew_seconds", int, 0, 0, 86_400,
            "leeway on exp/nbf (tokenAllowedClockSkewSeconds)"),
    Setting("basic_auth_conf", str, "",
            doc="htpasswd file of the basic provider (bcrypt or apr1): a path, file:///path or data:;base64,... "
                "(basicAuthConf)"),
    Setting("authentication_refresh_check_interval_ms", int, 60_000, 10, 86_400_000,
            "how often connections are checked for expired credentials, which are refreshed through AUTH_CHALLENGE "
            "(authenticationRefreshCheckSeconds)"),
    Setting("authentication_connect_timeout_ms", int, 10_000, 100, 600_000,
            "a connection that has not completed CONNECT (and authentication) in this time is closed; so is one "
            "that has not answered an AUTH_CHALLENGE"),
    Setting("broker_client_auth_token", str, "",
            doc="token this broker presents to other brokers' admin APIs (brokerClientAuthenticationParameters): "
                "file:///path, data:;base64,..., env:VAR or the token"),
    Section("security: authorization", "what a role may do (Pulsar's authorization* settings)"),
    Setting("authorization_enabled", bool, False,
            doc="check every producer, consumer, lookup and admin call against roles and permissions "
                "(authorizationEnabled)"),
    Setting("super_user_roles", str, "", doc="comma list of roles allowed everything (superUserRoles)"),
    Setting("anonymous_user_role", str, "",
            doc="role of a client that presents no credentials, or names a method no provider has "
                "('': such clients are refused) (anonymousUserRole)"),
    Setting("authorization_allow_wildcards_matching", bool, False,
            doc="a granted role 'a.*' or '*.b' matches by prefix or suffix (authorizationAllowWildcardsMatching)"),
    Setting("authorization_recheck_interval_ms", int, 5_000, 10, 3_600_000,
            "producers and consumers are checked against the current permissions this often; a revoked one is "
            "closed"),
    Setting("metrics_require_auth", bool, True,
            doc="with authentication on, /metrics needs credentials: a superuser sees every series, other roles "
                "only their tenants' (Pulsar's authenticateMetricsEndpoint)"),
    Section("security: internal links", "how brokers and bookies trust each other"),
    Setting("bookie_auth_secret", str, "",
            doc="cluster secret brokers present to bookies, set on both: file:///path, data:;base64,..., env:VAR "
                "('': bookies accept any client unless bookie_tls_client_roles is set)"),
    Setting("bookie_tls_enabled", bool, False,
            doc="bookie gRPC and data ports speak TLS with tls_cert_file/tls_key_file; clients check them against "
                "tls_trust_certs_file"),
    Setting("bookie_tls_client_roles", str, "",
            doc="with bookie TLS: client certificate CNs a bookie accepts as brokers (mTLS), beside the secret"),
    Setting("bookie_client_tls_cert_file", str, "",
            doc="PEM certificate a broker presents to bookies (mTLS; its CN in bookie_tls_client_roles)"),
    Setting("bookie_client_tls_key_file", str, "", doc="PEM private key of bookie_client_tls_cert_file"),
    Section("strata standalone", "the one-process development cluster"),
    Setting("standalone_bookie_start_timeout_ms", int, 60_000, 1_000, 3_600_000,
            "`strata standalone` waits this long for each bookie to recover and serve"),
    Setting("standalone_bookie_stop_timeout_ms", int, 10_000, 100, 600_000,
            "`strata standalone` waits this long for its bookies to stop before killing them"),
)

SETTINGS: tuple[Setting, ...] = _sectioned(TABLE)
SECTIONS: tuple[Section, ...] = tuple(item for item in TABLE if isinstance(item, Section))
SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


class Config(SettingsFields):
    """Validated, read-only settings. Read them as attributes: `config.bookie_entry_bytes_max`.

    Each setting is a slot, so a read is a plain attribute read (settings are read on hot paths).
    `SettingsFields`, generated from the table, declares each one's name and type to mypy and
    editors: `config.brokr_port` is a type error, and "go to definition" finds the setting's doc.
    """

    __slots__ = ("_values", *SETTINGS_BY_NAME)
    _values: dict[str, Any]         # the same values by name (for replace())

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))
        for name, value in values.items():
            object.__setattr__(self, name, value)

    if not TYPE_CHECKING:   # hidden from mypy, which would otherwise accept any name
        def __getattr__(self, name: str) -> Any:
            """Only reached for a name that is not a setting (settings are slots)."""
            raise AttributeError(f"no setting named {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Config is read-only; build a new one with replace()")

    def replace(self, **overrides: Unpack[SettingValues]) -> Config:
        merged = dict(self._values)
        merged.update(overrides)
        return _validated(merged)


def _coerce(setting: Setting, raw: Any, source: str) -> Any:
    kind = setting.type
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(raw, str) and raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError(raw)
            return int(raw)
        if kind is float:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return float(raw)
        if kind is str:
            if not isinstance(raw, str):
                raise ValueError(raw)
            return raw
    except (TypeError, ValueError):
        pass
    shown = "<redacted>" if any(word in setting.name for word in _SECRET_WORDS) else raw
    raise ConfigError(f"setting {setting.name} from {source} must be {kind.__name__}", value=shown)


# a setting whose name holds one of these may carry a secret: its value is never echoed in an error
_SECRET_WORDS = ("secret", "token", "key", "password", "auth_conf")


def _validated(values: Mapping[str, Any]) -> Config:
    out: dict[str, Any] = {}
    for name, value in values.items():
        setting = SETTINGS_BY_NAME.get(name)
        if setting is None:
            raise ConfigError(f"unknown setting {name!r}")
        value = _coerce(setting, value, "value")
        if setting.min is not None and value < setting.min:
            raise ConfigError(f"setting {name} below its minimum {setting.min}", value=value)
        if setting.max is not None and value > setting.max:
            raise ConfigError(f"setting {name} above its maximum {setting.max}", value=value)
        out[name] = value
    _check_relations(out)
    return Config(out)


def _check_relations(v: Mapping[str, Any]) -> None:
    e, qw, qa = v["ledger_ensemble_size"], v["ledger_write_quorum"], v["ledger_ack_quorum"]
    if not (e >= qw >= qa >= 1):
        raise ConfigError("ledger quorums must satisfy E >= Qw >= Qa >= 1", E=e, Qw=qw, Qa=qa)
    if not re.fullmatch(r"[A-Za-z0-9_.:=%-]+/[A-Za-z0-9_.:=%-]+", v["kafka_default_namespace"]):
        raise ConfigError("kafka_default_namespace must be tenant/namespace", value=v["kafka_default_namespace"])
    if v["broker_frame_bytes_max"] < v["broker_max_message_bytes"]:
        raise ConfigError("broker_frame_bytes_max must be at least broker_max_message_bytes")
    buffer_high = v["broker_connection_write_buffer_bytes_high"]
    if v["broker_connection_write_buffer_bytes_max"] < buffer_high + v["broker_frame_bytes_max"]:
        raise ConfigError("broker_connection_write_buffer_bytes_max must be at least "
                          "broker_connection_write_buffer_bytes_high + broker_frame_bytes_max")
    if v["bookie_entry_bytes_max"] < v["broker_max_message_bytes"]:
        raise ConfigError("bookie_entry_bytes_max must be at least broker_max_message_bytes")
    if v["managed_ledger_rollover_min_age_ms"] > v["managed_ledger_rollover_age_ms"]:
        raise ConfigError("managed_ledger_rollover_min_age_ms must not exceed managed_ledger_rollover_age_ms")
    if v["cursor_state_bytes_max"] > v["metadata_value_bytes_max"]:
        raise ConfigError("cursor_state_bytes_max must not exceed metadata_value_bytes_max")
    if v["metadata_async_threads_max"] > v["metadata_pool_connections"] + v["metadata_pool_overflow_max"]:
        raise ConfigError("metadata_async_threads_max must not exceed metadata_pool_connections + "
                          "metadata_pool_overflow_max (a thread past them would wait for a connection)")
    if v["cursor_writer_ops_per_transaction_max"] > v["metadata_put_many_ops_max"]:
        raise ConfigError("cursor_writer_ops_per_transaction_max must not exceed metadata_put_many_ops_max")
    if v["ledger_bookie_request_payload_bytes_max"] > v["bookie_entry_bytes_max"]:
        raise ConfigError("ledger_bookie_request_payload_bytes_max must not exceed bookie_entry_bytes_max "
                          "(a request must fit the bookie's frame limit)")
    for name in ("bookie_bind_host", "broker_bind_host", "broker_admin_bind_host", "broker_advertised_host"):
        if not v[name]:
            raise ConfigError(f"{name} must not be empty")
    if not v["bookie_advertised_host"] and v["bookie_bind_host"] in WILDCARD_HOSTS:
        raise ConfigError("bookie_advertised_host must be set when bookie_bind_host is a wildcard address",
                          bind=v["bookie_bind_host"])
    if v["broker_advertised_host"] in WILDCARD_HOSTS or v["bookie_advertised_host"] in WILDCARD_HOSTS:
        raise ConfigError("an advertised host must be one clients can connect to, not a wildcard address")
    if v["offload_driver"] not in ("", "s3"):
        raise ConfigError("offload_driver must be \"s3\" or empty", offload_driver=v["offload_driver"])
    if v["offload_read_priority"] not in ("tiered-storage-first", "bookkeeper-first"):
        raise ConfigError("offload_read_priority must be tiered-storage-first or bookkeeper-first",
                          offload_read_priority=v["offload_read_priority"])
    if v["backlog_quota_default_policy"] not in ("producer_request_hold", "producer_exception",
                                                 "consumer_backlog_eviction"):
        raise ConfigError("backlog_quota_default_policy must be producer_request_hold, producer_exception "
                          "or consumer_backlog_eviction", policy=v["backlog_quota_default_policy"])
    if v["offload_driver"] and not v["offload_s3_bucket"]:
        raise ConfigError("offload_s3_bucket must be set when offload_driver is set")
    _check_security(v)
    rt, rs = v["retention_time_minutes"], v["retention_size_mb"]
    if (rt == 0) != (rs == 0):  # as cursor.retention.RetentionPolicy: 0 only paired with 0
        raise ConfigError("retention: 0 is valid only paired with 0", time=rt, size=rs)


AUTH_PROVIDER_NAMES = {   # Pulsar's class names -> ours
    "token": "token", "tls": "tls", "basic": "basic",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
}


def auth_providers(v: Mapping[str, Any] | Config) -> tuple[str, ...]:
    """`authentication_providers` as our names, in order (ConfigError on one we do not have)."""
    raw = v["authentication_providers"] if isinstance(v, Mapping) else v.authentication_providers
    out: list[str] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name = AUTH_PROVIDER_NAMES.get(item)
        if name is None:
            raise ConfigError("unknown authentication provider (token, tls or basic)", provider=item)
        if name not in out:
            out.append(name)
    return tuple(out)


def csv_setting(raw: str) -> tuple[str, ...]:
    """A comma-list setting (super_user_roles, ...) as its stripped, non-empty items."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _check_security(v: Mapping[str, Any]) -> None:
    if v["broker_port"] == -1 and v["broker_tls_port"] == -1:
        raise ConfigError("broker_port and broker_tls_port are both -1: the broker would serve no Pulsar port")
    if v["broker_admin_port"] == -1 and v["broker_admin_tls_port"] == -1:
        raise ConfigError("broker_admin_port and broker_admin_tls_port are both -1: no admin port")
    tls_ports = v["broker_tls_port"] != -1 or v["broker_admin_tls_port"] != -1
    if (tls_ports or v["bookie_tls_enabled"]) and not (v["tls_cert_file"] and v["tls_key_file"]):
        raise ConfigError("a TLS port (broker_tls_port, broker_admin_tls_port, bookie_tls_enabled) needs "
                          "tls_cert_file and tls_key_file")
    if v["tls_require_trusted_client_cert_on_connect"] and not v["tls_trust_certs_file"]:
        raise ConfigError("tls_require_trusted_client_cert_on_connect needs tls_trust_certs_file")
    if v["bookie_tls_enabled"] and not v["tls_trust_certs_file"]:
        raise ConfigError("bookie_tls_enabled needs tls_trust_certs_file (clients check the bookie's certificate)")
    if v["bookie_tls_client_roles"] and not v["bookie_tls_enabled"]:
        raise ConfigError("bookie_tls_client_roles needs bookie_tls_enabled")
    if bool(v["bookie_client_tls_cert_file"]) != bool(v["bookie_client_tls_key_file"]):
        raise ConfigError("bookie_client_tls_cert_file and bookie_client_tls_key_file go together")
    if v["tls_min_version"] not in ("TLSv1.2", "TLSv1.3"):
        raise ConfigError("tls_min_version must be TLSv1.2 or TLSv1.3", tls_min_version=v["tls_min_version"])
    providers = auth_providers(v)
    if v["authentication_enabled"] and not providers:
        raise ConfigError("authentication_enabled needs authentication_providers (token, tls, basic)")
    if "token" in providers and not (v["token_secret_key"] or v["token_public_key"]):
        raise ConfigError("the token provider needs token_secret_key or token_public_key")
    if "basic" in providers and not v["basic_auth_conf"]:
        raise ConfigError("the basic provider needs basic_auth_conf (an htpasswd file)")
    if "tls" in providers and not tls_ports:
        raise ConfigError("the tls provider needs a TLS port (broker_tls_port or broker_admin_tls_port)")


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Unpack[SettingValues],
) -> Config:
    """Defaults, then the TOML file (or a Pulsar `.conf` file, common.pulsar_conf), then STRATA_*
    environment variables, then overrides."""
    values: dict[str, Any] = {s.name: s.default for s in SETTINGS}
    env = os.environ if env is None else env
    if path is not None and str(path).endswith(".conf"):   # Pulsar's broker.conf / standalone.conf
        from common.pulsar_conf import read_pulsar_conf
        values.update(read_pulsar_conf(path, env))
    elif path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
        data = data.get("strata", data)
        for name, raw in data.items():
            setting = SETTINGS_BY_NAME.get(name)
            if setting is None:
                raise ConfigError(f"unknown setting {name!r} in {path}")
            values[name] = _coerce(setting, raw, str(path))
    for setting in SETTINGS:
        raw = env.get("STRATA_" + setting.name.upper())
        if raw is not None:
            values[setting.name] = _coerce(setting, raw, "STRATA_" + setting.name.upper())
    values.update(overrides)
    return _validated(values)


def default_config(**overrides: Unpack[SettingValues]) -> Config:
    """The defaults plus overrides, ignoring files and the environment (for tests and tools)."""
    return load_config(env={}, **overrides)
