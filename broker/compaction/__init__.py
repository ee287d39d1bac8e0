"""Topic compaction: the latest value per key, kept as the topic's own compacted ledger.

- `format`: the compacted ledger's entries and the keys/tombstones of a stored entry;
- `record`: the persisted record naming the compacted ledger and its horizon;
- `compactor`: one run (two phases: latest position per key, then write the survivors);
- `view`: reading the compacted ledger by original position;
- `topic_compaction`: a topic's view, runs and status (`topic.compaction`);
- `reading`: the read_compacted path of dispatchers (view first, then the tail);
- `threshold`: the compactionThreshold policy, checked by the retention pass.

Dependencies run one way: this package uses `ledger`, `cursor`, `entries`; the broker modules
call it through small hooks (topic, subscribe, dispatchers, retention, stats).
"""
