"""compose.yaml is for users with Docker; here it is checked with a parser, not run."""

from pathlib import Path

import yaml

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
