"""explain-storage: why a topic's storage is the size it is, and what would free it.

- `model`: the value types of an explanation;
- `analysis`: the walk over ledgers and cursors that finds each culprit;
- `advice`: the words and the actions offered.

May import `broker.retention`, `broker.topics` and below.
"""
