"""The metadata store's bounds come from the settings table, on both backends: a store opened
with lowered limits refuses or truncates at those limits, not at the defaults."""

from __future__ import annotations

import asyncio

import pytest

from common.config import default_config
from common.errors import InvalidArgument, LimitExceeded
from metadata import open_store
from metadata.aio import AsyncMetadataStore
from tests.support.waiting import wait_until

LOW = default_config(metadata_put_many_ops_max=3, cursor_writer_ops_per_transaction_max=3,
                     metadata_list_prefix_keys_max=4, metadata_watches_max=2,
                     metadata_watch_rows_per_poll_max=2, metadata_pool_connections=1,
                     metadata_pool_overflow_max=0, metadata_async_threads_max=1,
                     metadata_async_calls_in_flight_max=2)


@pytest.fixture
def low_store(store_url):
    store = open_store(store_url, config=LOW)
    yield store
    store.close()


def test_put_many_refuses_more_ops_than_the_setting(low_store):
    assert low_store.put_many([(f"/pm/{i}", b"v", None) for i in range(3)]) == [1, 1, 1]
    with pytest.raises(InvalidArgument):
        low_store.put_many([(f"/pm/x{i}", b"v", None) for i in range(4)])
    assert low_store.get("/pm/x0") is None                       # nothing of it was written


def test_list_prefix_returns_at_most_the_setting(low_store):
    for i in range(6):
        low_store.create(f"/lp/{i}", b"v")
    assert len(low_store.list_prefix("/lp")) == 4
    assert len(low_store.list_prefix("/lp", limit=100)) == 4      # asking for more does not lift it
    assert len(low_store.list_prefix("/lp", limit=2)) == 2


def test_watches_past_the_setting_are_refused_and_small_polls_miss_nothing(low_store):
    seen: list[str] = []
    low_store.watch("/w", lambda event: seen.append(event.path))
    low_store.watch("/other", lambda event: None)
    with pytest.raises(LimitExceeded):
        low_store.watch("/third", lambda event: None)
    for i in range(7):                                           # more rows than one poll reads
        low_store.create(f"/w/{i}", b"v")
    wait_until(lambda: len(seen) == 7, 10, what="seven watch events")
    assert seen == [f"/w/{i}" for i in range(7)]


def test_async_store_with_one_thread_and_two_calls_in_flight_serves_many_callers(low_store):
    async def go():
        astore = AsyncMetadataStore(low_store, config=LOW)
        await asyncio.gather(*(astore.create(f"/a/{i}", b"v") for i in range(20)))
        assert len(await astore.children("/a")) == 20
    asyncio.run(go())
