"""Non-persistent topics: routing and dropping per subscription type (the real NonPersistentTopic,
subscriptions, routers and Consumer over recording links decoded with the real codec), and, on a
real standalone with a raw client, a consumer whose connection stops reading loses messages that
are counted, while the broker keeps the connection.

What is checked: a message goes to at most one consumer per subscription; it is dropped (and
counted) when the consumer the router picks cannot take it — no permits, or a connection that is
not writable — never handed to another consumer of an Exclusive/Failover/Key_Shared subscription;
Shared skips consumers that cannot take it; out + dropped = published for every subscription with
consumers; receipts and message ids are (0, 0); counts survive a consumer's or a subscription's
removal; a reader's subscription goes with its last consumer, a durable one stays. Exclusive
access and the topic epoch live in memory (a new topic of the same name starts without one); the
`/metrics` families take a non-persistent topic's stats, drop counts included.
"""

from __future__ import annotations

import asyncio
import os
import types

import pytest

from broker.nonpersistent.topic import NON_PERSISTENT_POSITION, NonPersistentTopic, metrics_json, topic_json
from broker.stats import metrics_topics
from broker.topics.consumer import Consumer
from broker.topics.entry_facts import facts_of_info
from broker.topics.subscription import KeySharedSpec, SubType
from common.clock import SYSTEM_CLOCK
from common.config import default_config
from common.errors import ConsumerBusy, NotOnNonPersistent
from common.topic_names import parse_topic
from entries.entry import build_entry, parse_entry
from ledger.position import LATEST
from proto import pulsar_api_pb2 as pb
from tests.broker.topics.dispatch_harness import Delivery, RecordingLink
from tests.support.admin_http import admin_call
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T


class Link(RecordingLink):
    """A consumer's connection whose writability the test sets."""

    def __init__(self, name: str, log: list[Delivery]) -> None:
        super().__init__(name, log)
        self.open = True

    def writable(self) -> bool:
        return self.open


class Setup:
    def __init__(self) -> None:
        ctx = types.SimpleNamespace(config=default_config(), clock=SYSTEM_CLOCK)
        self.topic = NonPersistentTopic(ctx, parse_topic("non-persistent://public/default/np"))  # type: ignore[arg-type]
        self.sent: list[Delivery] = []
        self.links: dict[str, Link] = {}
        self._ids = 0

    async def consumer(self, sub_name: str, name: str, sub_type: SubType, permits: int = 1000, *,
                       durable: bool = True, priority: int = 0) -> Consumer:
        self._ids += 1
        link = self.links[name] = Link(name, self.sent)
        consumer = Consumer(link, self._ids, name, int(sub_type), priority, -1, f"{name}#{self._ids}")
        sub = await self.topic.subscription(sub_name, durable=durable, start=LATEST)
        consumer.subscription = sub
        sub.add_consumer(consumer, KeySharedSpec() if sub_type == SubType.KEY_SHARED else None)
        consumer.announce()
        sub.flow(consumer, permits)
        return consumer

    def publish(self, key: str = "k") -> None:
        md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, partition_key=key)
        entry = build_entry(md, b"payload")
        self.topic.fan_out(entry, facts_of_info(parse_entry(entry)), 1)

    def got(self, name: str) -> int:
        return sum(1 for d in self.sent if d.consumer == name)


def test_exclusive_gets_everything_then_drops_without_permits() -> None:
    async def run() -> None:
        s = Setup()
        await s.consumer("s", "a", SubType.EXCLUSIVE, permits=3)
        with pytest.raises(ConsumerBusy):
            await s.consumer("s", "b", SubType.EXCLUSIVE)
        for _ in range(5):
            s.publish()
        sub = s.topic.subscriptions["s"]
        assert s.got("a") == 3 and sub.msg_drop_counter == 2
        assert all(d.position == NON_PERSISTENT_POSITION for d in s.sent)
        assert sub.consumers[0].pending == {}          # nothing waits for an ack
    asyncio.run(run())


def test_failover_sends_only_to_the_active_one_and_drops_when_it_cannot_take() -> None:
    async def run() -> None:
        s = Setup()
        a = await s.consumer("s", "a", SubType.FAILOVER)
        b = await s.consumer("s", "b", SubType.FAILOVER)
        router = s.topic.subscriptions["s"].router
        active = router.active
        idle = b if active is a else a
        s.publish()
        assert s.got(active.name) == 1 and s.got(idle.name) == 0
        s.links[active.name].open = False             # the active one's connection backs up
        s.publish()
        assert s.got(idle.name) == 0 and s.topic.subscriptions["s"].msg_drop_counter == 1
    asyncio.run(run())


def test_shared_skips_consumers_that_cannot_take_and_drops_when_none_can() -> None:
    async def run() -> None:
        s = Setup()
        await s.consumer("s", "a", SubType.SHARED)
        await s.consumer("s", "b", SubType.SHARED)
        for _ in range(4):
            s.publish()
        assert (s.got("a"), s.got("b")) == (2, 2)       # round robin
        s.links["a"].open = False
        for _ in range(3):
            s.publish()
        assert (s.got("a"), s.got("b")) == (2, 5)
        s.links["b"].open = False
        s.publish()
        sub = s.topic.subscriptions["s"]
        assert sub.msg_drop_counter == 1 and sub.msg_out_counter + sub.msg_drop_counter == 8
    asyncio.run(run())


