"""The core's links to a client, spoken as Pulsar frames: what producers and consumers send.

`broker.topics` declares what a producer and a consumer need from their client's connection
(`ProducerLink`, `ConsumerLink`: a receipt, a refused send, a message, an active-consumer change,
the end of the topic, a close) in no protocol's words. `PulsarClientLink` says each of those as
the Pulsar frame it is, over the two writes a transport offers; `ServerConnection` is one, and so
is any test double that records what a client would read.

What must hold: every method writes exactly one frame, encoded by `wire.pulsar`; a MESSAGE's entry
bytes go out as stored (never rewritten).
"""

from __future__ import annotations

import abc

from common.errors import PulsarServerError, StrataError
from ledger.position import Position
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import (
    encode_active_consumer_change,
    encode_close_consumer,
    encode_close_producer,
    encode_command,
    encode_message_prefix,
    encode_send_error,
    encode_send_receipt,
)

# Entries at least this big go out as [header, entry] (writev) instead of one joined frame:
# joining copies the entry (a fresh allocation per frame), which for 128 KiB entries cost the
# dispatch pass a seventh of its time; below it one joined write is the cheaper call.
WRITE_PARTS_ENTRY_BYTES_MIN = 8 * 1024


class PulsarClientLink(abc.ABC):
    """ProducerLink and ConsumerLink as Pulsar frames; a subclass provides the writes."""

    # the client handles REACHED_END_OF_TOPIC (Pulsar: protocol >= v9); the C++ client and those
    # built on it ("Pulsar-CPP-v...") drop the connection on it (docs/protocol.md §10)
    end_of_topic_ok = False

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Write one frame (or several joined)."""

    @abc.abstractmethod
    def write_parts(self, parts: list[bytes | memoryview]) -> None:
        """Write several buffers back to back without joining them (writev)."""

    def send_receipt(self, producer_id: int, sequence_id: int, ledger_id: int, entry_id: int) -> None:
        self.write(encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id))

    def send_failed(self, producer_id: int, sequence_id: int, error: StrataError) -> None:
        code = error.server_error if error.server_error is not None else PulsarServerError.UnknownError
        self.write(encode_send_error(producer_id, sequence_id, code, str(error)))

    def producer_closed(self, producer_id: int) -> None:
        self.write(encode_close_producer(producer_id, 0))

    def send_message(self, consumer_id: int, partition: int, position: Position, data: bytes,
                     redelivery_count: int, ack_set: list[int] | None) -> None:
        prefix = encode_message_prefix(consumer_id, position.ledger_id, position.entry_id, partition,
                                       redelivery_count, ack_set, len(data))
        if len(data) >= WRITE_PARTS_ENTRY_BYTES_MIN:
            self.write_parts([prefix, data])
        else:
            self.write(prefix + data)

    def active_consumer_changed(self, consumer_id: int, is_active: bool) -> None:
        self.write(encode_active_consumer_change(consumer_id, is_active))

    def reached_end_of_topic(self, consumer_id: int) -> None:
        """REACHED_END_OF_TOPIC, only to a client that handles it (`end_of_topic_ok`); the others
        see the end as has_message_available() == False / GET_LAST_MESSAGE_ID."""
        if self.end_of_topic_ok:
            self.write(encode_command(pb.BaseCommand(
                type=T.REACHED_END_OF_TOPIC,
                reachedEndOfTopic=pb.CommandReachedEndOfTopic(consumer_id=consumer_id))))

    def consumer_closed(self, consumer_id: int) -> None:
        self.write(encode_close_consumer(consumer_id, 0))
