"""`strata perf schemas`: what the schema registry costs a producer, per message and per creation.

    strata perf schemas [--messages N] [--size 1024] [--rounds R] [--json]
                        [--service-url pulsar://... --admin-url http://...]

The same bytes are published twice per round through the official client, on a fresh topic each
time: once by a producer without a schema, once by one with an Avro schema (a record with one
`bytes` field; the payloads are that record, Avro-encoded beforehand, so both producers send
equally many bytes and the client does no encoding work in either). Server CPU per message =
(utime+stime of the broker and its bookies after - before) / messages; the rounds alternate the
two so load drifts hit both alike, and the medians are compared. Schema checks run when a
producer is created, never per message (SEND does not look at schemas), so the difference per
message is noise around 0; `create_ms_*` shows where the cost is: the creation of a producer
(PRODUCER → PRODUCER_SUCCESS), median over the rounds.

`--json` prints one object: cpu_us_per_msg_no_schema, cpu_us_per_msg_schema, overhead_pct,
create_ms_no_schema, create_ms_schema, messages, rounds, size.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import uuid
from typing import Any

from perf.harness import add_server_args, cpu_per_message_us, print_report, server_from_args

SCHEMA = {"type": "record", "name": "Blob", "fields": [{"name": "data", "type": "bytes"}]}
SEND_TIMEOUT_S = 120.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf schemas", description=__doc__.split("\n")[0])
    add_server_args(parser)
    parser.add_argument("--messages", type=int, default=50_000, help="messages per producer per round")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (each: one of each producer)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.size < 1 or args.rounds < 1:
        parser.error("--messages, --size and --rounds must be positive")
    return args


def _pre_encoded_schema() -> Any:
    """An AVRO schema whose encode passes bytes through (they are already Avro)."""
    import _pulsar  # type: ignore[import-not-found]  # the C++ extension: no stubs
    from pulsar.schema import Schema

    class PreEncoded(Schema):
        def __init__(self) -> None:
            super().__init__(bytes, _pulsar.SchemaType.AVRO, SCHEMA, "AVRO")

        def encode(self, obj: bytes) -> bytes:
            return obj

        def decode(self, data: bytes) -> bytes:
            return data

    return PreEncoded()


def _payload(size: int) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMA, {"data": b"x" * max(0, size - 3)})
    return out.getvalue()


def _one_run(client: Any, server: Any, schema: Any, payload: bytes, messages: int) -> tuple[float | None, float]:
    """(server CPU µs per message, producer creation ms) of one producer on a fresh topic."""
    topic = f"persistent://public/default/perf-schemas-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    producer = client.create_producer(topic, schema=schema, batching_enabled=True,
                                      batching_max_publish_delay_ms=1, max_pending_messages=10_000,
                                      block_if_queue_full=True)
    create_ms = (time.perf_counter() - started) * 1000
    cpu_before = server.cpu.sample_s()
    for _ in range(messages):
        producer.send_async(payload, None)
    producer.flush()
    cpu_after = server.cpu.sample_s()
    producer.close()
    return cpu_per_message_us(cpu_before, cpu_after, messages), create_ms


def run(args: argparse.Namespace) -> dict:
    import pulsar

    payload = _payload(args.size)
    plain, typed = pulsar.schema.BytesSchema(), _pre_encoded_schema()
    cpu: dict[str, list[float]] = {"plain": [], "schema": []}
    create: dict[str, list[float]] = {"plain": [], "schema": []}
    with server_from_args(args) as server:
        client = pulsar.Client(server.service_url, operation_timeout_seconds=int(SEND_TIMEOUT_S),
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            _one_run(client, server, plain, payload, min(args.messages, 5_000))     # warm-up
            for i in range(args.rounds):
                order = (("plain", plain), ("schema", typed)) if i % 2 == 0 else (("schema", typed), ("plain", plain))
                for kind, schema in order:
                    us, ms = _one_run(client, server, schema, payload, args.messages)
                    if us is not None:
                        cpu[kind].append(us)
                    create[kind].append(ms)
        finally:
            client.close()
    return _report(args, cpu, create)


def _report(args: argparse.Namespace, cpu: dict[str, list[float]], create: dict[str, list[float]]) -> dict:
    plain = statistics.median(cpu["plain"]) if cpu["plain"] else None
    typed = statistics.median(cpu["schema"]) if cpu["schema"] else None
    overhead = round((typed - plain) * 100 / plain, 2) if plain and typed is not None else None
    return {"cpu_us_per_msg_no_schema": plain, "cpu_us_per_msg_schema": typed, "overhead_pct": overhead,
            "cpu_us_per_msg_no_schema_runs": cpu["plain"], "cpu_us_per_msg_schema_runs": cpu["schema"],
            "create_ms_no_schema": round(statistics.median(create["plain"]), 2),
            "create_ms_schema": round(statistics.median(create["schema"]), 2),
            "messages": args.messages, "rounds": args.rounds, "size": args.size}


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    print_report("strata perf schemas", run(args), args.json)
    return 0
