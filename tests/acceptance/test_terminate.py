"""Terminating a topic (Pulsar's `topics terminate`), against a real standalone with the official
client (pulsar-client 3.13.0) and, for the one command that client cannot take, a raw
protocol client that introduces itself as the Java client.

- `POST .../terminate` answers the last message id; a send afterwards fails with the client's
  `pulsar.TopicTerminated` (the producer is closed and its reconnection refused); a new producer
  is refused the same way; terminating again answers the same id; an unknown topic is a 404.
- Consumers read everything stored before the termination. A client that understands
  REACHED_END_OF_TOPIC (a Java-like CONNECT) gets it, for every subscription type, once it has
  acknowledged everything, not before; a subscription made afterwards at the end gets it at once;
  a reader's (non-durable) subscription gets it once it has read everything. A raw producer gets
  CLOSE_PRODUCER and its new PRODUCER is refused with TopicTerminatedError.
  The official client (C++ underneath) is never sent it (it drops the connection on it,
  docs/protocol.md §10): its consumer stays connected and its reader's `has_message_available()` is
  False at the end.
- The state is in the managed ledger's record: after a restart the topic is still terminated at
  the same id (internal stats `state` "Terminated").
- A partitioned topic: `.../terminate/partitions` terminates every partition; `.../terminate` on
  its own name is refused (405), as Pulsar.
- `strata admin topics terminate` asks first; `-y` terminates and prints the id.
"""

from __future__ import annotations

import time

import pulsar
import pytest

from cli import admin
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client, receive_all
from tests.acceptance.test_admin import http
from tests.support.admin_cli import run_admin
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T

SUB_TYPES = {"Exclusive": pb.CommandSubscribe.Exclusive, "Shared": pb.CommandSubscribe.Shared,
             "Failover": pb.CommandSubscribe.Failover, "Key_Shared": pb.CommandSubscribe.Key_Shared}


def _base(admin_url: str, topic: str) -> str:
    return f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}"


def _terminate(admin_url: str, topic: str) -> dict:
    status, body = http("POST", _base(admin_url, topic) + "/terminate")
    assert status == 200, body
    return body


def _as_id(msg_id: pulsar.MessageId) -> tuple[int, int]:
    return msg_id.ledger_id(), msg_id.entry_id()


def _produce(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(count)]
    producer.close()
    return ids


def test_terminate_returns_the_last_id_and_later_sends_fail(standalone, client: pulsar.Client,
                                                            topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    last = _terminate(standalone.admin_url, topic)
    assert (last["ledgerId"], last["entryId"], last["partitionIndex"]) == (*_as_id(ids[-1]), -1)
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"after the end")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    assert _terminate(standalone.admin_url, topic) == last          # twice: the same id
    status, stats = http("GET", _base(standalone.admin_url, topic) + "/stats")
    assert status == 200 and stats["publishers"] == [] and stats["msgInCounter"] == 5
    internal = http("GET", _base(standalone.admin_url, topic) + "/internalStats")[1]
    assert internal["state"] == "Terminated"
    assert internal["lastConfirmedEntry"] == f"{last['ledgerId']}:{last['entryId']}"
    # everything stored before the end is still there
    consumer = client.subscribe(topic, "after", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in receive_all(consumer, 5)] == [f"m{i}".encode() for i in range(5)]


def test_unknown_topic_is_404_and_nothing_is_created(standalone, topic: str) -> None:
    status, body = http("POST", _base(standalone.admin_url, topic) + "/terminate")
    assert status == 404 and body["reason"].startswith("Topic not found")
    assert http("GET", _base(standalone.admin_url, topic) + "/stats")[0] == 404
    status, body = http("POST", _base(standalone.admin_url, topic) + "/terminate/partitions")
    assert status == 404


def test_official_consumer_and_reader_read_to_the_end_and_stay_connected(standalone, client: pulsar.Client,
                                                                         topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    ids = _produce(client, topic, 4)
    last = _terminate(standalone.admin_url, topic)
    assert [m.message_id() for m in receive_all(consumer, 4)] == ids
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(10_000).data())
    assert got == [f"m{i}".encode() for i in range(4)]
    assert not reader.has_message_available()
    time.sleep(1.0)          # REACHED_END_OF_TOPIC would have dropped the connection by now
    assert consumer.is_connected() and reader.is_connected()
    assert _as_id(consumer.get_last_message_id()) == (last["ledgerId"], last["entryId"])
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)


