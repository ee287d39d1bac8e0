"""A raw Pulsar-protocol client over a plain socket, for feeding a live broker bad input.

Uses the sans-IO codec to frame commands and decode replies; every read is bounded by a timeout.
"""

from __future__ import annotations

import socket
import time

from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command, encode_payload_command

FRAME_BYTES_MAX = 16 * 1024 * 1024


class RawClient:
    def __init__(self, port: int, timeout_s: float = 20.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.decoder = FrameDecoder(FRAME_BYTES_MAX)
        self.frames: list = []
        self.timeout_s = timeout_s

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, cmd: pb.BaseCommand) -> None:
        self.send_bytes(encode_command(cmd))

    def connect(self) -> pb.BaseCommand:
        self.send(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="raw-test", protocol_version=20)))
        reply = self.next_command()
        assert reply.type == T.CONNECTED, reply
        return reply

    def next_command(self) -> pb.BaseCommand:
        """The next command from the broker; raises ConnectionError if the broker closed."""
        return self.next_frame().command

    def next_frame(self):
        """The next whole frame (command, and for MESSAGE the entry bytes as sent)."""
        deadline = time.monotonic() + self.timeout_s
        while not self.frames:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from broker")
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)

    def is_closed_by_broker(self) -> bool:
        """True if the broker closes the connection (within the timeout) without replying."""
        try:
            while True:
                self.next_command()
        except (ConnectionError, ConnectionResetError):
            return True
        except TimeoutError:
            return False

    def producer(self, topic: str, producer_id: int = 1, request_id: int = 1) -> pb.BaseCommand:
        self.send(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic=topic, producer_id=producer_id, request_id=request_id)))
        return self.next_command()

    def send_message(self, producer_id: int, sequence_id: int, payload: bytes, *,
                     producer_name: str = "raw", corrupt_checksum: bool = False,
                     publish_time_ms: int | None = None) -> None:
        md = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id,
                                publish_time=int(time.time() * 1000) if publish_time_ms is None else publish_time_ms)
        entry = build_entry(md, payload)
        if corrupt_checksum:
            entry = entry[:2] + bytes(b ^ 0xFF for b in entry[2:6]) + entry[6:]
        cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id))
        self.send_bytes(encode_payload_command(cmd, entry))
