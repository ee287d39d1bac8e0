"""Checks of the topics' logs, as the final read-back found them (Jepsen's queue definitions).

- incomplete read-back (violation): a partition with no `final` record, or one saying the read
  did not reach the topic's end. Its missing sends cannot be told lost or not, so they are
  counted as `unverified` (informational) and the run is invalid through this category: an
  incomplete read-back never passes silently.
- lost (violation): an acknowledged send (outcome "ok") whose value is in no row of the final
  read-back, on a partition whose read-back is complete. Split, per producer and by seq, into
  prefix (before the producer's first value present in the log), middle (between two present
  values: the damning case) and postfix (after its last present value). A producer with no value
  present at all has every lost send counted as prefix. The anchors are every present value of
  the producer (also unknown or failed sends that were stored).
- duplicated (violation): one value (one producer's seq) stored under two distinct message ids,
  despite deduplication.
- nonmonotonic (violation): within one partition's log, a producer's seq lower than the seq it
  stored just before (read order; each value's first copy only, so a duplicate is not counted
  twice).
- wrong bytes (violation): any value read or delivered that fails `payload_ok`.
- unknown sends present (informational): outcome "unknown" and stored: the usual fate of a send
  in flight when its connection broke.
- failed sends present (informational, not a violation): with `send_timeout_millis=0` the
  client fails a send only on errors it cannot retry, and several of those (the producer closed
  or fenced, the connection dropped while the send was written, a broker error after the entry
  was persisted) come after the message may already be stored; Pulsar makes no promise that a
  failed send was not stored, so a failure is indefinite, like "unknown".
- unrecorded (informational): a valid payload in the log that no send record names: a producer
  process killed before it wrote the record of a send in flight.
"""

from __future__ import annotations

from collections import defaultdict

from chaos.checks.findings import EXAMPLES_MAX, Category
from chaos.checks.model import History, Send
from chaos.history import parse_payload, payload_ok


def log_categories(examples_max: int = EXAMPLES_MAX) -> dict[str, Category]:
    specs = [
        ("incomplete_readback", True, "partitions whose final read-back is missing or did not reach the end"),
        ("lost", True, "acknowledged sends missing from a complete final read-back"),
        ("lost_prefix", False, "of lost: before the producer's first value present"),
        ("lost_middle", False, "of lost: between two values of the producer present"),
        ("lost_postfix", False, "of lost: after the producer's last value present"),
        ("unverified", False, "acknowledged sends not found in an incomplete read-back"),
        ("duplicated", True, "values stored under two or more message ids"),
        ("nonmonotonic", True, "a producer's seq stored after a higher seq of its own in one partition"),
        ("wrong_bytes", True, "values read or delivered that fail their checksum"),
        ("unknown_present", False, "sends of unknown outcome found stored"),
        ("failed_present", False, "failed sends found stored (indefinite failures: see chaos.checks.log)"),
        ("unrecorded_present", False, "stored values no send record names"),
    ]
    return {name: Category(name, violation, doc, examples_max=examples_max) for name, violation, doc in specs}


def check_log(history: History, cats: dict[str, Category]) -> None:
    """Fill the log categories (`log_categories`) from the history."""
    complete = _check_readback(history, cats["incomplete_readback"])
    _check_lost(history, complete, cats)
    _check_duplicated(history, cats["duplicated"])
    _check_nonmonotonic(history, cats["nonmonotonic"])
    _check_wrong_bytes(history, cats["wrong_bytes"])
    _check_outcomes(history, cats)


def _check_readback(history: History, cat: Category) -> set[str]:
    """The partitions whose read-back is complete; the others reported."""
    complete: set[str] = set()
    for part in history.parts():
        final = history.final_of(part)
        if final is None:
            cat.add({"topic": part, "reason": "no final read-back"})
        elif not final.get("complete"):
            cat.add({"topic": part, "reason": "incomplete", "count": final.get("count"),
                     "error": final.get("error")})
        else:
            complete.add(part)
    return complete


def _send_example(send: Send) -> dict[str, object]:
    return {"value": send.value, "producer": send.producer, "seq": send.seq, "topic": send.part,
            "msg_id": send.msg_id, "t1": send.t1}


def _check_lost(history: History, complete: set[str], cats: dict[str, Category]) -> None:
    lost_by_producer: dict[str, list[Send]] = defaultdict(list)
    for send in history.sends:
        if send.outcome != "ok" or history.present(send.value):
            continue
        if send.part in complete:
            cats["lost"].add(_send_example(send))
            lost_by_producer[send.producer].append(send)
        else:
            cats["unverified"].add(_send_example(send))
    present_seqs: dict[str, list[int]] = defaultdict(list)
    for value in history.copies:
        parsed = parse_payload(value)
        if parsed is not None:
            present_seqs[parsed[0]].append(parsed[1])
    for producer, lost in lost_by_producer.items():
        seqs = present_seqs.get(producer)
        first, last = (min(seqs), max(seqs)) if seqs else (None, None)
        for send in sorted(lost, key=lambda s: s.seq):
            if first is None or last is None or send.seq < first:
                cats["lost_prefix"].add(_send_example(send))
            elif send.seq > last:
                cats["lost_postfix"].add(_send_example(send))
            else:
                cats["lost_middle"].add(_send_example(send))


def _check_duplicated(history: History, cat: Category) -> None:
    for value, rows in history.copies.items():
        ids = sorted({(row.part, row.msg_id) for row in rows})
        if len(ids) > 1:
            cat.add({"value": value, "copies": [{"topic": part, "msg_id": msg_id} for part, msg_id in ids]})


def _check_nonmonotonic(history: History, cat: Category) -> None:
    for part, rows in sorted(history.log.items()):
        last: dict[str, tuple[int, str, str]] = {}      # producer -> (seq, value, msg_id) stored last
        seen: set[str] = set()
        for row in rows:
            parsed = parse_payload(row.value)
            if parsed is None or row.value in seen:
                continue
            seen.add(row.value)
            producer, seq = parsed
            before = last.get(producer)
            if before is not None and seq < before[0]:
                cat.add({"topic": part, "producer": producer,
                         "earlier": {"value": before[1], "msg_id": before[2], "seq": before[0]},
                         "later": {"value": row.value, "msg_id": row.msg_id, "seq": seq}})
            last[producer] = (seq, row.value, row.msg_id)


def _check_wrong_bytes(history: History, cat: Category) -> None:
    for rows in history.log.values():
        for row in rows:
            if not payload_ok(row.value):
                cat.add({"source": "final read-back", "topic": row.part, "value": row.value, "msg_id": row.msg_id})
    for record in history.other_reads:
        if not payload_ok(str(record.get("value"))):
            cat.add({"source": f"reader {record.get('reader')}", "topic": record.get("topic"),
                     "value": record.get("value"), "msg_id": record.get("msg_id")})
    for record in history.deliveries:
        if not payload_ok(str(record.get("value"))):
            cat.add({"source": f"subscription {record.get('sub')} ({record.get('consumer')})",
                     "topic": record.get("topic"), "value": record.get("value"), "msg_id": record.get("msg_id")})


def _check_outcomes(history: History, cats: dict[str, Category]) -> None:
    for send in history.sends:
        if send.outcome == "unknown" and history.present(send.value):
            cats["unknown_present"].add(_send_example(send))
        elif send.outcome == "failed" and history.present(send.value):
            cats["failed_present"].add(_send_example(send))
    for value, rows in history.copies.items():
        if value not in history.send_by_value and payload_ok(value):
            cats["unrecorded_present"].add({"value": value, "topic": rows[0].part, "msg_id": rows[0].msg_id})
