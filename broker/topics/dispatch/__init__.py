"""Dispatchers: which consumer of a subscription gets which entry, one per subscription type.

- `base`: reading ahead from the cursor, redelivery, retries of failed reads;
- `single_active`: Exclusive and Failover; `shared`: Shared; `key_shared`: Key_Shared;
- `key_selector`: Key_Shared's hash ranges (a leaf: imports nothing from `broker`);
- `delayed`, `delayed_overflow`: delayed delivery's index (leaves too);
- `compacted`: the read_compacted path (the compacted view first, then the tail).

May import `broker.topics` modules other than `topic`, and the packages below `topics`.
"""
