"""The reader role (during the run) and the final read-back (after it).

`reader`: one Reader per partition (or plain topic) from MessageId.earliest, a thread each,
recording every message as `read` until `<out>/stop-consumers` or SIGTERM. When read_next fails
with anything but a timeout, the reader is closed (bounded) and opened again just after the last
message it recorded, so a reader's reads stay in order without repeats (a repeat the client
itself delivers is recorded as it came: that is a finding).

`final`: once every other process has exited, each partition is read from the earliest message
until `has_message_available()` is false, one partition after the other, all within
`--timeout-s`. A failure closes the reader and goes on after the last message read, until the
bound. Each message is a `read` with reader "final"; each partition ends with one `final`
record: count (messages read), complete (true only when the read reached the end the broker
reported), error (the last error, or null when complete).

What must hold: the final read-back never records a message twice (it resumes strictly after
the last one recorded) and every partition gets its `final` record, complete or not, before the
process exits.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pulsar

from chaos.history import HistoryWriter
from chaos.workload.plan import ReaderPlan, WorkloadPlan
from chaos.workload.runtime import (
    CLOSE_TIMEOUT_S,
    RECEIVE_TIMEOUT_MS,
    RETRY_PAUSE_S,
    STOP_CONSUMERS,
    STOP_POLL_S,
    Stop,
    bounded,
    error_text,
    exit_process,
    format_msg_id,
    make_client,
)

RECEIVER_QUEUE_SIZE = 500
FINAL_READ_TIMEOUT_MS = 5_000     # one read_next of the final read-back (a message is known to be there)
FINAL_READER = "final"
JOIN_S = CLOSE_TIMEOUT_S + 5.0


def _record_read(writer: HistoryWriter, reader: str, msg: Any) -> None:
    writer.write("read", topic=msg.topic_name(), reader=reader, value=msg.data().decode(errors="replace"),
                 key=msg.partition_key() or None, msg_id=format_msg_id(msg.message_id()))


def _open_reader(client: pulsar.Client, topic: str, start: Any, name: str) -> Any:
    return client.create_reader(topic, start, reader_name=name, receiver_queue_size=RECEIVER_QUEUE_SIZE)


def _read_loop(plan: ReaderPlan, client: pulsar.Client, writer: HistoryWriter, stop: Stop) -> None:
    start: Any = pulsar.MessageId.earliest
    reader: Any = None
    while not stop.requested():
        if reader is None:
            try:
                reader = _open_reader(client, plan.topic, start, plan.name)
            except Exception as exc:
                writer.write("open-failed", kind="reader", topic=plan.topic, name=plan.name, error=error_text(exc))
                stop.wait(RETRY_PAUSE_S)
                continue
        try:
            msg = reader.read_next(timeout_millis=RECEIVE_TIMEOUT_MS)
        except pulsar.Timeout:
            continue
        except Exception as exc:
            writer.write("reader", topic=plan.topic, reader=plan.name, event="crashed", error=error_text(exc))
            bounded(reader.close)
            reader = None
            continue
        _record_read(writer, plan.name, msg)
        start = msg.message_id()
    if reader is not None:
        bounded(reader.close)


def reader_main(plan: WorkloadPlan, proc: str, service_url: str, out_dir: str) -> None:
    stop = Stop(out_dir, STOP_CONSUMERS).install()
    writer = HistoryWriter(out_dir, proc)
    client = make_client(service_url)
    threads = [threading.Thread(target=_read_loop, args=(r, client, writer, stop), name=r.name, daemon=True)
               for r in plan.readers if r.proc == proc]
    for thread in threads:
        thread.start()
    while not stop.wait(STOP_POLL_S):
        pass
    deadline = time.monotonic() + JOIN_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    bounded(client.close)
    writer.close()
    exit_process(0)


def _read_back(client: pulsar.Client, writer: HistoryWriter, topic: str, deadline: float, stop: Stop) -> None:
    """Read `topic` from the earliest to its end, resuming after errors, until `deadline`."""
    start: Any = pulsar.MessageId.earliest
    count, error, complete = 0, None, False
    while not complete and time.monotonic() < deadline and not stop.terminated:
        reader = None
        try:
            reader = _open_reader(client, topic, start, FINAL_READER)
            while reader.has_message_available():
                if time.monotonic() >= deadline:
                    raise TimeoutError("final read-back: out of time")
                msg = reader.read_next(timeout_millis=FINAL_READ_TIMEOUT_MS)
                _record_read(writer, FINAL_READER, msg)
                count += 1
                start = msg.message_id()
            complete = True
        except Exception as exc:
            error = error_text(exc)
            time.sleep(RETRY_PAUSE_S)
        finally:
            if reader is not None:
                bounded(reader.close)
    if not complete and error is None:
        error = "final read-back: out of time" if not stop.terminated else "terminated"
    writer.write("final", topic=topic, count=count, complete=complete, error=None if complete else error)


def final_main(plan: WorkloadPlan, proc: str, service_url: str, out_dir: str, timeout_s: float) -> None:
    stop = Stop(out_dir, None).install()      # no stop file: only a signal stops the read-back
    writer = HistoryWriter(out_dir, proc)
    client = make_client(service_url)
    deadline = time.monotonic() + timeout_s
    for topic in (p for t in plan.topics for p in t.partition_topics()):
        _read_back(client, writer, topic, deadline, stop)
    bounded(client.close)
    writer.close()
    exit_process(0)
