"""A real local cluster for tests: PostgreSQL, N `strata bookie` and M `strata broker` processes.

    with LocalCluster.start(tmp_path / "cluster", brokers=2, bookies=3, lease_ms=3000) as cluster:
        client = pulsar.Client(cluster.service_url)      # pulsar://127.0.0.1:p1,127.0.0.1:p2
        cluster.brokers[0].kill9()                       # .stop() .freeze() .thaw() .restart()
        cluster.bookies[2].kill9()
        cluster.postgres.stop(); cluster.postgres.start()

The process logic lives in the product package `launch/` (`strata cluster` and `strata perf
failover` use it too); this module is where the tests import it from.
"""

from launch.bookie import BookieProcess
from launch.broker import BrokerProcess
from launch.cluster import LocalCluster
from launch.process import NodeProcess

__all__ = ["BookieProcess", "BrokerProcess", "LocalCluster", "NodeProcess"]
