"""Non-persistent topics: in-memory fan-out, nothing stored.

- `topic`: the topics, their subscriptions and the registry of live ones;
- `dispatch`: routing one message to the consumers of a subscription, dropping when full.

May import `broker.topics` (consumers, producers, rates) and below.
"""
