"""Which Kafka APIs the broker serves, at which versions, and the dispatch to their handlers.

ApiVersions lists exactly this table: a client (librdkafka above all) sends any API it sees
listed, so listing one we do not implement is a promise we would break (KoP's first trap). The
versions are the KIP-896 baseline (Kafka 2.1+) up to what today's clients send, capped where a
newer version needs something Strata does not have: Fetch at 12 (13+ addresses partitions by
topic id), Produce at 9, Metadata at 12, ListOffsets at 6 (v7 adds the max-timestamp lookup).
Produce is listed from v0 although v0-2 are refused: older librdkafka stops compressing when
Produce's listed minimum is not 0 (KAFKA-18659).

A handler takes the connection and the decoded request and returns the response body (a dict,
encoded by the connection in the request's version), None (no response: Produce acks=0), or an
awaitable of either (completed later, answered in order).

What must hold: every key listed has a handler serving every listed version (tests check the
table against the handlers and the codec's schemas); before SASL authentication only the SASL keys
are served.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.kafka import admin, fetch, list_offsets, metadata, produce, producer_ids_api, sasl
from broker.kafka.connection import SASL_KEYS, KafkaConnState
from broker.kafka.groups import api as groups
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request

Handler = Callable[["KafkaConnection", "Request"], Awaitable[Any]]

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


async def api_versions(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    if req.api_version >= 3:
        name, version = body.get("client_software_name") or "", body.get("client_software_version") or ""
        if not _SOFTWARE.match(name) or not _SOFTWARE.match(version):
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": advertised()}
        conn.client_software = f"{name}/{version}"
    return {"error_code": ErrorCode.NONE, "api_keys": advertised(), "throttle_time_ms": 0}


# api key -> (advertised min, served min, max, handler)
TABLE: dict[int, tuple[int, int, int, Handler]] = {
    0: (0, 3, 9, produce.handle),                 # Produce (v0-2 listed, refused: KAFKA-18659)
    1: (4, 4, 12, fetch.handle),                  # Fetch
    2: (0, 0, 6, list_offsets.handle),            # ListOffsets (v0 kept for librdkafka; v7+ need -3)
    3: (0, 0, 12, metadata.handle),               # Metadata
    8: (2, 2, 8, groups.offset_commit),           # OffsetCommit (v9+ is the new group protocol)
    9: (1, 1, 8, groups.offset_fetch),            # OffsetFetch (v9+ is the new group protocol)
    10: (0, 0, 4, groups.find_coordinator),       # FindCoordinator (v5+ adds share groups)
    11: (0, 0, 9, groups.join_group),             # JoinGroup
    12: (0, 0, 4, groups.heartbeat),              # Heartbeat
    13: (0, 0, 5, groups.leave_group),            # LeaveGroup
    14: (0, 0, 5, groups.sync_group),             # SyncGroup
    15: (0, 0, 5, groups.describe_groups),        # DescribeGroups
    16: (0, 0, 5, groups.list_groups),            # ListGroups
    17: (0, 0, 1, sasl.handshake),                # SaslHandshake
    18: (0, 0, 4, api_versions),                  # ApiVersions
    19: (2, 2, 7, admin.create_topics),           # CreateTopics
    20: (1, 1, 6, admin.delete_topics),           # DeleteTopics
    22: (0, 0, 4, producer_ids_api.init_producer_id),   # InitProducerId
    32: (1, 1, 4, admin.describe_configs),        # DescribeConfigs
    33: (0, 0, 2, admin.alter_configs),           # AlterConfigs
    36: (0, 0, 2, sasl.authenticate),             # SaslAuthenticate
    37: (0, 0, 3, admin.create_partitions),       # CreatePartitions
    42: (0, 0, 2, groups.delete_groups),          # DeleteGroups
    44: (0, 0, 1, admin.incremental_alter_configs),   # IncrementalAlterConfigs
    47: (0, 0, 0, groups.offset_delete),          # OffsetDelete
    60: (0, 0, 1, metadata.describe_cluster),     # DescribeCluster
}


def advertised() -> list[dict]:
    return [{"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, _served, hi, _h) in sorted(TABLE.items())]


def served(api_key: int, version: int) -> Handler | None:
    entry = TABLE.get(api_key)
    if entry is None or not entry[1] <= version <= entry[2]:
        return None
    return entry[3]


async def dispatch(conn: KafkaConnection, req: Request) -> Any:
    conn.front.stats.requests[req.api_key] += 1
    handler = served(req.api_key, req.api_version)
    if handler is None:
        return error_only(req, ErrorCode.UNSUPPORTED_VERSION)
    if conn.state is KafkaConnState.AWAIT_SASL and req.api_key not in SASL_KEYS:
        conn.close_after_reply = True
        return error_only(req, ErrorCode.ILLEGAL_SASL_STATE)
    return await handler(conn, req)


def error_only(req: Request, code: int) -> bytes:
    """A frame holding the correlation id and an error code: the answer to a request we cannot
    answer in its own schema (an unknown API or version)."""
    import struct
    body = struct.pack(">ih", req.correlation_id, int(code))
    return struct.pack(">i", len(body)) + body
