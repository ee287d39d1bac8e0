"""The framed TCP data path between `BookieClient` and real `strata bookie` processes:
round trips, bad frames, a bookie killed mid-stream, backpressure (adds and reads travel only
over this path)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from bookie.client import BookieClient
from bookie.client_core import crc32c
from bookie.frames import HEADER_BYTES, FrameKind, encode_frame
from common.config import default_config
from common.errors import BookieUnavailable, TimeoutExpired
from launch.bookie import BookieProcess
from proto import bookie_pb2 as pb

CONFIG = default_config()


def _payload(entry_id: int, size: int = 100) -> bytes:
    return (b"%08d" % entry_id) * (size // 8)


def _run(bookie: BookieProcess, coro_fn) -> None:
    try:
        asyncio.run(coro_fn())
    finally:
        bookie.close()


def test_adds_then_reads_round_trip_over_tcp(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b")

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        sizes = [10, 1000, 20_000, 300_000] * 25
        futures = [client.submit_add(7, i, _payload(i, size), i - 1, writer_token=b"w")
                   for i, size in enumerate(sizes)]
        await asyncio.gather(*futures)
        assert (await client.info()).data_port > 0
        got = await client.read(7, 0, len(sizes) - 1, allow_past_lac=True)
        assert got == [(i, _payload(i, size)) for i, size in enumerate(sizes)]
        assert (await client.read_lac(7))[1] == len(sizes) - 1
        await client.close()
    _run(bookie, go)


def _raw_exchange(port: int, data: bytes) -> bytes:
    """Send `data` on a fresh connection; everything the bookie sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _error_frame(received: bytes) -> pb.DataLinkError:
    length, kind = struct.unpack_from(">IB", received)
    assert kind == FrameKind.ERROR and len(received) == 4 + length  # nothing after it: closed
    return pb.DataLinkError.FromString(received[HEADER_BYTES:])


def test_malformed_and_oversize_frames_close_only_that_connection(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b")

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        for i in range(10):
            await client.add(3, i, _payload(i), i - 1, writer_token=b"w")
        port = (await client.info()).data_port
        bad = {
            "oversize": struct.pack(">IB", 1 << 30, FrameKind.ADD_REQUEST),
            "unknown kind": struct.pack(">IB", 4, 77) + b"abc",
            "garbage body": encode_frame(FrameKind.ADD_REQUEST, b"\xff" * 32),
            "wrong direction": encode_frame(FrameKind.ADD_RESPONSE, b""),
        }
        for name, data in bad.items():
            received = await asyncio.to_thread(_raw_exchange, port, data)
            error = _error_frame(received)
            assert error.error_code == 209, name  # BadRequest
        # A half-written add with a bad frame behind it stores nothing.
        entry = pb.AddRequest(request_id=1, writer_token=b"w")
        entry.entries.add(ledger_id=3, entry_id=10, last_add_confirmed=9, payload=b"half",
                          crc32c=crc32c(b"half"))
        good = encode_frame(FrameKind.ADD_REQUEST, entry.SerializeToString())
        received = await asyncio.to_thread(_raw_exchange, port, good[:-2] + b"\xff" * 10)
        assert _error_frame(received).error_code == 209 or received == b""
        # The good client's connection was never disturbed; stored entries are intact.
        for i in range(10, 20):
            await client.add(3, i, _payload(i), i - 1, writer_token=b"w")
        got = await client.read(3, 0, 19, allow_past_lac=True)
        assert got == [(i, _payload(i)) for i in range(20)]
        await client.close()
    _run(bookie, go)


def test_bookie_killed_midstream_fails_inflight_adds_within_a_bound(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b")

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)  # add timeout 10 s
        await client.add(1, 0, b"first", -1, writer_token=b"w")
        futures = [client.submit_add(1, i, _payload(i, 4096), i - 1, writer_token=b"w")
                   for i in range(1, 20_000)]
        await asyncio.sleep(0.05)
        bookie.kill9()
        killed = time.monotonic()
        _done, not_done = await asyncio.wait(futures, timeout=5)
        assert not not_done and time.monotonic() - killed < 5
        errors = [f.exception() for f in futures if f.exception() is not None]
        assert errors, "some adds must have been in flight when the bookie died"
        assert all(isinstance(e, BookieUnavailable) and not isinstance(e, TimeoutExpired)
                   for e in errors)
        with pytest.raises(BookieUnavailable):  # a new add finds no bookie: typed, bounded
            await asyncio.wait_for(client.add(1, 99_999, b"x", -1, writer_token=b"w"), 15)
        await client.close()
    _run(bookie, go)


def test_bookie_over_its_add_queue_limit_pushes_back_without_losing_adds(tmp_path):
    config_path = tmp_path / "bookie.toml"
    config_path.write_text("bookie_add_queue_entries_max = 8\n")
    bookie = BookieProcess.start(tmp_path / "b", config_path=config_path)

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        futures = []
        for i in range(3000):
            futures.append(client.submit_add(2, i, _payload(i, 2000), i - 1, writer_token=b"w"))
            if i % 50 == 0:
                await asyncio.sleep(0)  # separate frames, so the bookie sees many requests
        await asyncio.gather(*futures)
        got = await client.read(2, 0, 2999, allow_past_lac=True)
        assert got == [(i, _payload(i, 2000)) for i in range(3000)]
        await client.close()
    _run(bookie, go)
