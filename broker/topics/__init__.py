"""Persistent topics: the data path of the core.

- `topic`: one topic over its managed ledger: producers, subscriptions, termination, close;
- `producer`, `chunk_check`, `dedup`, `access_modes`: the append side;
- `subscription`, `consumer`, `entry_facts`: the read side; `dispatch/` decides who gets what;
- `rates`: traffic meters and the sampler of topics with recent traffic;
- `loaded`: the view of the loaded topics that broker-wide machinery is typed against.

Protocol-neutral: nothing here knows a wire protocol's command objects. A producer or consumer
talks to its client through a link (`ProducerLink`, `ConsumerLink`) that a front end implements.
May import `broker.compaction`, `broker.schemas`, `broker.security`, `broker.records`,
`broker.context`, and below `broker/`.
"""
