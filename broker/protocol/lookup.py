"""PARTITIONED_METADATA and LOOKUP: where a topic lives and how many partitions it has.

LOOKUP is answered by `broker.cluster.ownership.Ownership.resolve` (docs/protocol.md §8.1): Connect to the
bundle's owner, or Redirect with `authoritative=true` to the broker chosen to own an unowned
bundle (which acquires it when the client asks it in turn). A lookup that cannot be answered
now (the owner is unloading the bundle or unreachable past `broker_lookup_owner_wait_ms`, this
broker's lease has lapsed, or it is shutting down) gets Failed with ServiceNotReady, which the
client retries. PARTITIONED_METADATA is a metadata-store read any broker answers: the partition
count of a partitioned topic, 0 otherwise. Both validate the name first: a bad name is answered
with a Failed response carrying InvalidTopicName, never with a dropped connection. A topic of a
namespace that does not exist (or is being deleted) is answered MetadataError "Policies not found
for <t>/<ns> namespace", as Pulsar's brokers answer (`broker.records.tenancy`; no store read per lookup).
autoTopicCreation (`broker.topics.auto_create`): a LOOKUP of a persistent topic that does not exist
and may not be created is answered TopicNotFound; PARTITIONED_METADATA of a name that does not
exist, where auto-creation makes partitioned topics, creates it and answers its partition count.

Both answer the broker's TLS URL (`brokerServiceUrlTls`, its `pulsar+ssl://` port, from its ownership
record or registry entry) beside its plain one: a client given a pulsar+ssl:// service URL connects
there, and fails on an empty one.

A LOOKUP naming an advertised listener (`advertised_listener_name`, the official client's
`listener_name=`) is answered with that listener's URLs of the broker it names (the owner for
Connect, the chosen broker for Redirect; `broker.cluster.listeners`). A name that broker does not have is
answered Failed with NotAllowedError "the broker do not have <name> listener (its advertised
listeners: ...)": Pulsar's message, but not Pulsar's code (ServiceNotReady, which the official
client retries until its operation timeout, as it does MetadataError): NotAllowedError is fatal to
the client, so its `create_producer` fails at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.cluster.ownership import LookupKind, broker_urls
from broker.security.authorization import Action
from common.errors import PulsarServerError, StrataError
from common.topic_names import parse_topic
from proto import pulsar_api_pb2 as pb
from wire.pulsar import LOOKUP_CONNECT, LOOKUP_REDIRECT, encode_lookup_response, encode_partitioned_metadata_response

if TYPE_CHECKING:
    from broker.protocol.frontend import FrontEnd



def _code(exc: StrataError) -> int:
    return exc.server_error if exc.server_error is not None else PulsarServerError.UnknownError


async def partitioned_metadata(front: FrontEnd, cmd: pb.CommandPartitionedTopicMetadata,
                               role: str | None) -> bytes:
    try:
        name = parse_topic(cmd.topic)
        await front.authorization.check(role, Action.LOOKUP, name)   # before anything reads the topic
        await front.namespaces.require_live(name.tenant, name.namespace)
        partitions = await front.service.partitions(name)
        partitions = await front.service.auto_create.partitions_on_metadata(name, partitions)   # autoTopicCreation
    except StrataError as exc:
        return encode_partitioned_metadata_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    return encode_partitioned_metadata_response(cmd.request_id, partitions)


async def lookup(front: FrontEnd, cmd: pb.CommandLookupTopic, role: str | None) -> bytes:
    if front.service.closing:
        return encode_lookup_response(cmd.request_id, server_error=PulsarServerError.ServiceNotReady,
                                      message="broker is shutting down")
    try:
        name = parse_topic(cmd.topic)
        await front.authorization.check(role, Action.LOOKUP, name)   # before anything reads the topic
        await front.namespaces.require_live(name.tenant, name.namespace)
        if name.persistent:
            await front.service.auto_create.check_lookup(name)     # autoTopicCreation: TopicNotFound
        answer = await front.ownership.resolve(name, authoritative=cmd.authoritative)
        url, url_tls = broker_urls(answer, cmd.advertised_listener_name)
    except StrataError as exc:
        return encode_lookup_response(cmd.request_id, server_error=_code(exc), message=str(exc))
    response = LOOKUP_REDIRECT if answer.kind is LookupKind.REDIRECT else LOOKUP_CONNECT
    return encode_lookup_response(cmd.request_id, url, response=response, authoritative=answer.authoritative,
                                  broker_service_url_tls=url_tls)
