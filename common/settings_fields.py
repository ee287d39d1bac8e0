"""Every setting's name and type, generated from `common.config.TABLE` by `python -m common.settings_doc`.

Do not edit: change the table and run the command (a test fails while this file is stale).
`Config` inherits `SettingsFields`, so mypy and editors know each setting: `config.brokr_port` is a
type error, and "go to definition" lands on the setting's doc here. `SettingValues` types the
keyword overrides of `load_config`, `default_config` and `Config.replace` (for the type checker
only: import it under `if TYPE_CHECKING:`). Nothing here holds a value: a `Config` keeps its
values in slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict


class SettingsFields:
    """Every setting, as an attribute of `Config` (annotations only)."""

    __slots__ = ()

    # --- metadata store ---
    metadata_value_bytes_max: int
    """largest value one key may hold. Default 8388608 (8 MiB); bounds 1 .. 67108864; unit bytes."""
    metadata_session_lease_ms: int
    """ephemeral keys vanish this long after the owner stops renewing. Default 10000 (10 s); bounds 500 .. 600000;
    unit ms.
    """
    metadata_watch_poll_ms: int
    """how often watchers poll the change log. Default 100; bounds 10 .. 5000; unit ms."""
    metadata_op_timeout_ms: int
    """bound on one metadata operation, including a database that is down. Default 5000 (5 s); bounds 100 .. 120000;
    unit ms.
    """
    metadata_start_wait_ms: int
    """how long a starting broker or bookie keeps trying to reach the metadata store before it gives up and exits (as
    Pulsar's broker waits out its ZooKeeper session timeout). Default 30000 (30 s); bounds 0 .. 600000; unit ms.
    """
    metadata_changelog_keep_ms: int
    """how long change-log rows are kept for watchers. Default 300000 (5 min); bounds 10000 .. 86400000; unit ms."""
    metadata_pool_connections: int
    """database connections kept open per store. Default 4; bounds 1 .. 1024."""
    metadata_pool_overflow_max: int
    """extra database connections opened under load per store, closed when returned. Default 8; bounds 0 .. 1024."""
    metadata_async_threads_max: int
    """threads running metadata calls for asyncio code, per AsyncMetadataStore. Default 8; bounds 1 .. 1024."""
    metadata_async_calls_in_flight_max: int
    """metadata calls queued or running per AsyncMetadataStore; further callers wait. Default 256; bounds 1 ..
    1000000.
    """
    metadata_watches_max: int
    """watches one store may hold; past it a new watch is refused (LimitExceeded). Default 10000; bounds 1 ..
    10000000.
    """
    metadata_watch_rows_per_poll_max: int
    """change-log rows read per poll; a poll that gets this many polls again at once. Default 1000; bounds 1 ..
    1000000.
    """
    metadata_list_prefix_keys_max: int
    """most keys one list_prefix() returns (ask for less, or page by sub-prefix). Default 100000; bounds 1 ..
    100000000.
    """
    metadata_put_many_ops_max: int
    """most writes in one put_many() transaction, which holds the write lock that long. Default 10000; bounds 1 ..
    1000000.
    """

    # --- bookie ---
    bookie_entry_bytes_max: int
    """largest entry a bookie stores (5 MiB plus headers). Default 5308416 (5.06 MiB); bounds 1024 .. 67108864; unit
    bytes.
    """
    bookie_journal_group_commit_wait_ms: float
    """extra time an add waits for others to share its fsync (0: none; adds arriving during an fsync share the next
    one anyway). Default 0.0; bounds 0.0 .. 1000.0; unit ms.
    """
    bookie_journal_group_commit_bytes_max: int
    """flush the journal once this many bytes are buffered. Default 4194304 (4 MiB); bounds 4096 .. 268435456; unit
    bytes.
    """
    bookie_segment_file_bytes_max: int
    """roll to a new segment file past this size. Default 268435456 (256 MiB); bounds 1048576 .. 17179869184; unit
    bytes.
    """
    bookie_checkpoint_interval_ms: int
    """how often segments are synced and old journals deleted. Default 10000 (10 s); bounds 100 .. 3600000; unit ms."""
    bookie_gc_interval_ms: int
    """how often deleted ledgers' segment files are reclaimed. Default 30000 (30 s); bounds 100 .. 86400000; unit ms."""
    bookie_gc_compact_live_ratio_max: float
    """compact a sealed segment whose live fraction is at or below this. Default 0.5; bounds 0.0 .. 1.0; unit ratio."""
    bookie_disk_free_bytes_min: int
    """turn read-only when free disk falls below this. Default 67108864 (64 MiB); bounds 0 .. 1099511627776; unit
    bytes.
    """
    bookie_unsafe_skip_fsync: bool
    """UNSAFE, experiments only: acknowledge adds without fsync. Default false."""
    bookie_add_queue_entries_max: int
    """adds waiting for the journal before the bookie pushes back. Default 10000; bounds 1 .. 10000000."""
    bookie_read_entries_max: int
    """most entries one read request returns. Default 10000; bounds 1 .. 10000000."""
    bookie_port: int
    """gRPC port of `strata bookie` (0: any free port). Default 3181; bounds 0 .. 65535."""
    bookie_bind_host: str
    """address the bookie's gRPC and data ports listen on (0.0.0.0: every interface). Default "127.0.0.1"."""
    bookie_advertised_host: str
    """host other nodes are told to connect to, and the bookie's identity in ledger metadata ('': bookie_bind_host;
    must be set when that is a wildcard address). Default "".
    """
    bookie_registration_refresh_interval_ms: int
    """how often a bookie rewrites its registration (free space, read-only). Default 3000 (3 s); bounds 100 ..
    3600000; unit ms.
    """
    bookie_read_response_bytes_max: int
    """entry bytes per read response; one larger entry goes alone. Default 1048576 (1 MiB); bounds 4096 .. 67108864;
    unit bytes.
    """
    bookie_gc_compact_batch_bytes: int
    """live entry bytes copied per batch when a segment is compacted. Default 4194304 (4 MiB); bounds 65536 ..
    1073741824; unit bytes.
    """
    bookie_disk_check_interval_ms: int
    """how often free disk space is checked (read-only below bookie_disk_free_bytes_min). Default 1000 (1 s); bounds
    10 .. 600000; unit ms.
    """
    bookie_add_requests_queued_max: int
    """add requests submitted to storage and not yet answered, per data connection; at this many the bookie stops
    reading it. Default 1024; bounds 1 .. 1000000.
    """
    bookie_reads_queued_max: int
    """read requests waiting to be answered, per data connection; at this many the bookie stops reading it. Default
    256; bounds 1 .. 1000000.
    """
    bookie_data_write_buffer_bytes_high: int
    """unsent response bytes per data connection over which the bookie waits for the client to read. Default 4194304
    (4 MiB); bounds 16384 .. 1073741824; unit bytes.
    """
    bookie_journal_stop_timeout_ms: int
    """at shutdown, wait this long for the journal to flush (a hung disk must not keep a stopping bookie alive).
    Default 10000 (10 s); bounds 100 .. 600000; unit ms.
    """
    bookie_stop_grace_ms: int
    """at shutdown, in-flight requests get this long to finish. Default 2000 (2 s); bounds 0 .. 600000; unit ms."""
    bookie_metrics_port: int
    """HTTP port of the bookie's Prometheus /metrics, on bookie_bind_host (0: not served; `strata standalone` gives
    each bookie a free one). Default 0; bounds 0 .. 65535.
    """
    bookie_data_port: int
    """TCP port of the bookie's framed add/read data path, same host as gRPC (0: any free port; advertised in its
    registration and GetInfo). Default 0; bounds 0 .. 65535.
    """

    # --- ledger client ---
    ledger_add_timeout_ms: int
    """an add fails (retriable) when Qa bookies have not answered in this time. Default 10000 (10 s); bounds 100 ..
    600000; unit ms.
    """
    ledger_read_timeout_ms: int
    """bound on one read from one bookie. Default 10000 (10 s); bounds 100 .. 600000; unit ms."""
    ledger_adds_in_flight_max: int
    """adds sent but not yet acknowledged, per ledger. Default 10000; bounds 1 .. 1000000."""
    ledger_ensemble_size: int
    """E: bookies a ledger is striped over. Default 1; bounds 1 .. 64."""
    ledger_write_quorum: int
    """Qw: copies of each entry. Default 1; bounds 1 .. 64."""
    ledger_ack_quorum: int
    """Qa: copies that must be durable before an add is acknowledged. Default 1; bounds 1 .. 64."""
    ledger_bookie_quarantine_ms: int
    """a bookie this client saw fail is chosen for new ledgers and ensemble changes only when others are too few, for
    this long (a killed bookie stays registered until its lease expires). Default 30000 (30 s); bounds 0 ..
    3600000; unit ms.
    """
    ledger_auditor_interval_ms: int
    """how often the auditor scans every ledger for copies on bookies no longer registered (it also scans as soon as
    a bookie's registration vanishes). Default 60000 (1 min); bounds 100 .. 86400000; unit ms.
    """
    ledger_auditor_enabled: bool
    """run the auditor in this broker (finds and re-replicates under-replicated ledgers). Default true."""
    ledger_read_runs_in_flight_max: int
    """runs of consecutive entries (one per bookie) one ledger read has in flight at once. Default 32; bounds 1 ..
    10000.
    """
    ledger_bookie_requests_in_flight_max: int
    """add requests sent to one bookie and not yet answered, per link; further adds wait and gather into bigger
    requests. Default 32; bounds 1 .. 100000.
    """
    ledger_bookie_request_payload_bytes_max: int
    """entry bytes gathered into one add request to a bookie (one larger entry goes alone). Default 2097152 (2 MiB);
    bounds 1024 .. 67108864; unit bytes.
    """
    ledger_bookie_write_buffer_bytes_high: int
    """unsent bytes on a link to a bookie over which adds wait (and gather). Default 1048576 (1 MiB); bounds 16384 ..
    1073741824; unit bytes.
    """

    # --- managed ledger ---
    managed_ledger_rollover_entries: int
    """roll to a new ledger after this many entries. Default 50000; bounds 1 .. 10000000000."""
    managed_ledger_rollover_bytes: int
    """roll to a new ledger after this many bytes. Default 2147483648 (2 GiB); bounds 1 .. 1099511627776; unit bytes."""
    managed_ledger_rollover_age_ms: int
    """roll to a new ledger after this age. Default 14400000 (4 h); bounds 1 .. 2592000000; unit ms."""
    managed_ledger_rollover_min_age_ms: int
    """never roll before this age. Default 600000 (10 min); bounds 0 .. 2592000000; unit ms."""
    managed_ledger_ensemble_max: int
    """largest ensemble a persistence policy may set (Pulsar's managedLedgerMaxEnsembleSize). Default 5; bounds 1 ..
    64.
    """
    managed_ledger_write_quorum_max: int
    """largest write quorum a persistence policy may set (Pulsar's managedLedgerMaxWriteQuorum). Default 5; bounds 1
    .. 64.
    """
    managed_ledger_ack_quorum_max: int
    """largest ack quorum a persistence policy may set (Pulsar's managedLedgerMaxAckQuorum). Default 5; bounds 1 ..
    64.
    """
    managed_ledger_index_checkpoint_entries: int
    """the open ledger's index is checkpointed after this many new entries (a takeover reads back only the entries
    after the last checkpoint). Default 1000; bounds 1 .. 10000000.
    """
    managed_ledger_index_checkpoint_bytes: int
    """or after this many new bytes (batched entries are large: a takeover reads back what is unindexed). Default
    4194304 (4 MiB); bounds 1 .. 68719476736; unit bytes.
    """
    managed_ledger_index_checkpoint_interval_ms: int
    """and at most once per this interval per topic. Default 1000 (1 s); bounds 0 .. 3600000; unit ms."""
    managed_ledger_cache_bytes_max: int
    """tail-read cache of recently appended entries, per broker. Default 268435456 (256 MiB); bounds 0 ..
    68719476736; unit bytes.
    """
    managed_ledger_read_handles_max: int
    """closed ledgers a managed ledger keeps open for reads (the one opened first is dropped first). Default 16;
    bounds 1 .. 10000.
    """

    # --- cursor ---
    cursor_state_bytes_max: int
    """largest persisted cursor state; over it is an error and a metric. Default 4194304 (4 MiB); bounds 1024 ..
    536870912; unit bytes.
    """
    cursor_persist_interval_ms: int
    """coalesce cursor writes: at most one persist per cursor per interval. Default 1000 (1 s); bounds 0 .. 60000;
    unit ms.
    """
    cursor_writer_ops_per_transaction_max: int
    """cursor saves grouped into one metadata transaction (at most metadata_put_many_ops_max). Default 1000; bounds 1
    .. 1000000.
    """
    cursor_writer_queue_max: int
    """cursor saves waiting for a group transaction per broker; further saves wait for room. Default 20000; bounds 1
    .. 10000000.
    """

    # --- broker ---
    broker_port: int
    """Pulsar binary protocol port (-1: not served, TLS only). Default 6650; bounds -1 .. 65535."""
    broker_admin_port: int
    """admin HTTP port (-1: not served, HTTPS only). Default 8080; bounds -1 .. 65535."""
    broker_advertised_host: str
    """host clients are told to connect to. Default "127.0.0.1"."""
    advertised_listeners: str
    """named addresses of this broker, Pulsar's advertisedListeners: 'name:pulsar://host:port,...' (a lookup naming a
    listener is answered its URL; '' : none; see broker.cluster.listeners). Default "".
    """
    internal_listener_name: str
    """the listener whose pulsar:// URL is this broker's own service URL ('' : the first listener). Default ""."""
    broker_bind_host: str
    """address the Pulsar protocol ports (plain and TLS) listen on (0.0.0.0: every interface). Default "127.0.0.1"."""
    broker_admin_bind_host: str
    """address the admin HTTP and HTTPS ports (and /metrics) listen on (0.0.0.0: every interface). Default
    "127.0.0.1".
    """
    broker_admin_body_bytes_max: int
    """largest admin HTTP request body. Default 65536 (64 KiB); bounds 1024 .. 67108864; unit bytes."""
    broker_topic_load_timeout_ms: int
    """a lookup or command waits this long for a topic to load, then gets ServiceNotReady (retried). Default 10000
    (10 s); bounds 100 .. 600000; unit ms.
    """
    broker_max_message_bytes: int
    """largest message, told to clients in CONNECTED. Default 5242880 (5 MiB); bounds 1024 .. 67108864; unit bytes."""
    broker_frame_bytes_max: int
    """largest frame read off the wire. Default 5254144 (5.01 MiB); bounds 2048 .. 68157440; unit bytes."""
    broker_pending_sends_max: int
    """SENDs in flight per producer before the connection stops reading. Default 1000; bounds 1 .. 1000000."""
    broker_connection_requests_inflight_max: int
    """requests (LOOKUP, PRODUCER, SUBSCRIBE, ...) a connection may have in flight; at this many the broker stops
    reading it until one completes (as Pulsar's maxPendingPublishRequestsPerConnection). Default 1000; bounds 1 ..
    1000000.
    """
    broker_connection_write_buffer_bytes_high: int
    """unsent bytes queued for a client at which its consumers stop receiving; they resume when it drains to a
    quarter of this. Default 8388608 (8 MiB); bounds 16384 .. 1073741824; unit bytes.
    """
    broker_connection_write_buffer_bytes_max: int
    """unsent bytes queued for a client at which the broker closes the connection (a client that does not read its
    socket). Default 67108864 (64 MiB); bounds 65536 .. 4294967296; unit bytes.
    """
    broker_keepalive_interval_ms: int
    """PING a silent client after this long; close it after twice this long. Default 30000 (30 s); bounds 100 ..
    3600000; unit ms.
    """
    broker_dispatch_batch_entries_max: int
    """entries read for dispatch in one go. Default 100; bounds 1 .. 10000."""
    broker_consumer_unacked_messages_max: int
    """Shared/Key_Shared: a consumer holding this many unacked messages gets no more until acks bring it to half
    (Pulsar's maxUnackedMessagesPerConsumer; 0: no limit). Default 50000; bounds 0 .. 100000000.
    """
    broker_partitions_max: int
    """most partitions a partitioned topic may have. Default 1000; bounds 1 .. 100000."""
    broker_subscription_unacked_messages_max: int
    """Shared/Key_Shared: a subscription holding this many unacked messages dispatches no more until acks bring it to
    half (Pulsar's maxUnackedMessagesPerSubscription; 0: no limit). Default 200000; bounds 0 .. 1000000000.
    """
    broker_topic_producers_max: int
    """producers one topic may have (Pulsar's maxProducersPerTopic; 0: no limit). Default 0; bounds 0 .. 1000000."""
    broker_topic_consumers_max: int
    """consumers one topic may have (Pulsar's maxConsumersPerTopic; 0: no limit). Default 0; bounds 0 .. 1000000."""
    broker_subscription_consumers_max: int
    """consumers one subscription may have (Pulsar's maxConsumersPerSubscription; 0: no limit). Default 0; bounds 0
    .. 1000000.
    """
    broker_topic_subscriptions_max: int
    """subscriptions one topic may have (Pulsar's maxSubscriptionsPerTopic; 0: no limit). Default 0; bounds 0 ..
    1000000.
    """
    broker_namespace_topics_max: int
    """topics one namespace may have, partitions counted (Pulsar's maxTopicsPerNamespace; 0: no limit). Default 0;
    bounds 0 .. 100000000.
    """
    broker_publish_rate_messages_max: int
    """messages per second all producers of this broker may publish together (Pulsar's
    brokerPublisherThrottlingMaxMessageRate; 0: no limit). Default 0; bounds 0 .. 1000000000; unit msg/s.
    """
    broker_publish_rate_bytes_max: int
    """bytes per second all producers of this broker may publish together (Pulsar's
    brokerPublisherThrottlingMaxByteRate; 0: no limit). Default 0; bounds 0 .. 1099511627776; unit bytes.
    """
    broker_topic_dispatch_rate_messages_max: int
    """messages per second a topic dispatches (Pulsar's dispatchThrottlingRatePerTopicInMsg; 0: no limit). Default 0;
    bounds 0 .. 1000000000; unit msg/s.
    """
    broker_topic_dispatch_rate_bytes_max: int
    """bytes per second a topic dispatches (Pulsar's dispatchThrottlingRatePerTopicInByte; 0: no limit). Default 0;
    bounds 0 .. 1099511627776; unit bytes.
    """
    broker_subscription_dispatch_rate_messages_max: int
    """messages per second a subscription dispatches (Pulsar's dispatchThrottlingRatePerSubscriptionInMsg; 0: no
    limit). Default 0; bounds 0 .. 1000000000; unit msg/s.
    """
    broker_subscription_dispatch_rate_bytes_max: int
    """bytes per second a subscription dispatches (Pulsar's dispatchThrottlingRatePerSubscriptionInByte; 0: no
    limit). Default 0; bounds 0 .. 1099511627776; unit bytes.
    """
    broker_subscribe_rate_per_consumer_max: int
    """subscribes one consumer name may make per period (Pulsar's subscribeThrottlingRatePerConsumer; 0: no limit).
    Default 0; bounds 0 .. 1000000; unit msg/s.
    """
    broker_subscribe_rate_period_seconds: int
    """the period of broker_subscribe_rate_per_consumer_max (Pulsar's subscribeRatePeriodPerConsumerInSecond).
    Default 30; bounds 1 .. 86400; unit seconds.
    """
    broker_delete_inactive_topics_enabled: bool
    """delete topics inactive past their inactive-topic policy (Pulsar's brokerDeleteInactiveTopicsEnabled). Default
    true.
    """
    broker_delete_inactive_topics_frequency_seconds: int
    """how often inactive topics are looked for (Pulsar's brokerDeleteInactiveTopicsFrequencySeconds). Default 60;
    bounds 1 .. 86400; unit seconds.
    """
    broker_delete_inactive_topics_mode: str
    """delete_when_no_subscriptions or delete_when_subscriptions_caught_up (Pulsar's brokerDeleteInactiveTopicsMode).
    Default "delete_when_no_subscriptions".
    """
    broker_delete_inactive_topics_max_inactive_duration_seconds: int
    """how long a topic must be inactive before it is deleted (Pulsar's
    brokerDeleteInactiveTopicsMaxInactiveDurationSeconds). Default 60; bounds 1 .. 100000000; unit seconds.
    """
    broker_delete_inactive_partitioned_topic_metadata_enabled: bool
    """delete a partitioned topic's metadata once its last partition was deleted as inactive (Pulsar's
    brokerDeleteInactivePartitionedTopicMetadataEnabled). Default false.
    """
    broker_subscription_expiration_time_minutes: int
    """remove a subscription with no consumer for this long (Pulsar's subscriptionExpirationTimeMinutes; 0: never).
    Default 0; bounds 0 .. 100000000; unit minutes.
    """
    broker_allow_auto_topic_creation: bool
    """a producer or consumer may create a topic by naming it (Pulsar's allowAutoTopicCreation). Default true."""
    broker_allow_auto_topic_creation_type: str
    """what auto creation makes: non-partitioned or partitioned (Pulsar's allowAutoTopicCreationType). Default
    "non-partitioned".
    """
    broker_auto_topic_partitions: int
    """partitions of an auto-created partitioned topic (Pulsar's defaultNumPartitions). Default 1; bounds 1 ..
    100000.
    """
    broker_allow_auto_subscription_creation: bool
    """a consumer may create a subscription by naming it (Pulsar's allowAutoSubscriptionCreation). Default true."""
    broker_delayed_delivery_enabled: bool
    """messages with a delivery time wait for it (Pulsar's delayedDeliveryEnabled). Default true."""
    broker_delayed_delivery_max_delay_ms: int
    """longest delivery delay a producer may ask for (Pulsar's delayedDeliveryMaxDelayInMillis; 0: no limit). Default
    0; bounds 0 .. 100000000000; unit ms.
    """
    broker_subscription_pattern_length_max: int
    """longest topics pattern the broker applies to GET_TOPICS_OF_NAMESPACE; a longer one is not applied and the
    client filters (Pulsar's subscriptionPatternMaxLength). Default 50; bounds 0 .. 100000.
    """
    broker_topic_list_watchers_per_connection_max: int
    """most topic-list watchers (WATCH_TOPIC_LIST) one connection may hold. Default 100; bounds 1 .. 100000."""
    broker_delayed_delivery_tick_ms: int
    """how often due delayed messages are checked. Default 200; bounds 10 .. 10000; unit ms."""
    broker_delayed_delivery_entries_max: int
    """delayed entries a subscription keeps in memory; more are found again by re-scanning storage. Default 100000;
    bounds 1 .. 10000000.
    """
    broker_delayed_delivery_scan_entries_per_pass: int
    """entries one dispatch pass re-reads while re-scanning storage for overflowed delayed entries. Default 2048;
    bounds 1 .. 1000000.
    """
    broker_dispatch_replay_entries_max: int
    """Shared/Key_Shared: entries waiting to be sent again (redelivered, or their consumer closed) and Key_Shared's
    look-ahead, per subscription; more go back to the unread range. Default 10000; bounds 1 .. 10000000.
    """
    broker_dispatch_replay_cache_bytes_max: int
    """bytes of those entries kept in memory per subscription; the rest are re-read from storage. Default 67108864
    (64 MiB); bounds 0 .. 68719476736; unit bytes.
    """
    broker_dedup_snapshot_interval_entries: int
    """entries between dedup snapshots. Default 1000; bounds 1 .. 10000000."""
    broker_dedup_snapshot_interval_ms: int
    """longest time stored entries wait for a dedup snapshot (checked as entries are stored). Default 60000 (1 min);
    bounds 100 .. 86400000; unit ms.
    """
    broker_dedup_producers_max: int
    """producer names whose dedup marks a topic keeps; the least recently used go first. Default 10000; bounds 1 ..
    10000000.
    """
    broker_stats_sample_interval_ms: int
    """how often message/byte counters are sampled for rates. Default 1000 (1 s); bounds 10 .. 600000; unit ms."""
    broker_non_persistent_idle_ms: int
    """a non-persistent topic without producers or consumers is forgotten after this long. Default 60000 (1 min);
    bounds 100 .. 86400000; unit ms.
    """
    broker_retention_check_interval_ms: int
    """how often each loaded topic's TTL and retention are applied. Default 60000 (1 min); bounds 10 .. 86400000;
    unit ms.
    """
    broker_stats_rate_window_ms: int
    """msgRateIn/Out and msgThroughputIn/Out average over this window. Default 10000 (10 s); bounds 100 .. 3600000;
    unit ms.
    """
    broker_metrics_topic_level: bool
    """/metrics per topic and subscription (Pulsar's exposeTopicLevelMetricsInPrometheus); false: the same names
    summed per namespace. Default true.
    """
    broker_exclusive_producer_waiters_max: int
    """WaitForExclusive producers one topic queues; past it a new one is refused (ProducerBusy). Default 1000; bounds
    1 .. 1000000.
    """

    # --- kafka ---
    kafka_port: int
    """Kafka protocol port, PLAINTEXT (SASL_PLAINTEXT when authentication is on); usually 9092 (-1: not served; 0:
    any free port). Default -1; bounds -1 .. 65535.
    """
    kafka_tls_port: int
    """Kafka protocol over TLS, SSL (SASL_SSL when authentication is on; -1: not served; 0: any free port). Default
    -1; bounds -1 .. 65535.
    """
    kafka_bind_host: str
    """address the Kafka ports listen on ('' : broker_bind_host). Default ""."""
    kafka_advertised_listeners: str
    """Kafka's advertised.listeners: 'PLAINTEXT://host:port,SSL://host:port' as clients must reach this broker ('' :
    broker_advertised_host with the bound ports). Default "".
    """
    kafka_default_namespace: str
    """the tenant/namespace a Kafka topic name without one lives in (Kafka topic t = persistent://<namespace>/t).
    Default "public/default".
    """
    kafka_auto_create_topics: bool
    """a Metadata request that allows it creates a missing topic (Kafka's auto.create.topics.enable). Default true."""
    kafka_default_partitions: int
    """partitions of a topic created by Metadata, or by CreateTopics asking -1 (Kafka's num.partitions). Default 1;
    bounds 1 .. 100000.
    """
    kafka_default_retention_ms: int
    """retention a topic created through Kafka gets when neither it nor its namespace sets one (Kafka's
    log.retention.ms, 7 days; -1: forever; 0: the broker's retention, which keeps nothing no subscription holds).
    Default 604800000 (7 d); bounds -1 .. 4611686018427387904; unit ms.
    """
    kafka_producer_snapshot_interval_entries: int
    """idempotent Kafka batches stored between snapshots of a partition's producer state. Default 1000; bounds 1 ..
    10000000.
    """
    kafka_producer_snapshot_interval_ms: int
    """longest time stored idempotent Kafka batches wait for a producer-state snapshot. Default 60000 (1 min); bounds
    100 .. 86400000; unit ms.
    """
    kafka_producer_id_expiry_ms: int
    """a Kafka producer id idle this long loses its sequence state in a partition (Kafka's
    producer.id.expiration.ms). Default 86400000 (1 d); bounds 1000 .. 31536000000; unit ms.
    """
    kafka_request_bytes_max: int
    """largest Kafka request frame (Kafka's socket.request.max.bytes). Default 104857600 (100 MiB); bounds 1024 ..
    1073741824; unit bytes.
    """
    kafka_requests_in_flight_max: int
    """requests of one Kafka connection read ahead of their responses; further reads wait. Default 100; bounds 1 ..
    10000.
    """
    kafka_fetch_wait_ms_max: int
    """bound on a Fetch's max_wait_ms (a client asking longer waits this long). Default 30000 (30 s); bounds 0 ..
    600000; unit ms.
    """
    kafka_group_min_session_timeout_ms: int
    """shortest session timeout a Kafka group member may ask (Kafka's group.min.session.timeout.ms). Default 6000 (6
    s); bounds 100 .. 3600000; unit ms.
    """
    kafka_group_max_session_timeout_ms: int
    """longest session timeout a Kafka group member may ask (Kafka's group.max.session.timeout.ms). Default 1800000
    (30 min); bounds 1000 .. 86400000; unit ms.
    """
    kafka_group_initial_rebalance_delay_ms: int
    """how long the first rebalance of an empty Kafka group waits for more members (Kafka's
    group.initial.rebalance.delay.ms). Default 3000 (3 s); bounds 0 .. 300000; unit ms.
    """
    kafka_group_members_max: int
    """most members one Kafka group may have (Kafka's group.max.size). Default 1000; bounds 1 .. 100000."""
    kafka_groups_max: int
    """most Kafka groups one broker coordinates at once; further JoinGroups are refused. Default 100000; bounds 1 ..
    10000000.
    """

    # --- cluster ---
    cluster_name: str
    """the cluster's name (admin /clusters, broker lists). Default "standalone"."""
    broker_default_namespace_bundles: int
    """bundles a namespace gets when nothing else was asked at its creation. Default 4; bounds 1 .. 128."""
    broker_load_report_interval_ms: int
    """how often a broker rewrites its load report under /loadbalance/brokers. Default 5000 (5 s); bounds 100 ..
    3600000; unit ms.
    """
    broker_lookup_owner_wait_ms: int
    """a lookup of a bundle whose owner is unloading it or unreachable waits this long for its key to go. Default
    15000 (15 s); bounds 0 .. 600000; unit ms.
    """
    broker_bundle_split_topics_max: int
    """a bundle with more topics than this is split (range_equally_divide). Default 1000; bounds 1 .. 10000000."""
    broker_bundle_split_msg_rate_max: float
    """a bundle with more msg/s (in + out) than this is split. Default 30000.0; bounds 1.0 .. 1000000000.0; unit
    msg/s.
    """
    broker_bundle_auto_split: bool
    """split busy bundles automatically. Default true."""
    broker_load_shedding_interval_ms: int
    """how often the leader looks for an overloaded broker to take a bundle off. Default 60000 (1 min); bounds 100 ..
    86400000; unit ms.
    """
    broker_load_shedding_ratio_max: float
    """a broker whose load score is this many times the cluster average gives up a bundle. Default 1.25; bounds 1.0
    .. 100.0; unit ratio.
    """

    # --- retention and TTL ---
    retention_time_minutes: int
    """keep acked data this long (0: no, -1: forever). Default 0; bounds -1 .. 10000000; unit minutes."""
    retention_size_mb: int
    """keep acked data up to this size (0: no, -1: unbounded). Default 0; bounds -1 .. 10000000; unit MB."""
    ttl_seconds: int
    """messages older than this are acked by TTL (0: off). Default 0; bounds 0 .. 10000000; unit seconds."""

    # --- backlog quotas ---
    backlog_quota_check_enabled: bool
    """enforce backlog quotas: the periodic check and the refusal of producers (false: shown only). Default true."""
    backlog_quota_check_interval_ms: int
    """how often each loaded topic's backlog is checked against its quotas. Default 60000 (1 min); bounds 10 ..
    86400000; unit ms.
    """
    backlog_quota_default_limit_bytes: int
    """broker default destination_storage quota: backlog bytes allowed per topic (-1 none). Default -1; bounds -1 ..
    4611686018427387904; unit bytes.
    """
    backlog_quota_default_limit_seconds: int
    """broker default message_age quota: age of the oldest unacked message allowed (-1 none). Default -1; bounds -1
    .. 4611686018427387904; unit seconds.
    """
    backlog_quota_default_policy: str
    """broker default quota policy: producer_request_hold, producer_exception or consumer_backlog_eviction. Default
    "producer_request_hold".
    """

    # --- cold tier ---
    offload_driver: str
    """cold tier: "s3" (any S3 API: AWS, MinIO, SeaweedFS) or "" for none (offload refused). Default ""."""
    offload_s3_endpoint: str
    """S3 endpoint URL; empty: AWS's own for the region. Default ""."""
    offload_s3_region: str
    """S3 region (SigV4 signs with it). Default "us-east-1"."""
    offload_s3_bucket: str
    """bucket offloaded ledgers go to. Default "strata-offload"."""
    offload_s3_prefix: str
    """key prefix: objects are {prefix}/{tenant}/{namespace}/{topic}/ledger-{id}.parquet. Default "strata"."""
    offload_s3_connect_timeout_ms: int
    """bound on connecting to S3. Default 5000 (5 s); bounds 100 .. 600000; unit ms."""
    offload_s3_read_timeout_ms: int
    """bound on one S3 response. Default 30000 (30 s); bounds 100 .. 3600000; unit ms."""
    offload_s3_part_bytes: int
    """multipart upload part size (S3's minimum is 5 MiB). Default 8388608 (8 MiB); bounds 5242880 .. 1073741824;
    unit bytes.
    """
    offload_s3_parts_in_flight_max: int
    """parts of one object uploading at once. Default 4; bounds 1 .. 64."""
    offload_s3_throttle_attempts_max: int
    """attempts of one S3 call while S3 answers 503 SlowDown / 429 (backoff with full jitter between). Default 10;
    bounds 1 .. 100.
    """
    offload_s3_throttle_backoff_max_ms: int
    """cap of one wait of a throttled S3 call (waits double from 50 ms up to it, each jittered). Default 5000 (5 s);
    bounds 1 .. 600000; unit ms.
    """
    offload_s3_throttle_deadline_ms: int
    """no retry of a throttled S3 call starts after this long. Default 60000 (1 min); bounds 10 .. 3600000; unit ms."""
    offload_s3_read_range_bytes: int
    """a cold read fetches a row group in ranged GETs of at most this many bytes, in parallel. Default 1048576 (1
    MiB); bounds 65536 .. 536870912; unit bytes.
    """
    offload_s3_reads_in_flight_max: int
    """ranged GETs of cold reads running at once, read-ahead included (per broker). Default 8; bounds 1 .. 64."""
    offload_read_ahead_bytes_max: int
    """bytes of row groups fetched ahead of sequential readers of offloaded ledgers, per broker. Default 16777216 (16
    MiB); bounds 0 .. 4294967296; unit bytes.
    """
    offload_row_group_bytes: int
    """target payload bytes per Parquet row group (the unit of a ranged read). Default 4194304 (4 MiB); bounds 65536
    .. 536870912; unit bytes.
    """
    offload_threshold_bytes: int
    """broker default of offloadThreshold: offload once the topic's ledgers exceed it (-1 off, 0 ASAP). Default -1;
    bounds -1 .. 4611686018427387904; unit bytes.
    """
    offload_threshold_seconds: int
    """broker default of offloadThresholdInSeconds: offload ledgers older than this (-1 off). Default -1; bounds -1
    .. 4611686018427387904; unit seconds.
    """
    offload_deletion_lag_ms: int
    """broker default of offloadDeletionLagMs: delete the bookie copy this long after an offload (-1 never). Default
    14400000 (4 h); bounds -1 .. 4611686018427387904; unit ms.
    """
    offload_read_priority: str
    """read an offloaded ledger still on the bookies from S3 first, or "bookkeeper-first". Default
    "tiered-storage-first".
    """
    offload_read_ahead_row_groups_max: int
    """row groups fetched ahead of a sequential reader of an offloaded ledger. Default 4; bounds 0 .. 1000."""
    offload_read_cache_bytes_max: int
    """bytes of fetched row groups kept for readers of offloaded ledgers, per broker. Default 67108864 (64 MiB);
    bounds 0 .. 68719476736; unit bytes.
    """
    offload_open_objects_max: int
    """offloaded objects whose footer (row-group map) a broker keeps open. Default 64; bounds 1 .. 1000000."""
    offload_retry_backoff_max_ms: int
    """failed offloads and cold reads are retried with backoff doubling up to this. Default 60000 (1 min); bounds 10
    .. 3600000; unit ms.
    """
    offload_attempts_max: int
    """attempts of one ledger's upload before status ERROR. Default 5; bounds 1 .. 1000."""

    # --- topic compaction ---
    compaction_threshold_bytes: int
    """broker default of compactionThreshold: compact once the __compaction backlog exceeds it (0 off). Default 0;
    bounds 0 .. 4611686018427387904; unit bytes.
    """
    compaction_keys_max: int
    """distinct keys one compaction keeps in memory; more: the compaction fails (ERROR). Default 5000000; bounds 1 ..
    1000000000.
    """
    compaction_entries_in_flight_max: int
    """entries of the compacted ledger written at once (adds not yet confirmed). Default 256; bounds 1 .. 100000."""

    # --- cold tier: Iceberg tables ---
    offload_iceberg_enabled: bool
    """register offloaded ledgers as data files of their topic's Iceberg table (offload.iceberg). Default true."""
    offload_iceberg_catalog_uri: str
    """database of the Iceberg SqlCatalog (sqlite:///... or postgresql://...); empty: the metadata store's. Default
    "".
    """
    offload_iceberg_timeout_ms: int
    """bound on registering or removing one offloaded ledger's file in its Iceberg table. Default 30000 (30 s);
    bounds 1000 .. 600000; unit ms.
    """

    # --- web console ---
    console_enabled: bool
    """serve the web console at /console/ on the admin ports, and its /admin/v2/console/* routes. Default true."""
    console_assets_dir: str
    """directory of the built console (index.html, assets/); '' : console/dist of the source tree. Default ""."""
    console_audit_entries_max: int
    """audit records (admin changes, message views, refusals) a broker keeps in memory for the console. Default
    10000; bounds 1 .. 10000000.
    """
    console_tails_max: int
    """live tails (GET .../tail) one broker serves at once; one more is answered 503. Default 32; bounds 1 .. 10000."""
    console_tail_queue_messages_max: int
    """messages a live tail holds for a browser that reads slower than they arrive; past it the tail skips ahead to
    the newest and says how many it dropped. Default 1000; bounds 1 .. 1000000.
    """
    console_scan_entries_max: int
    """most entries one message browse (GET .../messages) may read: the upper bound of its maxScanEntries. Default
    100000; bounds 1 .. 10000000.
    """

    # --- security: TLS ---
    broker_tls_port: int
    """Pulsar protocol over TLS, pulsar+ssl:// (Pulsar's brokerServicePortTls, usually 6651; -1: not served; 0: any
    free port). Default -1; bounds -1 .. 65535.
    """
    broker_admin_tls_port: int
    """admin HTTPS and /metrics (Pulsar's webServicePortTls, usually 8443; -1: not served; 0: any free port). Default
    -1; bounds -1 .. 65535.
    """
    tls_cert_file: str
    """PEM certificate (chain) the broker's TLS ports present (tlsCertificateFilePath). Default ""."""
    tls_key_file: str
    """PEM private key of tls_cert_file (tlsKeyFilePath). Default ""."""
    tls_trust_certs_file: str
    """PEM CA certificates client certificates are checked against, and that this node trusts when it connects out
    over TLS (tlsTrustCertsFilePath). Default "".
    """
    tls_require_trusted_client_cert_on_connect: bool
    """a TLS client must present a certificate signed by tls_trust_certs_file (tlsRequireTrustedClientCertOnConnect).
    Default false.
    """
    tls_handshake_timeout_ms: int
    """a TLS handshake not done in this time is dropped (a slow or garbage handshake holds nothing else). Default
    10000 (10 s); bounds 100 .. 600000; unit ms.
    """
    tls_min_version: str
    """oldest TLS version served: TLSv1.2 or TLSv1.3. Default "TLSv1.2"."""

    # --- security: authentication ---
    authentication_enabled: bool
    """clients must authenticate (authenticationEnabled); off: every client has anonymous_user_role. Default false."""
    authentication_providers: str
    """comma list of token, tls, basic (or Pulsar's AuthenticationProvider* class names). Default ""."""
    token_secret_key: str
    """HS256 key of the token provider: file:///path, data:;base64,<key>, env:VAR (tokenSecretKey). Default ""."""
    token_public_key: str
    """RS256/ES256 public key (PEM or DER) of the token provider, same forms (tokenPublicKey). Default ""."""
    token_public_alg: str
    """algorithm of token_public_key: RS256..RS512, ES256..ES512, PS256... Default "RS256"."""
    token_auth_claim: str
    """the claim holding the role (tokenAuthClaim). Default "sub"."""
    token_audience_claim: str
    """the claim holding the audience (tokenAudienceClaim). Default "aud"."""
    token_audience: str
    """the audience a token must name ('': not checked) (tokenAudience). Default ""."""
    token_allowed_clock_skew_seconds: int
    """leeway on exp/nbf (tokenAllowedClockSkewSeconds). Default 0; bounds 0 .. 86400; unit seconds."""
    basic_auth_conf: str
    """htpasswd file of the basic provider (bcrypt or apr1): a path, file:///path or data:;base64,...
    (basicAuthConf). Default "".
    """
    authentication_refresh_check_interval_ms: int
    """how often connections are checked for expired credentials, which are refreshed through AUTH_CHALLENGE
    (authenticationRefreshCheckSeconds). Default 60000 (1 min); bounds 10 .. 86400000; unit ms.
    """
    authentication_connect_timeout_ms: int
    """a connection that has not completed CONNECT (and authentication) in this time is closed; so is one that has
    not answered an AUTH_CHALLENGE. Default 10000 (10 s); bounds 100 .. 600000; unit ms.
    """
    broker_client_auth_token: str
    """token this broker presents to other brokers' admin APIs (brokerClientAuthenticationParameters): file:///path,
    data:;base64,..., env:VAR or the token. Default "".
    """

    # --- security: authorization ---
    authorization_enabled: bool
    """check every producer, consumer, lookup and admin call against roles and permissions (authorizationEnabled).
    Default false.
    """
    super_user_roles: str
    """comma list of roles allowed everything (superUserRoles). Default ""."""
    anonymous_user_role: str
    """role of a client that presents no credentials, or names a method no provider has ('': such clients are
    refused) (anonymousUserRole). Default "".
    """
    authorization_allow_wildcards_matching: bool
    """a granted role 'a.*' or '*.b' matches by prefix or suffix (authorizationAllowWildcardsMatching). Default
    false.
    """
    authorization_recheck_interval_ms: int
    """producers and consumers are checked against the current permissions this often; a revoked one is closed.
    Default 5000 (5 s); bounds 10 .. 3600000; unit ms.
    """
    metrics_require_auth: bool
    """with authentication on, /metrics needs credentials: a superuser sees every series, other roles only their
    tenants' (Pulsar's authenticateMetricsEndpoint). Default true.
    """

    # --- security: internal links ---
    bookie_auth_secret: str
    """cluster secret brokers present to bookies, set on both: file:///path, data:;base64,..., env:VAR ('': bookies
    accept any client unless bookie_tls_client_roles is set). Default "".
    """
    bookie_tls_enabled: bool
    """bookie gRPC and data ports speak TLS with tls_cert_file/tls_key_file; clients check them against
    tls_trust_certs_file. Default false.
    """
    bookie_tls_client_roles: str
    """with bookie TLS: client certificate CNs a bookie accepts as brokers (mTLS), beside the secret. Default ""."""
    bookie_client_tls_cert_file: str
    """PEM certificate a broker presents to bookies (mTLS; its CN in bookie_tls_client_roles). Default ""."""
    bookie_client_tls_key_file: str
    """PEM private key of bookie_client_tls_cert_file. Default ""."""

    # --- strata standalone ---
    standalone_bookie_start_timeout_ms: int
    """`strata standalone` waits this long for each bookie to recover and serve. Default 60000 (1 min); bounds 1000
    .. 3600000; unit ms.
    """
    standalone_bookie_stop_timeout_ms: int
    """`strata standalone` waits this long for its bookies to stop before killing them. Default 10000 (10 s); bounds
    100 .. 600000; unit ms.
    """


if TYPE_CHECKING:   # a TypedDict of every setting costs a millisecond at import
    class SettingValues(TypedDict, total=False):
        """Settings given by name: `default_config(broker_port=0)`."""

        metadata_value_bytes_max: int
        metadata_session_lease_ms: int
        metadata_watch_poll_ms: int
        metadata_op_timeout_ms: int
        metadata_start_wait_ms: int
        metadata_changelog_keep_ms: int
        metadata_pool_connections: int
        metadata_pool_overflow_max: int
        metadata_async_threads_max: int
        metadata_async_calls_in_flight_max: int
        metadata_watches_max: int
        metadata_watch_rows_per_poll_max: int
        metadata_list_prefix_keys_max: int
        metadata_put_many_ops_max: int
        bookie_entry_bytes_max: int
        bookie_journal_group_commit_wait_ms: float
        bookie_journal_group_commit_bytes_max: int
        bookie_segment_file_bytes_max: int
        bookie_checkpoint_interval_ms: int
        bookie_gc_interval_ms: int
        bookie_gc_compact_live_ratio_max: float
        bookie_disk_free_bytes_min: int
        bookie_unsafe_skip_fsync: bool
        bookie_add_queue_entries_max: int
        bookie_read_entries_max: int
        bookie_port: int
        bookie_bind_host: str
        bookie_advertised_host: str
        bookie_registration_refresh_interval_ms: int
        bookie_read_response_bytes_max: int
        bookie_gc_compact_batch_bytes: int
        bookie_disk_check_interval_ms: int
        bookie_add_requests_queued_max: int
        bookie_reads_queued_max: int
        bookie_data_write_buffer_bytes_high: int
        bookie_journal_stop_timeout_ms: int
        bookie_stop_grace_ms: int
        bookie_metrics_port: int
        bookie_data_port: int
        ledger_add_timeout_ms: int
        ledger_read_timeout_ms: int
        ledger_adds_in_flight_max: int
        ledger_ensemble_size: int
        ledger_write_quorum: int
        ledger_ack_quorum: int
        ledger_bookie_quarantine_ms: int
        ledger_auditor_interval_ms: int
        ledger_auditor_enabled: bool
        ledger_read_runs_in_flight_max: int
        ledger_bookie_requests_in_flight_max: int
        ledger_bookie_request_payload_bytes_max: int
        ledger_bookie_write_buffer_bytes_high: int
        managed_ledger_rollover_entries: int
        managed_ledger_rollover_bytes: int
        managed_ledger_rollover_age_ms: int
        managed_ledger_rollover_min_age_ms: int
        managed_ledger_ensemble_max: int
        managed_ledger_write_quorum_max: int
        managed_ledger_ack_quorum_max: int
        managed_ledger_index_checkpoint_entries: int
        managed_ledger_index_checkpoint_bytes: int
        managed_ledger_index_checkpoint_interval_ms: int
        managed_ledger_cache_bytes_max: int
        managed_ledger_read_handles_max: int
        cursor_state_bytes_max: int
        cursor_persist_interval_ms: int
        cursor_writer_ops_per_transaction_max: int
        cursor_writer_queue_max: int
        broker_port: int
        broker_admin_port: int
        broker_advertised_host: str
        advertised_listeners: str
        internal_listener_name: str
        broker_bind_host: str
        broker_admin_bind_host: str
        broker_admin_body_bytes_max: int
        broker_topic_load_timeout_ms: int
        broker_max_message_bytes: int
        broker_frame_bytes_max: int
        broker_pending_sends_max: int
        broker_connection_requests_inflight_max: int
        broker_connection_write_buffer_bytes_high: int
        broker_connection_write_buffer_bytes_max: int
        broker_keepalive_interval_ms: int
        broker_dispatch_batch_entries_max: int
        broker_consumer_unacked_messages_max: int
        broker_partitions_max: int
        broker_subscription_unacked_messages_max: int
        broker_topic_producers_max: int
        broker_topic_consumers_max: int
        broker_subscription_consumers_max: int
        broker_topic_subscriptions_max: int
        broker_namespace_topics_max: int
        broker_publish_rate_messages_max: int
        broker_publish_rate_bytes_max: int
        broker_topic_dispatch_rate_messages_max: int
        broker_topic_dispatch_rate_bytes_max: int
        broker_subscription_dispatch_rate_messages_max: int
        broker_subscription_dispatch_rate_bytes_max: int
        broker_subscribe_rate_per_consumer_max: int
        broker_subscribe_rate_period_seconds: int
        broker_delete_inactive_topics_enabled: bool
        broker_delete_inactive_topics_frequency_seconds: int
        broker_delete_inactive_topics_mode: str
        broker_delete_inactive_topics_max_inactive_duration_seconds: int
        broker_delete_inactive_partitioned_topic_metadata_enabled: bool
        broker_subscription_expiration_time_minutes: int
        broker_allow_auto_topic_creation: bool
        broker_allow_auto_topic_creation_type: str
        broker_auto_topic_partitions: int
        broker_allow_auto_subscription_creation: bool
        broker_delayed_delivery_enabled: bool
        broker_delayed_delivery_max_delay_ms: int
        broker_subscription_pattern_length_max: int
        broker_topic_list_watchers_per_connection_max: int
        broker_delayed_delivery_tick_ms: int
        broker_delayed_delivery_entries_max: int
        broker_delayed_delivery_scan_entries_per_pass: int
        broker_dispatch_replay_entries_max: int
        broker_dispatch_replay_cache_bytes_max: int
        broker_dedup_snapshot_interval_entries: int
        broker_dedup_snapshot_interval_ms: int
        broker_dedup_producers_max: int
        broker_stats_sample_interval_ms: int
        broker_non_persistent_idle_ms: int
        broker_retention_check_interval_ms: int
        broker_stats_rate_window_ms: int
        broker_metrics_topic_level: bool
        broker_exclusive_producer_waiters_max: int
        kafka_port: int
        kafka_tls_port: int
        kafka_bind_host: str
        kafka_advertised_listeners: str
        kafka_default_namespace: str
        kafka_auto_create_topics: bool
        kafka_default_partitions: int
        kafka_default_retention_ms: int
        kafka_producer_snapshot_interval_entries: int
        kafka_producer_snapshot_interval_ms: int
        kafka_producer_id_expiry_ms: int
        kafka_request_bytes_max: int
        kafka_requests_in_flight_max: int
        kafka_fetch_wait_ms_max: int
        kafka_group_min_session_timeout_ms: int
        kafka_group_max_session_timeout_ms: int
        kafka_group_initial_rebalance_delay_ms: int
        kafka_group_members_max: int
        kafka_groups_max: int
        cluster_name: str
        broker_default_namespace_bundles: int
        broker_load_report_interval_ms: int
        broker_lookup_owner_wait_ms: int
        broker_bundle_split_topics_max: int
        broker_bundle_split_msg_rate_max: float
        broker_bundle_auto_split: bool
        broker_load_shedding_interval_ms: int
        broker_load_shedding_ratio_max: float
        retention_time_minutes: int
        retention_size_mb: int
        ttl_seconds: int
        backlog_quota_check_enabled: bool
        backlog_quota_check_interval_ms: int
        backlog_quota_default_limit_bytes: int
        backlog_quota_default_limit_seconds: int
        backlog_quota_default_policy: str
        offload_driver: str
        offload_s3_endpoint: str
        offload_s3_region: str
        offload_s3_bucket: str
        offload_s3_prefix: str
        offload_s3_connect_timeout_ms: int
        offload_s3_read_timeout_ms: int
        offload_s3_part_bytes: int
        offload_s3_parts_in_flight_max: int
        offload_s3_throttle_attempts_max: int
        offload_s3_throttle_backoff_max_ms: int
        offload_s3_throttle_deadline_ms: int
        offload_s3_read_range_bytes: int
        offload_s3_reads_in_flight_max: int
        offload_read_ahead_bytes_max: int
        offload_row_group_bytes: int
        offload_threshold_bytes: int
        offload_threshold_seconds: int
        offload_deletion_lag_ms: int
        offload_read_priority: str
        offload_read_ahead_row_groups_max: int
        offload_read_cache_bytes_max: int
        offload_open_objects_max: int
        offload_retry_backoff_max_ms: int
        offload_attempts_max: int
        compaction_threshold_bytes: int
        compaction_keys_max: int
        compaction_entries_in_flight_max: int
        offload_iceberg_enabled: bool
        offload_iceberg_catalog_uri: str
        offload_iceberg_timeout_ms: int
        console_enabled: bool
        console_assets_dir: str
        console_audit_entries_max: int
        console_tails_max: int
        console_tail_queue_messages_max: int
        console_scan_entries_max: int
        broker_tls_port: int
        broker_admin_tls_port: int
        tls_cert_file: str
        tls_key_file: str
        tls_trust_certs_file: str
        tls_require_trusted_client_cert_on_connect: bool
        tls_handshake_timeout_ms: int
        tls_min_version: str
        authentication_enabled: bool
        authentication_providers: str
        token_secret_key: str
        token_public_key: str
        token_public_alg: str
        token_auth_claim: str
        token_audience_claim: str
        token_audience: str
        token_allowed_clock_skew_seconds: int
        basic_auth_conf: str
        authentication_refresh_check_interval_ms: int
        authentication_connect_timeout_ms: int
        broker_client_auth_token: str
        authorization_enabled: bool
        super_user_roles: str
        anonymous_user_role: str
        authorization_allow_wildcards_matching: bool
        authorization_recheck_interval_ms: int
        metrics_require_auth: bool
        bookie_auth_secret: str
        bookie_tls_enabled: bool
        bookie_tls_client_roles: str
        bookie_client_tls_cert_file: str
        bookie_client_tls_key_file: str
        standalone_bookie_start_timeout_ms: int
        standalone_bookie_stop_timeout_ms: int
