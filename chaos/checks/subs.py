"""Checks of the subscriptions: unseen, per-key order, and redelivery after a persisted ack.

- unseen (violation): an acknowledged send a subscription never delivered (the union over its
  consumers) by the end of the history. Every subscription of a topic is expected to see every
  message of it (the workload creates its subscriptions before the first send, and the run
  drains before it checks); a partitioned topic's subscription spans all its partitions.
- per-key order (violation), Key_Shared and Failover only: for each subscription and key, the
  first deliveries of that key's messages (a delivery with redelivery > 0, or of a value the
  subscription delivered before, is excluded) come in their log order, i.e. increasing rank in
  the partition's final read-back. A value not in the read-back has no rank and is skipped.
- redelivered after a persisted ack (violation): a delivery on a subscription, at time t, of a
  value the subscription acked (individually, or by a cumulative ack of a message at or after
  it in the same partition's log) more than the persist window before t, unless Pulsar allows
  it (a redelivery inside the window is allowed: the broker may not have the ack yet, and an
  Exclusive or Failover subscription rewinds to redeliver everything unacked after a nack):
  * the value was nacked on that subscription (nack asks for a redelivery);
  * it was sent in a batch and a sibling of its entry was nacked or not yet acked (the entry is
    acked whole; the ack judged is the last sibling's);
  * the ack came from a consumer with an ack timeout (`ack_timeout_ms` on its "open" record)
    later than that timeout after it got the value (the timeout may have fired first);
  * a consumer of that subscription closed or crashed within the persist window after the ack
    (pulsar-client groups acks for ~100 ms: a crash drops the ones not yet sent);
  * a fault that can lose an unpersisted ack (any role but `ACK_SAFE_ROLES`: a broker, the
    metadata store, the network) was active within the persist window around the ack.
  The persist window: a durable cursor persists at most once per `cursor_persist_interval_ms`
  (cursor/cursor_persistence.py: acks mark it dirty, one coalesced write per interval, through
  cursor/cursor_writer.py's group commit), so an ack is in the metadata store within that
  interval plus a commit; `PERSIST_SLACK_S` covers the client's ack grouping and the commit.
  Pulsar acks are fire-and-forget: an ack sent while the connection is down, or to a broker
  that dies before persisting it, is gone, which is why the window reaches back before the ack.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from chaos.checks.findings import EXAMPLES_MAX, Category
from chaos.checks.model import History, Record, SubKey, base_of, part_of
from common.config import SETTINGS_BY_NAME

ORDERED_SUBTYPES = frozenset({"Key_Shared", "Failover"})
ACK_SAFE_ROLES = frozenset({"bookie", "s3"})   # their faults cannot lose an ack: cursors live elsewhere
PERSIST_INTERVAL_S = SETTINGS_BY_NAME["cursor_persist_interval_ms"].default / 1000
PERSIST_SLACK_S = 1.0
PERSIST_WINDOW_S = PERSIST_INTERVAL_S + PERSIST_SLACK_S


def sub_categories(examples_max: int = EXAMPLES_MAX) -> dict[str, Category]:
    specs = [
        ("unseen", True, "acknowledged sends a subscription never delivered"),
        ("key_order", True, "first deliveries of a key out of log order (Key_Shared, Failover)"),
        ("redelivered_after_ack", True, "deliveries after the subscription's ack was persisted"),
    ]
    return {name: Category(name, violation, doc, examples_max=examples_max) for name, violation, doc in specs}


def check_subs(history: History, cats: dict[str, Category], persist_window_s: float = PERSIST_WINDOW_S) -> None:
    """Fill the subscription categories (`sub_categories`) from the history."""
    by_sub: dict[SubKey, list[Record]] = defaultdict(list)
    for record in history.deliveries:
        by_sub[(base_of(record["topic"]), record["sub"])].append(record)
    for sub, subtype in sorted(history.subscriptions().items()):
        deliveries = by_sub.get(sub, [])
        _check_unseen(history, sub, deliveries, cats["unseen"])
        if subtype in ORDERED_SUBTYPES:
            _check_key_order(history, sub, deliveries, cats["key_order"])
        _RedeliveryCheck(history, sub, persist_window_s).run(deliveries, cats["redelivered_after_ack"])


def _check_unseen(history: History, sub: SubKey, deliveries: list[Record], cat: Category) -> None:
    delivered = {record["value"] for record in deliveries}
    for send in history.sends:
        if send.outcome == "ok" and send.base == sub[0] and send.value not in delivered:
            cat.add({"topic": sub[0], "sub": sub[1], "value": send.value, "msg_id": send.msg_id})


def _check_key_order(history: History, sub: SubKey, deliveries: list[Record], cat: Category) -> None:
    seen: set[str] = set()
    last: dict[tuple[str, str], tuple[int, Record]] = {}    # (key, partition) -> (rank, delivery)
    for record in deliveries:
        value = record["value"]
        first = value not in seen and not record.get("redelivery")
        seen.add(value)
        key = record.get("key")
        placed = history.rank_of(value)
        if not first or key is None or placed is None:
            continue
        part, rank = placed
        before = last.get((key, part))
        if before is not None and rank < before[0]:
            cat.add({"topic": sub[0], "sub": sub[1], "key": key,
                     "earlier": _delivery_example(before[1]), "later": _delivery_example(record)})
        if before is None or rank > before[0]:
            last[(key, part)] = (rank, record)


def _delivery_example(record: Record) -> dict[str, object]:
    return {"value": record.get("value"), "msg_id": record.get("msg_id"), "consumer": record.get("consumer"),
            "t": record.get("t")}


@dataclass
class _RedeliveryCheck:
    """One subscription's acks and deliveries in time order; see the module docstring."""

    history: History
    sub: SubKey
    window_s: float
    acked: dict[str, Record] = field(default_factory=dict)                # value -> its unexcused ack
    cumulative: dict[str, list[tuple[int, Record]]] = field(default_factory=dict)  # part -> acks raising the rank
    got_at: dict[tuple[str, str], float] = field(default_factory=dict)    # (consumer, value) -> delivered
    nacked: set[str] = field(default_factory=set)
    closes: list[float] = field(default_factory=list)
    ack_timeout_s: dict[str, float] = field(default_factory=dict)         # consumer -> its ack timeout

    def run(self, deliveries: list[Record], cat: Category) -> None:
        self._load()
        acks = [r for r in self.history.acks if self._mine(r)]
        events = sorted([(float(r["t"]), 0, i, r) for i, r in enumerate(deliveries)]
                        + [(float(r["t"]), 1, i, r) for i, r in enumerate(acks)], key=lambda e: e[:3])
        for _, kind, _, record in events:
            if kind == 1:
                self._on_ack(record)
            else:
                self._on_delivery(record, cat)

    def _mine(self, record: Record) -> bool:
        return (base_of(record["topic"]), record["sub"]) == self.sub

    def _load(self) -> None:
        self.nacked = {r["value"] for r in self.history.nacks if self._mine(r)}
        for record in self.history.consumer_events:
            if not self._mine(record):
                continue
            if record.get("event") in ("closed", "crashed"):
                self.closes.append(float(record["t"]))
            elif record.get("event") == "open" and record.get("ack_timeout_ms"):
                self.ack_timeout_s[record["consumer"]] = float(record["ack_timeout_ms"]) / 1000

    def _on_ack(self, ack: Record) -> None:
        if self._excused(ack):
            return
        if ack.get("mode") == "cumulative":
            part = part_of(ack["topic"], ack.get("msg_id"))
            rank = self.history.rank_of_id(part, str(ack.get("msg_id")))
            raised = self.cumulative.setdefault(part, [])
            if rank is not None and (not raised or rank > raised[-1][0]):
                raised.append((rank, ack))
        else:
            self.acked.setdefault(ack["value"], ack)

    def _excused(self, ack: Record) -> bool:
        t = float(ack["t"])
        timeout_s = self.ack_timeout_s.get(ack["consumer"])
        got = self.got_at.get((ack["consumer"], ack.get("value", "")))
        if timeout_s is not None and got is not None and t - got >= timeout_s - self.window_s:
            return True
        if any(t <= closed <= t + self.window_s for closed in self.closes):
            return True
        return any(f.role not in ACK_SAFE_ROLES and f.start <= t + self.window_s
                   and f.end(self.history.t_end) >= t - self.window_s for f in self.history.faults)

    def _first_covering(self, value: str) -> Record | None:
        """The earliest cumulative ack that covered `value`'s place in its partition, if any."""
        placed = self.history.rank_of(value)
        raised = self.cumulative.get(placed[0]) if placed is not None else None
        if placed is None or not raised:
            return None
        i = bisect.bisect_left([rank for rank, _ in raised], placed[1])
        return raised[i][1] if i < len(raised) else None

    def _entry_acked(self, record: Record, ack: Record) -> Record | None:
        """A message of a batch is stored with its siblings as one entry, and Pulsar (batch-index
        acks off, its default) acks the entry only once every message in it is acked: until then
        a nack or a redelivery of a sibling brings the whole batch back. The ack that matters is
        the last sibling's; None while a sibling is unacked or was nacked."""
        ledger, entry, _, batch = (str(record.get("msg_id", "")).split(":") + ["", "", "", ""])[:4]
        if batch in ("", "-1"):
            return ack
        latest = ack
        for sibling in self.history.entry_values(f"{ledger}:{entry}"):
            if sibling in self.nacked:
                return None
            sibling_ack = self.acked.get(sibling) or self._first_covering(sibling)
            if sibling_ack is None:
                return None
            if float(sibling_ack["t"]) > float(latest["t"]):
                latest = sibling_ack
        return latest

    def _on_delivery(self, record: Record, cat: Category) -> None:
        value = record["value"]
        self.got_at[(record.get("consumer", ""), value)] = float(record["t"])
        if value in self.nacked:
            return
        ack = self.acked.get(value)
        if ack is None:
            ack = self._first_covering(value)
        if ack is not None:
            ack = self._entry_acked(record, ack)
        # before the ack is surely persisted the broker may not know of it yet (the client groups
        # acks; a Failover or Exclusive rewind after a nack redelivers what it has not heard of)
        if ack is not None and float(record["t"]) > float(ack["t"]) + self.window_s:
            cat.add({"topic": self.sub[0], "sub": self.sub[1], "value": value, "msg_id": record.get("msg_id"),
                     "consumer": record.get("consumer"), "delivered_t": record["t"], "acked_t": ack["t"],
                     "ack_consumer": ack.get("consumer"), "ack_mode": ack.get("mode", "individual")})
