"""compose.yaml is for users with Docker; here it is checked with a parser, not run."""

from pathlib import Path

import yaml

from common.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_compose_describes_the_cluster():
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = doc["services"]
    assert {"postgres", "minio", "spark"} <= set(services)
    bookies = [n for n in services if n.startswith("bookie-")]
    brokers = [n for n in services if n.startswith("broker-")]
    assert len(bookies) == 3 and len(brokers) == 2
    for name in bookies + brokers:
        command = services[name]["command"]
        assert command[0] in ("bookie", "broker")
        assert any(arg.startswith("postgresql://") for arg in command)
    for volume in (v.split(":")[0] for s in services.values() for v in s.get("volumes", [])):
        assert volume in doc["volumes"]


def test_compose_wires_minio_as_the_brokers_cold_tier():
    """Brokers offload to MinIO with its root credentials, into the bucket minio-init creates,
    and start only after that bucket exists."""
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    minio_env = services["minio"]["environment"]
    init = services["minio-init"]
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    assert "healthcheck" in services["minio"]
    init_script = " ".join(init["entrypoint"])
    brokers = [n for n in services if n.startswith("broker-")]
    for name in brokers:
        service = services[name]
        env = service["environment"]
        assert env["STRATA_OFFLOAD_DRIVER"] == "s3"
        assert env["STRATA_OFFLOAD_S3_ENDPOINT"] == "http://minio:9000"
        assert f"local/{env['STRATA_OFFLOAD_S3_BUCKET']}" in init_script
        assert env["AWS_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"]
        assert f"{minio_env['MINIO_ROOT_USER']} {minio_env['MINIO_ROOT_PASSWORD']}" in init_script
        assert env["STRATA_LEDGER_WRITE_QUORUM"] == "2"  # the shared settings survive the merge
        assert service["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        config = load_config(None, env={k: str(v) for k, v in env.items()})  # valid settings
        assert config.offload_driver == "s3" and config.offload_s3_bucket == env["STRATA_OFFLOAD_S3_BUCKET"]
    for name in (n for n in services if n.startswith("bookie-")):
        assert "STRATA_OFFLOAD_DRIVER" not in services[name]["environment"]


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_is_the_cluster_strata_cluster_up_starts():
    """Same shape as `strata cluster up`'s defaults: bookie and broker counts, E/Qw/Qa, the
    metadata session lease; each broker advertises its own host and ports (Kafka's too),
    published as is, so a redirect to either broker reaches it."""
    from cli.cluster_cmd import parse_args, quorums

    up = parse_args(["up"])
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    bookies = [n for n in services if n.startswith("bookie-")]
    brokers = [n for n in services if n.startswith("broker-")]
    assert (len(bookies), len(brokers)) == (up.bookies, up.brokers)
    for name in bookies + brokers:
        config = load_config(None, env={k: str(v) for k, v in services[name]["environment"].items()})
        assert (config.ledger_ensemble_size, config.ledger_write_quorum, config.ledger_ack_quorum) == quorums(up)
        assert "STRATA_METADATA_SESSION_LEASE_MS" in services[name]["environment"]
        assert config.metadata_session_lease_ms == load_config(None, env={}).metadata_session_lease_ms
    endpoints = set()
    for name in brokers:
        command = services[name]["command"]
        assert _flag(command, "--advertised-host") == name
        port, admin_port, kafka_port = (_flag(command, "--port"), _flag(command, "--admin-port"),
                                        _flag(command, "--kafka-port"))
        assert sorted(services[name]["ports"]) == sorted([f"{p}:{p}" for p in (port, admin_port, kafka_port)])
        endpoints |= {port, admin_port, kafka_port}
    assert len(endpoints) == 3 * len(brokers)
