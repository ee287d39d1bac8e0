"""Kafka producer ids (broker.kafka.producer_ids): blocks claimed by compare-and-set in a real
metadata store (SQLite and PostgreSQL), disjoint across allocators (brokers) and restarts, under
concurrent calls; and the epoch-bump helper."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.kafka.idempotence import EPOCH_MAX, PRODUCER_ID_MAX
from broker.kafka.producer_ids import BLOCK_PATH, ProducerIdAllocator, bump
from common.config import default_config
from common.errors import InvalidArgument
from metadata import open_store
from metadata.aio import AsyncMetadataStore
from tests.metadata.conftest import BACKENDS, make_url


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_url(request.param, request, tmp_path_factory)


def opened(url: str) -> AsyncMetadataStore:
    return AsyncMetadataStore(open_store(url, config=default_config()))


def test_bump_keeps_the_pid_until_the_epoch_is_exhausted() -> None:
    assert bump(42, 0) == (42, 1)
    assert bump(42, EPOCH_MAX - 1) == (42, EPOCH_MAX)
    assert bump(42, EPOCH_MAX) is None
    assert bump(-1, -1) is None


def test_two_brokers_concurrently_hand_out_disjoint_ids_and_restarts_never_reuse(store_url: str) -> None:
    async def body() -> None:
        a_store, b_store = opened(store_url), opened(store_url)
        a = ProducerIdAllocator(a_store, block_size=7)
        b = ProducerIdAllocator(b_store, block_size=7)
        ids = await asyncio.gather(*(x.next_id() for _ in range(60) for x in (a, b)))
        assert len(set(ids)) == len(ids) == 120 and min(ids) >= 0
        await a_store.close()
        again = opened(store_url)                         # broker a restarts
        a2 = ProducerIdAllocator(again, block_size=7)
        later = await asyncio.gather(*(a2.next_id() for _ in range(10)))
        assert not set(later) & set(ids) and min(later) > max(ids) - 7
        found = await again.get(BLOCK_PATH)
        assert found is not None and json.loads(found.value)["next"] > max(later)   # persisted first
        await again.close()
        await b_store.close()
    asyncio.run(asyncio.wait_for(body(), 120))


def test_ids_stop_at_int64_max(store_url: str) -> None:
    async def body() -> None:
        store = opened(store_url)
        await store.put(BLOCK_PATH, json.dumps({"next": PRODUCER_ID_MAX - 2}).encode())
        alloc = ProducerIdAllocator(store, block_size=10)
        assert [await alloc.next_id() for _ in range(3)] == [PRODUCER_ID_MAX - 2, PRODUCER_ID_MAX - 1, PRODUCER_ID_MAX]
        with pytest.raises(InvalidArgument):
            await alloc.next_id()
        await store.close()
    asyncio.run(asyncio.wait_for(body(), 60))