def test_key_shared_never_hands_a_key_to_another_consumer() -> None:
    async def run() -> None:
        s = Setup()
        await s.consumer("s", "a", SubType.KEY_SHARED)
        await s.consumer("s", "b", SubType.KEY_SHARED)
        keys = [f"key-{i}" for i in range(40)]
        for key in keys:
            s.publish(key)
        owner = {d.consumer for d in s.sent}
        assert owner == {"a", "b"}                       # both own some keys
        s.links["a"].open = False
        before_b = s.got("b")
        for key in keys:
            s.publish(key)
        sub = s.topic.subscriptions["s"]
        assert s.got("b") - before_b == 40 - sub.msg_drop_counter    # a's keys were dropped, not moved
        assert sub.msg_drop_counter == s.got("a") > 0
    asyncio.run(run())


def test_counts_survive_removal_and_readers_go_with_their_last_consumer() -> None:
    async def run() -> None:
        s = Setup()
        durable = await s.consumer("d", "a", SubType.EXCLUSIVE, permits=1)
        reader = await s.consumer("r", "b", SubType.EXCLUSIVE, durable=False)
        for _ in range(3):
            s.publish()
        stats = topic_json(s.topic)
        assert stats["msgInCounter"] == 3 and stats["msgOutCounter"] == 4 and stats["msgDropCount"] == 2
        assert s.topic.idle_since_s is None
        s.topic.subscriptions["d"].remove_consumer(durable)
        s.topic.subscriptions["r"].remove_consumer(reader)
        assert set(s.topic.subscriptions) == {"d"}       # the reader's subscription went
        stats = topic_json(s.topic)
        assert stats["msgOutCounter"] == 4 and stats["msgDropCount"] == 2
        assert s.topic.idle_since_s is not None          # no clients: the idle clock runs
        with pytest.raises(NotOnNonPersistent):
            s.topic.subscriptions["d"].seek(None, 0)
        s.publish()                                     # nobody attached: nothing to drop for
        assert topic_json(s.topic)["msgDropCount"] == 2
    asyncio.run(run())


def test_exclusive_access_and_the_epoch_live_in_memory() -> None:
    async def run() -> None:
        s = Setup()
        access = s.topic.access
        assert access.epoch is None and not s.topic.has_clients()
        access.holder = "p1"
        assert await access.take("p1", None) == 0 and s.topic.has_clients()   # holding counts as a client
        access.release("p1")
        access.holder = "p2"
        assert await access.take("p2", None) == 1
        access.release("p2")
        assert Setup().topic.access.epoch is None      # the same name again: a new topic, no epoch
    asyncio.run(run())


def test_metrics_families_take_non_persistent_stats_with_their_drops() -> None:
    async def run() -> None:
        s = Setup()
        await s.consumer("s", "a", SubType.SHARED, permits=2)
        for _ in range(5):
            s.publish()
        name = str(s.topic.name)
        samples = {(f.name, sample.labels.get("subscription")): sample.value
                   for f in metrics_topics.families({name: metrics_json(s.topic)}, "c", topic_level=True)
                   for sample in f.samples}
        assert samples[("pulsar_in_messages", None)] == 5 and samples[("pulsar_out_messages", None)] == 2
        assert samples[("strata_msg_dropped", None)] == 3
        assert ("pulsar_subscription_msg_drop_rate", "s") in samples
        by_namespace = {f.name: f.samples[0].value
                        for f in metrics_topics.families({name: metrics_json(s.topic)}, "c", topic_level=False)}
        assert by_namespace["strata_msg_dropped"] == 3
    asyncio.run(run())


# --- a real connection that stops reading ---------------------------------------------------------

def test_a_connection_that_stops_reading_loses_messages_and_they_are_counted(tmp_path) -> None:
    topic = f"non-persistent://public/default/np-unread-{os.getpid()}"
    with StandaloneProcess.start(tmp_path / "data") as sa:
        reader = RawClient(sa.port)
        reader.connect()
        reader.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=1)))
        assert reader.next_command().type == T.SUCCESS
        reader.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=100_000)))
        producer = RawClient(sa.port)
        producer.connect()
        assert producer.producer(topic, producer_id=1, request_id=1).type == T.PRODUCER_SUCCESS
        count, payload = 400, b"z" * 256 * 1024              # 100 MiB: more than any socket buffers
        for seq in range(count):
            producer.send_message(1, seq, payload)
            receipt = producer.next_command()
            assert receipt.type == T.SEND_RECEIPT
            assert (receipt.send_receipt.message_id.ledgerId, receipt.send_receipt.message_id.entryId) == (0, 0)
        path = "/admin/v2/non-persistent/" + topic.split("://", 1)[1] + "/stats"
        stats = admin_call(sa.admin_url, "GET", path)[1]["subscriptions"]["s"]
        assert stats["msgDropCount"] > 0
        assert stats["msgOutCounter"] + stats["msgDropCount"] == count
        assert len(stats["consumers"]) == 1              # the connection was kept, not aborted
        wait_until(lambda: admin_call(sa.admin_url, "GET", path)[1]["subscriptions"]["s"]["msgDropRate"] > 0,
                   timeout_s=10, what="msgDropRate")
        delivered = 0
        while delivered < stats["msgOutCounter"]:        # what was sent arrives once the client reads
            if reader.next_command().type == T.MESSAGE:
                delivered += 1
        reader.close()
        producer.close()
