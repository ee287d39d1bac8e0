"""PARTITIONED_METADATA and LOOKUP: where a topic lives and how many partitions it has.

A single broker answers every LOOKUP with `Connect` to its own advertised URL and
`authoritative=true` (PROTOCOL.md §8.1); whether it can really serve the topic is decided when
the PRODUCER/SUBSCRIBE arrives (ServiceNotReady while loading or owned elsewhere, which makes the
client look up again). PARTITIONED_METADATA is a metadata-store read: the partition count of a
partitioned topic, 0 otherwise. Both validate the name first: a bad name is answered with a
Failed response carrying InvalidTopicName, never with a dropped connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.codec import encode_lookup_response, encode_partitioned_metadata_response
from common.errors import PulsarServerError, StrataError
from common.topic_names import parse_topic
from proto import pulsar_api_pb2 as pb

if TYPE_CHECKING:
    from broker.service import BrokerService


def _code(exc: StrataError) -> int:
    return exc.server_error if exc.server_error is not None else PulsarServerError.UnknownError


async def partitioned_metadata(service: BrokerService, cmd: pb.CommandPartitionedTopicMetadata) -> bytes:
    try:
        name = parse_topic(cmd.topic)
        partitions = await service.partitions(name)
    except StrataError as exc:
        return encode_partitioned_metadata_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    return encode_partitioned_metadata_response(cmd.request_id, partitions)


async def lookup(service: BrokerService, cmd: pb.CommandLookupTopic) -> bytes:
    try:
        parse_topic(cmd.topic)
    except StrataError as exc:
        return encode_lookup_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    if service.closing:
        return encode_lookup_response(cmd.request_id, server_error=PulsarServerError.ServiceNotReady,
                                      message="broker is shutting down")
    return encode_lookup_response(cmd.request_id, service.advertised_url, authoritative=True)
