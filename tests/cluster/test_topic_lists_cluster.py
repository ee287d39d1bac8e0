"""Topic-list watchers on a real 2-broker cluster: a watcher on either broker hears of a topic
created through the other (the change comes through the metadata store's watch on /topics, not
from the broker that made the topic), and GET_TOPICS_OF_NAMESPACE answers the same list and hash
on both brokers.
"""

from __future__ import annotations

import time

from broker.protocol import topic_lists
from proto import pulsar_api_pb2 as pb
from tests.cluster.conftest import unique
from tests.cluster.helpers import make_client
from tests.support.cluster_proc import LocalCluster
from tests.support.namespaces import ensure_namespace
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T

# From the moment the topic exists (its producer is created) until both watchers have the update:
# it comes through the store's watch, which polls every 0.1 s. Measured: 0.01-0.06 s (and 0.03-0.05 s
# for the producer's lookup, ownership and topic load, which are not part of the bound: they wait
# on PostgreSQL and a loaded machine can stretch them). 2.0 s leaves 20 polls.
UPDATE_WAIT_S = 2.0


def test_watchers_on_both_brokers_see_a_topic_made_through_either(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    ns = f"public/{unique('watch')}"
    ensure_namespace(a.admin_url, ns)
    watchers = []
    for broker in (a, b):
        raw = RawClient(broker.port, timeout_s=10)
        raw.connect()
        raw.send(pb.BaseCommand(type=T.WATCH_TOPIC_LIST, watchTopicList=pb.CommandWatchTopicList(
            request_id=1, watcher_id=1, namespace=ns, topics_pattern=f"persistent://{ns}/w-.*")))
        reply = raw.next_command()
        assert reply.type == T.WATCH_TOPIC_LIST_SUCCESS and list(reply.watchTopicListSuccess.topic) == []
        watchers.append(raw)
    client = make_client(cluster.service_url)
    try:
        topics = [f"persistent://{ns}/w-{i}" for i in range(4)]   # spread over the namespace's bundles
        for topic in topics:
            client.create_producer(topic).close()
            created = time.monotonic()
            for raw in watchers:
                update = raw.next_command()
                assert update.type == T.WATCH_TOPIC_UPDATE, update
                assert list(update.watchTopicUpdate.new_topics) == [topic]
            assert time.monotonic() - created < UPDATE_WAIT_S
        hashes = set()
        for raw in watchers:
            raw.send(pb.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE,
                                    getTopicsOfNamespace=pb.CommandGetTopicsOfNamespace(request_id=2, namespace=ns)))
            listed = raw.next_command().getTopicsOfNamespaceResponse
            assert sorted(listed.topics) == sorted(topics)
            hashes.add(listed.topics_hash)
        assert hashes == {topic_lists.calculate_hash(topics)}
    finally:
        client.close()
        for raw in watchers:
            raw.close()