class _JavaLikeClient(RawClient):
    """A raw client whose CONNECT says it is the Java client (which handles REACHED_END_OF_TOPIC)."""

    def __init__(self, port: int) -> None:
        super().__init__(port, timeout_s=10.0)
        self.send(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="Pulsar-Java-v3.3.0", protocol_version=21)))
        assert self.next_command().type == T.CONNECTED
        self.request_id = 0

    def subscribe(self, topic: str, sub: str, sub_type: int, consumer_id: int, *, earliest: bool,
                  reader: bool = False) -> None:
        """A durable subscription, or with `reader` a reader's non-durable one from the earliest
        message (docs/protocol.md §8.9); then FLOW."""
        self.request_id += 1
        position = pb.CommandSubscribe.Earliest if earliest else pb.CommandSubscribe.Latest
        subscribe = pb.CommandSubscribe(topic=topic, subscription=sub, subType=sub_type, consumer_id=consumer_id,
                                        request_id=self.request_id, initialPosition=position)
        if reader:
            subscribe.durable = False
            subscribe.start_message_id.CopyFrom(pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1))
        self.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=subscribe))
        reply = self.next_command()
        assert reply.type == T.SUCCESS, reply
        self.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=consumer_id, messagePermits=100)))

    def ack(self, consumer_id: int, positions: list[tuple[int, int]]) -> None:
        self.send(pb.BaseCommand(type=T.ACK, ack=pb.CommandAck(
            consumer_id=consumer_id, ack_type=pb.CommandAck.Individual,
            message_id=[pb.MessageIdData(ledgerId=lid, entryId=eid) for lid, eid in positions])))

    def commands_within(self, seconds: float) -> list[pb.BaseCommand]:
        """Every command (ignoring PINGs, which are answered) that arrives within `seconds`."""
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                cmd = self.next_command()
            except (TimeoutError, OSError):
                break
            if cmd.type == T.PING:
                self.send(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong()))
                continue
            out.append(cmd)
        self.sock.settimeout(self.timeout_s)
        return out


@pytest.mark.parametrize("sub_type", list(SUB_TYPES))
def test_end_of_topic_reaches_a_client_that_understands_it_once_everything_is_acked(
        standalone, client: pulsar.Client, topic: str, sub_type: str) -> None:
    ids = [_as_id(i) for i in _produce(client, topic, 3)]
    last = _terminate(standalone.admin_url, topic)
    raw = _JavaLikeClient(standalone.port)
    try:
        raw.subscribe(topic, "s", SUB_TYPES[sub_type], 1, earliest=True)
        first = raw.commands_within(1.5)
        delivered = [(c.message.message_id.ledgerId, c.message.message_id.entryId)
                     for c in first if c.type == T.MESSAGE]
        assert delivered == ids
        assert T.REACHED_END_OF_TOPIC not in [c.type for c in first]   # 3 unacked
        raw.ack(1, ids[:2])
        assert T.REACHED_END_OF_TOPIC not in [c.type for c in raw.commands_within(1.0)]
        raw.ack(1, ids[2:])
        after = raw.commands_within(3.0)
        ends = [c for c in after if c.type == T.REACHED_END_OF_TOPIC]
        assert len(ends) == 1 and ends[0].reachedEndOfTopic.consumer_id == 1
        # a subscription made at the end has everything already: told at once
        raw.subscribe(topic, "late", SUB_TYPES[sub_type], 2, earliest=False)
        ends = [c for c in raw.commands_within(3.0) if c.type == T.REACHED_END_OF_TOPIC]
        assert [c.reachedEndOfTopic.consumer_id for c in ends] == [2]
        assert (last["ledgerId"], last["entryId"]) == ids[-1]
    finally:
        raw.close()


