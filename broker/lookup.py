"""PARTITIONED_METADATA and LOOKUP: where a topic lives and how many partitions it has.

LOOKUP is answered by `broker.ownership.Ownership.resolve` (PROTOCOL.md §8.1): Connect to the
bundle's owner, or Redirect with `authoritative=true` to the broker chosen to own an unowned
bundle (which acquires it when the client asks it in turn). A lookup that cannot be answered
now (the owner is unloading the bundle or unreachable past `broker_lookup_owner_wait_ms`, this
broker's lease has lapsed, or it is shutting down) gets Failed with ServiceNotReady, which the
client retries. PARTITIONED_METADATA is a metadata-store read any broker answers: the partition
count of a partitioned topic, 0 otherwise. Both validate the name first: a bad name is answered
with a Failed response carrying InvalidTopicName, never with a dropped connection. A topic of a
namespace that does not exist (or is being deleted) is answered MetadataError "Policies not found
for <t>/<ns> namespace", as Pulsar's brokers answer (`broker.tenancy`; no store read per lookup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.codec import LOOKUP_REDIRECT, encode_lookup_response, encode_partitioned_metadata_response
from broker.ownership import LookupKind
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
        await service.namespaces.require_live(name.tenant, name.namespace)
        partitions = await service.partitions(name)
    except StrataError as exc:
        return encode_partitioned_metadata_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    return encode_partitioned_metadata_response(cmd.request_id, partitions)


async def lookup(service: BrokerService, cmd: pb.CommandLookupTopic) -> bytes:
    if service.closing:
        return encode_lookup_response(cmd.request_id, server_error=PulsarServerError.ServiceNotReady,
                                      message="broker is shutting down")
    try:
        name = parse_topic(cmd.topic)
        await service.namespaces.require_live(name.tenant, name.namespace)
        answer = await service.ownership.resolve(name, authoritative=cmd.authoritative)
    except StrataError as exc:
        return encode_lookup_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    if answer.kind is LookupKind.REDIRECT:
        return encode_lookup_response(cmd.request_id, answer.native_url, response=LOOKUP_REDIRECT,
                                      authoritative=answer.authoritative)
    return encode_lookup_response(cmd.request_id, answer.native_url, authoritative=answer.authoritative)
