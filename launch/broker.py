"""`strata broker` as a child process, one member of a local cluster (cluster.py).

    broker = BrokerProcess("broker-1", node_dir, metadata_url, env, port, admin_port, kafka_port)
    broker.launch()                  # waits for `admin URL http://127.0.0.1:<admin_port>`
    broker.service_url, broker.admin_url, broker.broker_id, broker.web_id, broker.kafka_bootstrap

It listens and advertises on loopback (HOST) at the ports it is given; its log is
`<node_dir>/broker.log`. The rest is process.NodeProcess.

What must hold: the ports are fixed for the object's life, so a restart comes back at the same
addresses (clients and the other brokers find it again); it is ready only once it prints its admin
URL, which cli/broker_cmd.py does after the broker has started.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from common.invariant import present
from launch.process import NodeProcess

HOST = "127.0.0.1"


class BrokerProcess(NodeProcess):
    """`strata broker` at HOST:port (Pulsar protocol), HOST:admin_port (admin HTTP) and, when
    kafka_port is given, HOST:kafka_port (Kafka protocol; None: not served).
    data_dir: the node's directory (its log); the broker keeps its state in the metadata store."""

    kind = "broker"

    def __init__(self, name: str, data_dir: Path, metadata_url: str, env: dict[str, str],
                 port: int, admin_port: int, kafka_port: int | None = None, **node: Any) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.metadata_url = metadata_url
        self.port = port
        self.admin_port = admin_port
        self.kafka_port = kafka_port
        super().__init__(name, self.data_dir / "broker.log", env=env, **node)

    @property
    def service_url(self) -> str:
        return f"pulsar://{HOST}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def kafka_bootstrap(self) -> str:
        """host:port of its Kafka listener (Kafka clients' bootstrap.servers)."""
        return f"{HOST}:{present(self.kafka_port, 'the broker serves Kafka')}"

    @property
    def broker_id(self) -> str:
        """host:pulsarPort, the address its binary protocol listens on."""
        return f"{HOST}:{self.port}"

    @property
    def web_id(self) -> str:
        """host:webPort, the name under /loadbalance/brokers and in `brokers list`."""
        return f"{HOST}:{self.admin_port}"

    @property
    def ready_marker(self) -> str:
        return f"admin URL {self.admin_url}"

    def brief_details(self) -> dict[str, Any]:
        return {"port": self.port, "admin_port": self.admin_port, "kafka_port": self.kafka_port}

    def command(self) -> list[str]:
        kafka = [] if self.kafka_port is None else ["--kafka-port", str(self.kafka_port)]
        return [sys.executable, "-m", "cli.main", "broker", "--metadata-url", self.metadata_url,
                "--port", str(self.port), "--admin-port", str(self.admin_port),
                "--advertised-host", HOST, *kafka]
