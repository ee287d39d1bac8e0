"""Fixtures for the cluster acceptance tests: a real cluster of separate processes (PostgreSQL,
bookies, 2 brokers; tests.support.cluster_proc) and the official client.

- `cluster`: one per test module, for tests that leave every process running (lookup, admin
  redirects, bad input); tests isolate themselves with unique topic and namespace names.
- `new_cluster`: a factory for tests that kill, stop, freeze or restart something; each call
  starts a cluster of its own, stopped at the end of the test.

Leases are short (LEASE_MS, through STRATA_METADATA_SESSION_LEASE_MS) so failover tests take
seconds; load reports come every second so placement sees every broker. Two bookies at 2/2/2 keep
the machine's two cores for the brokers (no test here kills a bookie).

A broker log with a Traceback fails the module that used the shared `cluster`: an unexpected
exception in a broker is a finding even when the client-side outcome looked right. With
`new_cluster` (processes killed on purpose) tracebacks are printed, not failed on.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.helpers import MetadataView
from tests.support.cluster_proc import LocalCluster

LEASE_MS = 3000
LEASE_S = LEASE_MS / 1000
CLUSTER_ENV = {"STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "1000"}

_ids = itertools.count()


def start_cluster(data_dir: Path, brokers: int = 2, env: dict[str, str] | None = None) -> LocalCluster:
    return LocalCluster.start(data_dir, brokers=brokers, bookies=2, e=2, qw=2, qa=2, lease_ms=LEASE_MS,
                              env={**CLUSTER_ENV, **(env or {})})


def broker_tracebacks(cluster: LocalCluster) -> list[str]:
    found = []
    for broker in cluster.brokers:
        text = broker.log_path.read_text(errors="replace") if broker.log_path.exists() else ""
        if "Traceback" in text:
            at = text.index("Traceback")
            found.append(f"{broker.name}:\n{text[max(0, at - 500):at + 3000]}")
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster") / "c")
    try:
        yield c
        problems = broker_tracebacks(c)
    finally:
        c.stop()
    assert not problems, "a broker logged a traceback:\n" + "\n".join(problems)


@pytest.fixture
def new_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def make(**kwargs: object) -> LocalCluster:
        c = start_cluster(tmp_path / f"c{len(started)}", **kwargs)  # type: ignore[arg-type]
        started.append(c)
        return c

    try:
        yield make
        for problem in (p for c in started for p in broker_tracebacks(c)):
            print(f"broker traceback (processes were killed on purpose):\n{problem}")
    finally:
        for c in started:
            c.stop()


@pytest.fixture
def metadata(cluster: LocalCluster) -> Iterator[MetadataView]:
    view = MetadataView(cluster.metadata_url)
    yield view
    view.close()


def unique(prefix: str) -> str:
    """A name no other test in this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_ids)}"
