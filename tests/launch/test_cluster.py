"""LocalCluster smoke test: 2 brokers and 3 bookies on PostgreSQL, as separate processes.

The official client, given only the multi-host service URL, produces and consumes one message;
a bookie is crashed and restarted at the same address; a broker is frozen and thawed; stop()
leaves no node process and no PostgreSQL server behind. Every wait is bounded.
"""

from __future__ import annotations

import pulsar

from launch.cluster import LocalCluster
from launch.process import pid_alive


def _produce_and_consume(service_url: str, topic: str) -> bytes:
    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        producer.send(b"hello cluster")
        message = consumer.receive(timeout_millis=30_000)
        consumer.acknowledge(message)
        return bytes(message.data())
    finally:
        client.close()


def test_two_brokers_three_bookies_on_postgres(tmp_path) -> None:
    with LocalCluster.start(tmp_path / "cluster", brokers=2, bookies=3) as cluster:
        assert cluster.metadata_url.startswith("postgresql://")
        assert cluster.service_url == "pulsar://" + ",".join(b.broker_id for b in cluster.brokers)
        assert len({b.port for b in cluster.brokers} | {b.port for b in cluster.bookies}) == 5
        assert _produce_and_consume(cluster.service_url, "persistent://public/default/smoke") == b"hello cluster"

        bookie = cluster.bookies[2]
        old_pid = bookie.pid
        bookie.kill9()
        assert not pid_alive(old_pid)
        bookie.restart()
        assert bookie.alive() and bookie.pid != old_pid

        broker = cluster.brokers[1]
        broker.freeze()
        assert broker.frozen
        broker.thaw()
        assert broker.alive() and not broker.frozen

        pids = [n.pid for n in cluster.brokers + cluster.bookies]
        postgres = cluster.postgres
    assert not any(pid_alive(pid) for pid in pids)
    assert postgres is not None and not postgres.running
