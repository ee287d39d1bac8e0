"""What a topic keeps and for how long.

- `task`: TTL and retention, applied to every loaded topic periodically;
- `backlog_quota`: backlog quotas: values, effective policy, measurement, enforcement;
- `offload`: offload policies and the automatic offload of closed ledgers.

May import `broker.topics`, `broker.compaction` and below.
"""
