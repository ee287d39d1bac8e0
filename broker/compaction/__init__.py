"""Topic compaction: the latest value per key, kept as the topic's own compacted ledger.

- `format`: the compacted ledger's entries and the keys/tombstones of a stored entry;
- `record`: the persisted record naming the compacted ledger and its horizon;
- `compactor`: one run (two phases: latest position per key, then write the survivors);
- `view`: reading the compacted ledger by original position;
- `topic_compaction`: a topic's view, runs and status (`topic.compaction`);
- `threshold`: the compactionThreshold policy, checked by the retention pass.

Dependencies run one way: this package uses `ledger`, `cursor`, `entries` and `broker.records`;
it sees a topic only through the `CompactableTopic` protocol, and the dispatchers' read_compacted
path is `broker.topics.dispatch.compacted`.
"""
