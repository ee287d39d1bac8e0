"""PersistentTopic.subscription opens a subscription's cursor once, however many SUBSCRIBEs race.

Found by `strata perf fuzz`: SUBSCRIBEs racing to create one durable subscription each opened its
cursor; every open claims the cursor for a fresh writer token, the cursor object kept was not
the last claimant, and its next persist was fenced ("another owner has taken the cursor over",
an ERROR) with every ack after it refused.
"""

from __future__ import annotations

import asyncio
import types

from broker.limits.topic_caps import TopicCaps
from broker.topics import topic as topic_module
from broker.topics.topic import PersistentTopic
from common.errors import NotFound
from ledger.position import EARLIEST


class SlowCursorStore:
    """open_cursor takes a while (the metadata store) and counts its calls; fails on demand."""

    def __init__(self, fail: bool = False) -> None:
        self.opens = 0
        self.fail = fail

    async def open_cursor(self, view, name, **kwargs):
        self.opens += 1
        await asyncio.sleep(0.05)
        if self.fail:
            raise NotFound("metadata store says no", cursor=name)
        return types.SimpleNamespace(name=name, opened=self.opens)


def _topic(store: SlowCursorStore, monkeypatch) -> PersistentTopic:
    monkeypatch.setattr(topic_module, "Subscription", lambda topic, name, cursor, durable: types.SimpleNamespace(
        name=name, cursor=cursor, durable=durable))
    topic = PersistentTopic.__new__(PersistentTopic)   # only what subscription() uses
    topic.closing = False
    topic.subscriptions = {}
    topic._opening = {}
    topic.caps = TopicCaps()                            # no caps
    topic.cursor_store = store
    topic.ml = object()
    topic.ctx = types.SimpleNamespace(clock=None)
    topic.config = None
    return topic


def test_racing_subscribes_open_the_cursor_once_and_share_the_subscription(monkeypatch) -> None:
    store = SlowCursorStore()
    topic = _topic(store, monkeypatch)

    async def body():
        return await asyncio.gather(*(topic.subscription("s", durable=True, start=EARLIEST) for _ in range(5)))
    subs = asyncio.run(body())
    assert store.opens == 1
    assert all(sub is subs[0] for sub in subs) and topic.subscriptions == {"s": subs[0]}
    assert topic._opening == {}


def test_a_cancelled_subscribe_does_not_cancel_the_open_others_wait_for(monkeypatch) -> None:
    store = SlowCursorStore()
    topic = _topic(store, monkeypatch)

    async def body():
        first = asyncio.ensure_future(topic.subscription("s", durable=True, start=EARLIEST))
        second = asyncio.ensure_future(topic.subscription("s", durable=True, start=EARLIEST))
        await asyncio.sleep(0.01)
        first.cancel()            # its connection closed
        return await second
    sub = asyncio.run(body())
    assert store.opens == 1 and topic.subscriptions == {"s": sub}


def test_a_failed_open_fails_every_waiter_and_the_next_subscribe_tries_again(monkeypatch) -> None:
    store = SlowCursorStore(fail=True)
    topic = _topic(store, monkeypatch)

    async def body():
        results = await asyncio.gather(*(topic.subscription("s", durable=True, start=EARLIEST) for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(r, NotFound) for r in results) and store.opens == 1
        store.fail = False
        return await topic.subscription("s", durable=True, start=EARLIEST)
    sub = asyncio.run(body())
    assert store.opens == 2 and topic.subscriptions == {"s": sub}