def test_end_of_topic_reaches_a_reader_once_it_has_read_everything(standalone, client: pulsar.Client,
                                                                   topic: str) -> None:
    ids = [_as_id(i) for i in _produce(client, topic, 3)]
    _terminate(standalone.admin_url, topic)
    raw = _JavaLikeClient(standalone.port)
    try:
        raw.subscribe(topic, "reader-raw", pb.CommandSubscribe.Exclusive, 1, earliest=True, reader=True)
        got = raw.commands_within(3.0)
        assert [(c.message.message_id.ledgerId, c.message.message_id.entryId)
                for c in got if c.type == T.MESSAGE] == ids
        ends = [c for c in got if c.type == T.REACHED_END_OF_TOPIC]   # a reader's acks are not needed
        assert len(ends) == 1 and got[-1].type == T.REACHED_END_OF_TOPIC
    finally:
        raw.close()


def test_a_raw_producer_is_closed_and_its_reconnection_refused(standalone, client: pulsar.Client,
                                                               topic: str) -> None:
    raw = _JavaLikeClient(standalone.port)
    try:
        raw.request_id += 1
        assert raw.producer(topic, producer_id=1, request_id=raw.request_id).type == T.PRODUCER_SUCCESS
        raw.send_message(1, 0, b"before")
        assert raw.next_command().type == T.SEND_RECEIPT
        _terminate(standalone.admin_url, topic)
        closed = raw.commands_within(2.0)
        assert [c.type for c in closed] == [T.CLOSE_PRODUCER] and closed[0].close_producer.producer_id == 1
        raw.request_id += 1
        refused = raw.producer(topic, producer_id=1, request_id=raw.request_id)
        assert refused.type == T.ERROR and refused.error.error == pb.TopicTerminatedError
    finally:
        raw.close()


def test_terminated_state_survives_a_restart(tmp_path) -> None:
    with StandaloneProcess.start(tmp_path / "data") as sa:
        topic = "persistent://public/default/terminate-restart"
        client = make_client(sa.service_url)
        ids = _produce(client, topic, 3)
        last = _terminate(sa.admin_url, topic)
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        try:
            with pytest.raises(pulsar.TopicTerminated):
                client.create_producer(topic)
            assert _terminate(sa.admin_url, topic) == last
            assert http("GET", _base(sa.admin_url, topic) + "/internalStats")[1]["state"] == "Terminated"
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            got = []
            while reader.has_message_available():
                got.append(reader.read_next(10_000).message_id())
            assert [_as_id(m) for m in got] == [_as_id(i) for i in ids]
        finally:
            client.close()


def test_partitioned_topic_terminates_every_partition(standalone, client: pulsar.Client, topic: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert http("PUT", _base(standalone.admin_url, topic) + "/partitions", 2)[0] == 204
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    ids = [producer.send(f"p{i}".encode()) for i in range(6)]
    producer.close()
    status, body = http("POST", _base(standalone.admin_url, topic) + "/terminate")
    assert status == 405 and "partitioned" in body["reason"]
    status, per_partition = http("POST", _base(standalone.admin_url, topic) + "/terminate/partitions")
    assert status == 200 and sorted(per_partition) == ["0", "1"]
    for index, mid in per_partition.items():
        mine = [i for i in ids if i.partition() == int(index)]
        assert (mid["ledgerId"], mid["entryId"], mid["partitionIndex"]) == (*_as_id(mine[-1]), int(index))
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    capsys.readouterr()
    # the table of `partitioned-terminate` (again: the same ids)
    assert admin.main(["--admin-url", standalone.admin_url, "-y", "topics", "partitioned-terminate", topic]) == 0
    table = capsys.readouterr().out
    for mid in per_partition.values():
        assert str(mid["ledgerId"]) in table and str(mid["entryId"]) in table
    assert "partitionIndex" in table


def test_cli_asks_first_then_terminates(standalone, client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    sent = producer.send(b"one")
    assert admin.main(["--admin-url", standalone.admin_url, "-o", "json", "topics", "terminate", topic]) != 0
    producer.send(b"two")                           # not confirmed: nothing was terminated
    assert run_admin(["--admin-url", standalone.admin_url, "topics", "terminate", topic]) == 0
    last = _terminate(standalone.admin_url, topic)
    assert (last["ledgerId"], last["entryId"]) == (sent.ledger_id(), sent.entry_id() + 1)
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"three")
