"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Without a transactional id any broker answers (clients ask any one). A new producer (pid -1) gets
a fresh id from `ProducerIdAllocator` (durable, unique across the cluster) and epoch 0. A known
pid/epoch (v3+, KIP-360: the client lost track of its sequences) gets the same id with epoch + 1,
and a fresh id once the epoch would pass 32767. Transactions are not served: a transactional id
is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report at once instead of
retrying.

What must hold: no two producers ever get the same (id, epoch); a bumped epoch is greater than
the one the client held, so the broker fences the old one's batches (INVALID_PRODUCER_EPOCH).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.kafka import errors as kerrors
from broker.kafka.producer_ids import bump
from common.errors import StrataError
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request


async def init_producer_id(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    if body.get("transactional_id"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    pid, epoch = int(body.get("producer_id", -1)), int(body.get("producer_epoch", -1))
    try:
        if pid >= 0 and epoch >= 0:
            bumped = bump(pid, epoch)
            if bumped is not None:
                return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                        "producer_id": bumped[0], "producer_epoch": bumped[1]}
        new_id = await conn.front.producer_ids.next_id()
    except StrataError as exc:
        code = kerrors.code_of(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": new_id, "producer_epoch": 0}
