"""A bounded LRU cache of entry bytes, shared by every managed ledger of a broker.

Tail reads (dispatchers reading what was just appended) hit it instead of the bookies. Keys are
`(owner, ledger_id, entry_id)` where owner is the managed ledger's name, so one cache serves many
topics and `invalidate_ledger()` drops a trimmed ledger's entries.

What must hold: `size_bytes <= max_bytes` after every call (an entry bigger than the whole cache
is not kept); `size_bytes` equals the sum of the cached payload lengths.
"""

from __future__ import annotations

from collections import OrderedDict

from common.invariant import invariant

Key = tuple[str, int, int]


class EntryCache:
    def __init__(self, max_bytes: int) -> None:
        invariant(max_bytes >= 0, "cache bound is not negative", max_bytes=max_bytes)
        self.max_bytes = max_bytes
        self.size_bytes = 0                                  # sum of cached payload lengths
        self._entries: OrderedDict[Key, bytes] = OrderedDict()   # least recently used first
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, owner: str, ledger_id: int, entry_id: int, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        key = (owner, ledger_id, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size_bytes -= len(old)
        self._entries[key] = data
        self.size_bytes += len(data)
        while self.size_bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= len(evicted)
        invariant(0 <= self.size_bytes <= self.max_bytes, "cache within its bound",
                  size=self.size_bytes, max=self.max_bytes)

    def get(self, owner: str, ledger_id: int, entry_id: int) -> bytes | None:
        key = (owner, ledger_id, entry_id)
        data = self._entries.get(key)
        if data is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return data

    def invalidate_ledger(self, owner: str, ledger_id: int) -> None:
        doomed = [k for k in self._entries if k[0] == owner and k[1] == ledger_id]
        for key in doomed:
            self.size_bytes -= len(self._entries.pop(key))

    def invalidate_owner(self, owner: str) -> None:
        doomed = [k for k in self._entries if k[0] == owner]
        for key in doomed:
            self.size_bytes -= len(self._entries.pop(key))
