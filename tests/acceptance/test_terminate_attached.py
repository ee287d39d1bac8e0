"""Terminating a topic while its consumers and a producer are attached (issue 16 item 6), against a
real standalone: the official client (pulsar-client 3.13.0) for the producer and one consumer,
and two consumers of a Java-like raw client (which, unlike the C++ client, handles
REACHED_END_OF_TOPIC, docs/protocol.md §10) sharing a Shared subscription.

- `POST .../terminate` answers the id of the last message the attached producer sent; that
  producer's next send fails with `pulsar.TopicTerminated`.
- Both Shared consumers, which had received and acked everything, are told REACHED_END_OF_TOPIC
  (once each), without reconnecting; the official consumer (Failover subscription) got every
  message, stays connected and receives nothing more.

- An exclusive producer holds the topic and another waits for it (WaitForExclusive): on
  terminate the waiter's `create_producer` fails at once with `pulsar.TopicTerminated` (it was
  left queued until its client's operation timeout), and so does the holder's next send.

The rest of terminate (after-the-fact subscriptions, readers, partitions, restart, CLI) is in
tests/acceptance/test_terminate.py, whose helpers this reuses.
"""

from __future__ import annotations

import threading
import time

import pulsar
import pytest

from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import receive_all
from tests.acceptance.test_terminate import _as_id, _JavaLikeClient, _terminate
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T


def test_attached_consumers_reach_the_end_and_the_producer_is_refused(standalone, client: pulsar.Client,
                                                                      topic: str) -> None:
    raw = _JavaLikeClient(standalone.port)
    try:
        raw.subscribe(topic, "shared", pb.CommandSubscribe.Shared, 1, earliest=True)
        raw.subscribe(topic, "shared", pb.CommandSubscribe.Shared, 2, earliest=True)
        official = client.subscribe(topic, "failover", consumer_type=pulsar.ConsumerType.Failover)
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [_as_id(producer.send(f"m{i}".encode())) for i in range(6)]
        delivered = {}
        for cmd in raw.commands_within(2.0):
            if cmd.type == T.MESSAGE:
                delivered.setdefault(cmd.message.consumer_id, []).append(
                    (cmd.message.message_id.ledgerId, cmd.message.message_id.entryId))
        assert sorted(p for got in delivered.values() for p in got) == ids
        for consumer_id, positions in delivered.items():
            raw.ack(consumer_id, positions)
        assert [m.data() for m in receive_all(official, 6)] == [f"m{i}".encode() for i in range(6)]

        last = _terminate(standalone.admin_url, topic)
        assert (last["ledgerId"], last["entryId"]) == ids[-1]
        ends = [c.reachedEndOfTopic.consumer_id for c in raw.commands_within(3.0) if c.type == T.REACHED_END_OF_TOPIC]
        assert sorted(ends) == [1, 2]
        with pytest.raises(pulsar.TopicTerminated):
            producer.send(b"after the end")
        assert official.is_connected()
        with pytest.raises(pulsar.Timeout):
            official.receive(500)
    finally:
        raw.close()


def test_a_producer_waiting_for_exclusive_access_is_refused_at_once(standalone, client: pulsar.Client,
                                                                    topic: str) -> None:
    holder = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    holder.send(b"only")
    outcome: dict[str, object] = {}

    def wait_for_the_topic() -> None:
        try:
            outcome["producer"] = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.WaitForExclusive)
        except pulsar.PulsarException as exc:
            outcome["error"] = exc
        outcome["at"] = time.monotonic()
    waiter = threading.Thread(target=wait_for_the_topic)
    waiter.start()

    def queued() -> bool:
        return any(topic in line and "queued for exclusive access" in line
                   for line in standalone.log_path.read_text(errors="replace").splitlines())
    wait_until(queued, 10, what="the waiting producer queued behind the holder (the broker's log)")
    assert not outcome
    terminated_at = time.monotonic()
    _terminate(standalone.admin_url, topic)
    waiter.join(10)                      # the client's operation timeout is 15 s
    assert isinstance(outcome.get("error"), pulsar.TopicTerminated), outcome
    assert float(outcome["at"]) - terminated_at < 5.0   # type: ignore[arg-type]
    with pytest.raises(pulsar.TopicTerminated):
        holder.send(b"after the end")
