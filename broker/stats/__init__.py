"""Read-only views of the loaded topics: Pulsar's stats JSON and the Prometheus metrics.

- `topic_stats`: topic, subscription and partitioned stats as Pulsar's admin API shapes them;
- `internal_stats`: stats-internal (ledgers, cursors);
- `metrics`, `metrics_topics`, `metrics_storage`: the /metrics families.

May import `broker.cluster`, `broker.retention`, `broker.nonpersistent`, `broker.topics` and below.
"""
