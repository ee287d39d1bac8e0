"""A Kafka consumer group's committed offsets as the mark-delete of its subscription
(broker.topics.group_offsets), on a real PersistentTopic: a real managed ledger on a real
`strata bookie` process and a real SQLite metadata store (tests/ledger/conftest.py's LedgerEnv),
and the product's cursor store.

Covered: exact offsets with their metadata, an offset in the middle of a batch entry, a commit past
the end, a commit going back, what an admin-like move (clear-backlog, expiry, skip) does to what
`committed` answers and to later commits, a commit durable before it returns (read back by a new
owner that took the topic over without a close), a commit at the end followed by rollovers,
ConsumerBusy while Pulsar consumers are attached, `apply` (what the admin peer endpoint runs), and
the two guards against a stored group (`check_pulsar_attach`, `check_admin_move`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.context import BackgroundTasks, BrokerContext
from broker.records import groups
from broker.topics import group_offsets
from broker.topics.consumer import Consumer
from broker.topics.subscription import SubType
from broker.topics.topic import PersistentTopic
from common.clock import SYSTEM_CLOCK
from common.config import Config
from common.errors import ConsumerBusy, NotAllowed
from common.topic_names import TopicName, parse_topic
from cursor.cursor_writer import CursorWriter
from entries.batch import BatchMessage, build_batch
from entries.entry import build_entry, parse_entry
from ledger.client import LedgerClient
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST, Position
from metadata.aio import AsyncMetadataStore
from proto import pulsar_api_pb2 as pb
from tests.broker.topics.dispatch_harness import RecordingLink
from tests.ledger.conftest import BOOKIE_DEFAULTS, LedgerEnv, run, shutdown

GROUP = "orders-app"
_names = itertools.count()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerEnv]:
    """One bookie for the module (each test uses topics of its own)."""
    base: Path = tmp_path_factory.mktemp("group-offsets")
    e = LedgerEnv(base, f"sqlite:///{base}/meta.db", base / "bookie.toml")
    e.set_bookie_config(**BOOKIE_DEFAULTS)
    e.start_bookies(1)
    try:
        yield e
    finally:
        for bookie in e.bookies:
            bookie.close()


class _NoActivity:
    def touch(self, topic: Any) -> None:
        pass

    def discard(self, topic: Any) -> None:
        pass


@dataclass
class Broker:
    """What a topic runs on: a metadata store, a ledger client, the context over them."""

    config: Config
    store: AsyncMetadataStore
    client: LedgerClient
    ctx: BrokerContext
    tasks: BackgroundTasks

    async def topic(self, name: TopicName) -> PersistentTopic:
        ml = await ManagedLedger.open(name.managed_ledger_name, self.store, self.client, self.config,
                                      ensemble_size=1, write_quorum=1, ack_quorum=1, meta_from_entry=_entry_meta)
        return await PersistentTopic.open(self.ctx, name, ml)

    async def stop(self, *topics: PersistentTopic) -> None:
        for topic in topics:
            await topic.close()
        self.tasks.cancel_all()
        await shutdown(self.store, self.client)


def _entry_meta(data: bytes) -> tuple[int, int]:
    info = parse_entry(data)
    return max(1, info.num_messages), info.publish_time_ms


async def open_broker(env: LedgerEnv, seed: int = 0, **overrides: Any) -> Broker:
    config = env.config(**overrides)
    store, client = await env.open(config, seed=seed)
    tasks = BackgroundTasks()
    ctx = BrokerContext(config=config, clock=SYSTEM_CLOCK, astore=store, ledger_client=client,
                        cursor_writer=CursorWriter(store, config=config), cold=None, spawn=tasks.spawn,
                        activity=_NoActivity())
    return Broker(config, store, client, ctx, tasks)


def new_name() -> TopicName:
    return parse_topic(f"persistent://public/default/group-offsets-{next(_names)}")


async def publish(topic: PersistentTopic, messages: int = 1, publish_time_ms: int = 1_000) -> Position:
    """One entry: a single message, or a batch of `messages`."""
    if messages == 1:
        md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=publish_time_ms)
        data = build_entry(md, b"x")
    else:
        md, payload = build_batch([BatchMessage(b"m%d" % i) for i in range(messages)], producer_name="p",
                                  sequence_id=0, publish_time_ms=publish_time_ms)
        data = build_entry(md, payload)
    return await topic.publish(data, messages, publish_time_ms)


async def four_entries(topic: PersistentTopic) -> list[Position]:
    """Offsets 0 | 1 | 2..5 (a batch of four) | 6, published at 1000, 2000, 3000, 4000 ms; end 7."""
    return [await publish(topic, n, t) for n, t in ((1, 1_000), (1, 2_000), (4, 3_000), (1, 4_000))]


def mark_delete(topic: PersistentTopic, group: str = GROUP) -> Position:
    return topic.subscriptions[group].cursor.mark_delete_position


def backlog(topic: PersistentTopic, group: str = GROUP) -> int:
    return topic.subscriptions[group].cursor.stats.backlog_entries


def attach_pulsar_consumer(topic: PersistentTopic, group: str = GROUP) -> Consumer:
    consumer = Consumer(RecordingLink("pulsar", []), 1, "pulsar", int(SubType.SHARED), 0, -1, "pulsar#1")
    sub = topic.subscriptions[group]
    consumer.subscription = sub
    sub.add_consumer(consumer, None)
    return consumer


def live_group(group_id: str = GROUP) -> groups.StoredGroup:
    member = groups.StoredMember("m-1", None, "client-1", "/127.0.0.1", 10_000, 30_000, b"sub", b"assign")
    return groups.StoredGroup(group_id, "Stable", 3, "consumer", "range", "m-1", [member], [])


# --- exact offsets ------------------------------------------------------------------------------------

def test_commit_round_trips_exact_offsets_with_metadata_mid_batch_past_the_end_and_backwards(env):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        e = await four_entries(topic)
        assert topic.ml.end_offset == 7
        assert group_offsets.committed(topic, GROUP) is None            # no subscription yet

        await group_offsets.commit(topic, GROUP, 0, "a")
        assert group_offsets.committed(topic, GROUP) == (0, "a")
        assert backlog(topic) == 4 and topic.subscriptions[GROUP].durable

        await group_offsets.commit(topic, GROUP, 3, "mid")                # inside the batch entry e[2]
        assert group_offsets.committed(topic, GROUP) == (3, "mid")
        assert mark_delete(topic) == e[1] and backlog(topic) == 2        # the batch is still unread

        await group_offsets.commit(topic, GROUP, 6, "")
        assert group_offsets.committed(topic, GROUP) == (6, "")
        assert mark_delete(topic) == e[2]

        await group_offsets.commit(topic, GROUP, 7, "end")
        assert group_offsets.committed(topic, GROUP) == (7, "end") and backlog(topic) == 0

        await group_offsets.commit(topic, GROUP, 1, "back")               # nothing else moved it: back is fine
        assert group_offsets.committed(topic, GROUP) == (1, "back")
        assert mark_delete(topic) == e[0] and backlog(topic) == 3

        await group_offsets.commit(topic, GROUP, 100, "far")              # past the end: clamped
        assert group_offsets.committed(topic, GROUP) == (7, "far")
        assert mark_delete(topic) == e[3] and backlog(topic) == 0
        props = topic.subscriptions[GROUP].cursor.properties
        assert props[group_offsets.GROUP] == GROUP and props[group_offsets.METADATA] == "far"
        await b.stop(topic)
    run(body())


def test_a_commit_past_the_end_stays_at_the_end_it_was_clamped_to(env):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        await four_entries(topic)
        await group_offsets.commit(topic, GROUP, 100, "far")
        await publish(topic, 1, 5_000)                                    # offset 7
        try:
            assert backlog(topic) == 1
            assert group_offsets.committed(topic, GROUP) == (7, "far")    # the cursor's position, not 8
        finally:
            await b.stop(topic)
    run(body())


def test_commit_on_an_empty_topic_and_at_the_end_across_rollovers(env):
    """Committing the end seeks the cursor to a position not written yet (the next entry's): the
    mark-delete is the entry before it, and what is written later, in later ledgers too, is the
    group's backlog; the exact offset reads back all along."""
    async def body() -> None:
        b = await open_broker(env, managed_ledger_rollover_entries=2, managed_ledger_rollover_min_age_ms=0)
        topic = await b.topic(new_name())
        await group_offsets.commit(topic, GROUP, 0, "start")              # nothing written yet
        assert group_offsets.committed(topic, GROUP) == (0, "start") and backlog(topic) == 0
        positions = [await publish(topic, n) for n in (1, 3, 1)]
        assert group_offsets.committed(topic, GROUP) == (0, "start") and backlog(topic) == 3
        await group_offsets.commit(topic, GROUP, 5, "end")                # the end: offset 5
        assert mark_delete(topic) == positions[-1]
        more = [await publish(topic, n) for n in (2, 1, 1, 1)]
        assert len({p.ledger_id for p in positions + more}) >= 3          # rolled over since
        assert group_offsets.committed(topic, GROUP) == (5, "end")
        assert backlog(topic) == 4
        await group_offsets.commit(topic, GROUP, 7, "in")                 # the second entry since: offset 7
        assert topic.ml.next_position(mark_delete(topic)) == more[1] and backlog(topic) == 3
        assert group_offsets.committed(topic, GROUP) == (7, "in")
        await b.stop(topic)
    run(body())


# --- moves by others ------------------------------------------------------------------------------------

@pytest.mark.parametrize("move", ["clear_backlog", "expire", "skip"])
def test_after_an_admin_move_committed_is_the_first_offset_after_it_and_only_a_commit_ahead_moves(env, move):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        e = await four_entries(topic)
        await group_offsets.commit(topic, GROUP, 1, "m")
        sub = topic.subscriptions[GROUP]
        if move == "clear_backlog":
            sub.cursor.clear_backlog()
            moved_to, first_unread = e[3], 7
        elif move == "expire":
            assert sub.cursor.expire_before(3_000)                        # e[0], e[1] published before
            moved_to, first_unread = e[1], 2
        else:
            assert sub.cursor.skip(2) == 2                                # e[1] and the batch
            moved_to, first_unread = e[2], 6
        sub.on_cursor_moved()
        assert mark_delete(topic) == moved_to
        assert group_offsets.committed(topic, GROUP) == (first_unread, "m")

        await group_offsets.commit(topic, GROUP, 1, "stale")              # a member's old position
        assert mark_delete(topic) == moved_to
        assert group_offsets.committed(topic, GROUP)[0] == first_unread

        await publish(topic, 1, 5_000)                                    # offset 7
        ahead = 8
        await group_offsets.commit(topic, GROUP, ahead, "ahead")
        assert group_offsets.committed(topic, GROUP) == (ahead, "ahead") and backlog(topic) == 0
        await group_offsets.commit(topic, GROUP, 2, "back again")         # ours again: back is fine
        assert group_offsets.committed(topic, GROUP) == (2, "back again")
        await b.stop(topic)
    run(body())


def test_after_an_expiry_a_commit_inside_the_first_unread_batch_keeps_its_exact_offset(env):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        await four_entries(topic)
        await group_offsets.commit(topic, GROUP, 0, "m")
        assert topic.subscriptions[GROUP].cursor.expire_before(3_000)    # first unread: the batch, offset 2
        await group_offsets.commit(topic, GROUP, 4, "inside")             # ahead of 2, inside the batch
        try:
            assert group_offsets.committed(topic, GROUP) == (4, "inside")
        finally:
            await b.stop(topic)
    run(body())


# --- durability ------------------------------------------------------------------------------------------

def test_a_commit_is_durable_when_it_returns(env):
    """A new owner takes the topic over without the first one closing (nothing flushed at close):
    it reads the exact offset and metadata back from the cursor the commit persisted."""
    async def body() -> None:
        name = new_name()
        first = await open_broker(env, seed=1)
        topic = await first.topic(name)
        e = await four_entries(topic)
        await group_offsets.commit(topic, GROUP, 4, "durable")
        second = await open_broker(env, seed=2)
        taken = await second.topic(name)
        assert group_offsets.committed(taken, GROUP) == (4, "durable")
        assert taken.subscriptions[GROUP].cursor.mark_delete_position == e[1]
        assert group_offsets.group_of(taken.subscriptions[GROUP]) == GROUP
        await second.stop(taken)
        await first.stop(topic)       # fenced by the new owner: its close only logs
        third = await open_broker(env, seed=3)
        reopened = await third.topic(name)
        assert group_offsets.committed(reopened, GROUP) == (4, "durable")
        await third.stop(reopened)
    run(body())


# --- both protocols ---------------------------------------------------------------------------------------

def test_commit_and_forget_are_refused_while_pulsar_consumers_are_attached(env):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        await four_entries(topic)
        await group_offsets.commit(topic, GROUP, 2, "m")
        consumer = attach_pulsar_consumer(topic)
        with pytest.raises(ConsumerBusy, match="has Pulsar consumers"):
            await group_offsets.commit(topic, GROUP, 3, "x")
        with pytest.raises(ConsumerBusy, match="not the Kafka group's to delete"):
            await group_offsets.forget(topic, GROUP)
        assert group_offsets.committed(topic, GROUP) == (2, "m")          # fetch still answers
        topic.subscriptions[GROUP].remove_consumer(consumer)
        assert await group_offsets.forget(topic, GROUP)
        assert GROUP not in topic.subscriptions and group_offsets.committed(topic, GROUP) is None
        assert not await group_offsets.forget(topic, GROUP)
        await b.stop(topic)
    run(body())


def test_apply_answers_each_partition_in_order(env):
    """What `POST /admin/v2/kafka/groups/{group}/offsets` runs: one answer per item, a failed item
    (bad name, ConsumerBusy) answered with its code and the others done."""
    async def body() -> None:
        b = await open_broker(env)
        t0, t1 = await b.topic(new_name()), await b.topic(new_name())
        await four_entries(t0)
        await publish(t1, 3)
        loaded = {str(t0.name): t0, str(t1.name): t1}

        async def get_topic(name: TopicName) -> PersistentTopic:
            return loaded[str(name)]

        commit = [{"topic": str(t0.name), "offset": 3, "metadata": "a"}, {"topic": str(t1.name), "offset": 1},
                  {"topic": "not a topic", "offset": 1}]
        answers = await group_offsets.apply(get_topic, "commit", GROUP, commit)
        assert answers[:2] == [{"topic": str(t0.name), "offset": 3, "metadata": "a", "found": True},
                               {"topic": str(t1.name), "offset": 1, "metadata": "", "found": True}]
        assert answers[2]["topic"] == "not a topic" and "code" in answers[2]["error"]
        fetch = [{"topic": str(t0.name)}, {"topic": str(t1.name)}]
        assert await group_offsets.apply(get_topic, "fetch", GROUP, fetch) == [
            {"topic": str(t0.name), "offset": 3, "metadata": "a", "found": True},
            {"topic": str(t1.name), "offset": 1, "metadata": "", "found": True}]
        consumer = attach_pulsar_consumer(t1)
        answers = await group_offsets.apply(get_topic, "forget", GROUP, fetch)
        assert answers[0] == {"topic": str(t0.name), "found": True}
        assert answers[1]["error"]["code"] == ConsumerBusy.code
        t1.subscriptions[GROUP].remove_consumer(consumer)
        assert await group_offsets.apply(get_topic, "fetch", GROUP, fetch[:1]) == [
            {"topic": str(t0.name), "offset": -1, "metadata": "", "found": False}]
        await b.stop(t0, t1)
    run(body())


class _NoReads:
    """A metadata store that must not be read."""

    async def get(self, path: str) -> None:
        raise AssertionError(f"read {path}: only a Kafka group's subscription costs a metadata read")


def test_guards_refuse_only_a_live_groups_subscription(env):
    async def body() -> None:
        b = await open_broker(env)
        topic = await b.topic(new_name())
        await four_entries(topic)
        plain = await topic.subscription("pulsar-sub", durable=True, start=EARLIEST)
        await group_offsets.check_pulsar_attach(_NoReads(), plain)        # type: ignore[arg-type]
        await group_offsets.check_admin_move(_NoReads(), plain)           # type: ignore[arg-type]

        group_id = f"{GROUP}/{next(_names)}"                              # any character, quoted in the path
        await group_offsets.commit(topic, group_id, 2, "")
        sub = topic.subscriptions[group_id]
        await group_offsets.check_pulsar_attach(b.store, sub)             # never stored: not live
        await group_offsets.check_admin_move(b.store, sub)

        version = await groups.save(b.store, live_group(group_id), None)
        with pytest.raises(ConsumerBusy, match=r"belongs to the Kafka consumer group .* live members"):
            await group_offsets.check_pulsar_attach(b.store, sub)
        with pytest.raises(NotAllowed, match="a group's offsets change only while it is empty"):
            await group_offsets.check_admin_move(b.store, sub)

        empty = live_group(group_id)
        empty.members, empty.state = [], "Empty"
        await groups.save(b.store, empty, version)
        await group_offsets.check_pulsar_attach(b.store, sub)
        await group_offsets.check_admin_move(b.store, sub)
        assert group_id in await groups.all_ids(b.store)
        await groups.delete(b.store, group_id)
        await b.stop(topic)
    run(body())
