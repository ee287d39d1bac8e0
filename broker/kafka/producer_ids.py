"""Kafka producer ids for InitProducerId: unique across the cluster and across restarts.

How it works: one counter in the metadata store, `/kafka/producer-id-block` = `{"next": N}`,
N the first id no broker has taken yet. A broker takes a block of `block_size` ids by
compare-and-set of the counter from N to N + block_size (created at block_size if absent), then
hands ids N.. out from memory. The counter is written before any id of the block is handed
out, so a block is never handed out twice, even after a crash (the unused rest of a block is
lost, as in Kafka's ProducerIdManager). A lost compare-and-set (another broker took a block) is
retried, at most BLOCK_CLAIM_ATTEMPTS_MAX times in all, then LimitExceeded (retriable).

Epoch bumps (KIP-360: InitProducerId with the current pid and epoch) keep the pid and raise the
epoch; `bump` says what comes next, None when the epoch is exhausted (a new pid is needed).

What must hold: ids are in 0..PRODUCER_ID_MAX, and no two `next_id()` calls, on any broker at any
time, return the same id.
"""

from __future__ import annotations

import asyncio
import json

from broker.kafka.idempotence import EPOCH_MAX, PRODUCER_ID_MAX
from common import retry
from common.errors import BadVersion, InvalidArgument, LimitExceeded
from common.invariant import invariant
from metadata.api import AsyncStore

BLOCK_PATH = "/kafka/producer-id-block"
BLOCK_SIZE = 1000                   # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
BLOCK_CLAIM_ATTEMPTS_MAX = 50       # compare-and-sets lost to other brokers before giving up
_CLAIM_RETRY = retry.Retry("broker.kafka_producer_id_block", retry_on=BadVersion,
                           wait=retry.jittered(0.001, 0.02), attempts_max=BLOCK_CLAIM_ATTEMPTS_MAX)


def bump(pid: int, epoch: int) -> tuple[int, int] | None:
    """(pid, epoch) after an epoch bump of `pid` at `epoch`; None: a new pid is needed (the
    epoch is exhausted, or there was no pid: -1)."""
    if pid < 0 or epoch < 0 or epoch >= EPOCH_MAX:
        return None
    return pid, epoch + 1


def _contended(exc: BaseException) -> BaseException:
    return LimitExceeded("kafka producer id block: every compare-and-set lost to other brokers",
                         path=BLOCK_PATH, attempts=BLOCK_CLAIM_ATTEMPTS_MAX)


class ProducerIdAllocator:
    """Hands out producer ids from blocks claimed in the metadata store (see the module docstring)."""

    def __init__(self, astore: AsyncStore, *, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise InvalidArgument("block_size must be at least 1", block_size=block_size)
        self.astore = astore
        self.block_size = block_size
        self._next = 0                   # next id to hand out from the block
        self._end = 0                    # first id past the block; _next == _end: no ids left
        self._lock = asyncio.Lock()      # one block claim at a time per allocator

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                self._next, self._end = await _CLAIM_RETRY.call_async(
                    self._claim_block, give_up=_contended, about=BLOCK_PATH)
            pid = self._next
            self._next += 1
        invariant(0 <= pid <= PRODUCER_ID_MAX, "producer ids fit in int64", pid=pid)
        return pid

    async def _claim_block(self) -> tuple[int, int]:
        """One attempt: move the counter past a block by compare-and-set; the block's range."""
        found = await self.astore.get(BLOCK_PATH)
        start = 0 if found is None else int(json.loads(found.value)["next"])
        if start > PRODUCER_ID_MAX:
            raise InvalidArgument("kafka producer ids exhausted (2**63 handed out)", next=start)
        end = min(start + self.block_size, PRODUCER_ID_MAX + 1)
        await self.astore.put(BLOCK_PATH, json.dumps({"next": end}).encode(),
                              expected_version=-1 if found is None else found.version)
        return start, end
