"""common.tls_reads.BufferedReads over a real TLS server, under uvloop (the broker's loop) and the
stdlib loop (in-process servers in tests): every byte reaches the wrapped connection once and in
order (writes of random sizes, some larger than its buffer), the SSL transport is the one the
connection sees, and the end of the connection (EOF, connection_lost) is passed on. uvloop takes
its buffered read path for it (no SSLWantReadError per read). The stdlib loop fills `buf[offset:]`
after a first read: a bytearray there lost those bytes (a bookie's TLS data port saw zeros)."""

from __future__ import annotations

import asyncio
import os
import random
import ssl
from pathlib import Path

import pytest
import uvloop

from auth import certs
from auth.tls import client_context
from common.tls_reads import BUFFER_BYTES_INITIAL, BufferedReads

TOTAL_BYTES = 3 * 1024 * 1024
TIMEOUT_S = 20.0


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.transport: asyncio.BaseTransport | None = None
        self.eof = False
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert isinstance(data, bytes)
        self.chunks.append(data)

    def eof_received(self) -> None:
        self.eof = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(exc)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_tls_bytes_arrive_whole_and_in_order(tmp_path: Path, loop: str) -> None:
    ca = certs.make_ca("tls-reads CA")
    certs.write_pem(ca, tmp_path / "ca.pem")
    certs.write_pem(certs.issue(ca, "localhost", hosts=("localhost", "127.0.0.1")),
                    tmp_path / "s.pem", tmp_path / "s.key")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "s.pem", tmp_path / "s.key")
    rng = random.Random(17)
    sent = os.urandom(TOTAL_BYTES)

    async def scenario() -> tuple[Recorder, bytes]:
        recorders: list[Recorder] = []

        def factory() -> BufferedReads:
            recorders.append(Recorder())
            return BufferedReads(recorders[-1])

        server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(str(tmp_path / "ca.pem")),
                                                  server_hostname="localhost")
        pos = 0
        while pos < TOTAL_BYTES:
            size = rng.choice((1, 7, 300, 4096, 70_000, 3 * BUFFER_BYTES_INITIAL))
            writer.write(sent[pos:pos + size])
            pos += size
            await writer.drain()
        writer.close()
        await writer.wait_closed()
        recorder = recorders[0]
        await asyncio.wait_for(recorder.lost, TIMEOUT_S)
        server.close()
        ssl_object = recorder.transport.get_extra_info("ssl_object") if recorder.transport else None
        assert ssl_object is not None          # the connection saw the SSL transport itself
        return recorder, b"".join(recorder.chunks)

    recorder, received = uvloop.run(scenario()) if loop == "uvloop" else asyncio.run(scenario())
    assert received == sent
    assert recorder.eof                                      # the client's close_notify, passed on
    assert len(recorder.chunks) < TOTAL_BYTES // 1024      # buffered fills, not a call per record
