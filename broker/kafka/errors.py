"""Strata's errors as Kafka error codes: the one place the front end translates them.

Retriable conditions map to the codes Kafka clients retry after a metadata refresh (a partition
served elsewhere, an owner being chosen, a fenced ledger: NOT_LEADER_OR_FOLLOWER; too few bookies:
NOT_ENOUGH_REPLICAS); the rest to the code that names them, else UNKNOWN_SERVER_ERROR.

What must hold: every StrataError gets a code; a retriable Strata error never maps to a code Kafka
clients treat as fatal.
"""

from __future__ import annotations

from common import errors as e
from wire.kafka.errors import ErrorCode

_MAP: tuple[tuple[type[e.StrataError], int], ...] = (
    (e.OwnedElsewhere, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.BundleNotOwned, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.NoOwner, ErrorCode.LEADER_NOT_AVAILABLE),
    (e.ServiceNotReady, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.ManagedLedgerFenced, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.ManagedLedgerClosed, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.ShuttingDown, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (e.NotEnoughBookies, ErrorCode.NOT_ENOUGH_REPLICAS),
    (e.TopicTerminated, ErrorCode.POLICY_VIOLATION),
    (e.BacklogQuotaExceeded, ErrorCode.POLICY_VIOLATION),
    (e.InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (e.NamespaceNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (e.TopicNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (e.AuthorizationDenied, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (e.MessageTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (e.OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
    (e.MetadataUnavailable, ErrorCode.REQUEST_TIMED_OUT),
    (e.TimeoutExpired, ErrorCode.REQUEST_TIMED_OUT),
    (e.LimitExceeded, ErrorCode.REQUEST_TIMED_OUT),         # a bound hit (batches in flight): retried
    (e.InvalidArgument, ErrorCode.INVALID_RECORD),          # a producer id, epoch or sequence out of range
    (e.LedgerError, ErrorCode.KAFKA_STORAGE_ERROR),
    (e.BookieError, ErrorCode.KAFKA_STORAGE_ERROR),
    (e.ColdTierError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def code_of(exc: BaseException) -> int:
    for cls, code in _MAP:
        if isinstance(exc, cls):
            return int(code)
    if isinstance(exc, e.StrataError) and exc.retriable:
        return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
