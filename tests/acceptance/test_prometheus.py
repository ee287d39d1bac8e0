"""A real Prometheus (the Debian package's binary) scrapes a standalone's broker and bookie.

A topic is left with a backlog on two subscriptions (25 and 15 entries); Prometheus scrapes the
broker's `/metrics` and the bookie's (`bookie_metrics_ports` in the standalone's state file) every
second, and its HTTP API must answer `pulsar_msg_backlog` for the topic with exactly the sum of
the admin stats' subscriptions' `msgBacklog` (Pulsar's: the topic's total backlog, not its
largest), `pulsar_subscription_back_log` with each one's, `pulsar_storage_size` with
`storageSize`, and bookie metrics (journal fsyncs, disk use) too.

The Grafana dashboard (monitoring/grafana/strata.json) is checked against the same live
exporters: every metric its PromQL names is one a broker or a bookie exports, and Prometheus
accepts every expression.

Without a `prometheus` binary the tests fail (never skip), as the PostgreSQL, SeaweedFS and Spark
fixtures do: `make setup` installs it (scripts/install-debian-deps.sh, re-run whenever that script
changes).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from admin_client import request_json
from tests.acceptance.conftest import make_client
from tests.support.admin_http import metrics
from tests.support.promql import metric_names
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess, free_port

PROMETHEUS = shutil.which("prometheus")

TOPIC = "persistent://public/default/prometheus-backlog"
MESSAGES = 25
CONSUMED = 10               # acked on subscription `half`, so its backlog is MESSAGES - CONSUMED
READY_BOUND_S = 30.0        # prometheus answering /-/ready
SCRAPED_BOUND_S = 60.0      # the first scrapes carrying our topic have landed
DASHBOARD = REPO_ROOT / "monitoring" / "grafana" / "strata.json"


def _get(url: str, timeout_s: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.read()


class Prometheus:
    """A prometheus server on a free loopback port, scraping `targets` (job -> host:port) every 1 s."""

    def __init__(self, work_dir: Path, targets: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                                     for job, target in targets.items()]}
        config_path = work_dir / "prometheus.yml"
        config_path.write_text(json.dumps(config))       # JSON is YAML
        self.log_path = work_dir / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(PROMETHEUS), f"--config.file={config_path}", f"--storage.tsdb.path={work_dir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_BOUND_S
        while True:
            assert self.proc.poll() is None, f"prometheus exited: {self.log_path.read_text()[-2000:]}"
            try:
                if _get(self.url + "/-/ready", 2.0):
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus never became ready"
            time.sleep(0.2)

    def query(self, expr: str) -> dict:
        doc = json.loads(_get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert doc["status"] == "success", doc
        return doc["data"]

    def value(self, expr: str) -> float | None:
        """The value of a one-series instant query; None while there is no series yet."""
        result = self.query(expr)["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bookie_metrics_target(sa: StandaloneProcess) -> str:
    state = json.loads((sa.data_dir / "standalone.json").read_text())
    return f"127.0.0.1:{state['bookie_metrics_ports'][0]}"


@pytest.fixture(scope="module")
def backlog(standalone: StandaloneProcess) -> dict:
    """TOPIC with MESSAGES unconsumed on subscription `idle` and MESSAGES - CONSUMED on `half`;
    returns its admin stats once both backlogs are settled."""
    client = make_client(standalone.service_url)
    try:
        client.subscribe(TOPIC, "idle").close()
        half = client.subscribe(TOPIC, "half")
        producer = client.create_producer(TOPIC, batching_enabled=False)
        for i in range(MESSAGES):
            producer.send(f"message {i}".encode() * 20)
        producer.close()
        for _ in range(CONSUMED):
            half.acknowledge(half.receive(10_000))
        half.close()
    finally:
        client.close()
    local = TOPIC.split("://", 1)[1]
    deadline = time.monotonic() + SCRAPED_BOUND_S
    while True:
        stats = request_json("GET", f"{standalone.admin_url}/admin/v2/persistent/{local}/stats")
        if stats["subscriptions"]["half"]["msgBacklog"] == MESSAGES - CONSUMED:
            return stats
        assert time.monotonic() < deadline, f"the acks never showed in the stats: {stats}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def prometheus(standalone: StandaloneProcess, backlog: dict, tmp_path_factory: pytest.TempPathFactory):
    if PROMETHEUS is None:
        pytest.fail("no prometheus binary: `make setup` installs the Debian package "
                    "(scripts/install-debian-deps.sh)")
    admin = standalone.admin_url.split("://", 1)[1]
    server = Prometheus(tmp_path_factory.mktemp("prometheus"),
                        {"broker": admin, "bookie": bookie_metrics_target(standalone)})
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _wait_value(prom: Prometheus, expr: str) -> float:
    deadline = time.monotonic() + SCRAPED_BOUND_S
    while True:
        value = prom.value(expr)
        if value is not None:
            return value
        assert time.monotonic() < deadline, f"no series for {expr} after {SCRAPED_BOUND_S} s"
        time.sleep(0.5)


def test_backlog_and_storage_through_prometheus_match_admin_stats(prometheus: Prometheus, backlog: dict) -> None:
    subs = backlog["subscriptions"]
    assert subs["idle"]["msgBacklog"] == MESSAGES and backlog["storageSize"] > 0
    total = sum(sub["msgBacklog"] for sub in subs.values())
    assert total == 2 * MESSAGES - CONSUMED and backlog["msgBacklog"] == total
    selector = f'{{topic="{TOPIC}"}}'
    assert _wait_value(prometheus, "pulsar_msg_backlog" + selector) == total
    assert _wait_value(prometheus, "pulsar_storage_size" + selector) == backlog["storageSize"]
    assert _wait_value(prometheus, "pulsar_storage_backlog_size" + selector) == backlog["backlogSize"]
    for name, sub in subs.items():
        labels = f'{{topic="{TOPIC}",subscription="{name}"}}'
        assert _wait_value(prometheus, "pulsar_subscription_back_log" + labels) == sub["msgBacklog"]
    assert _wait_value(prometheus, "pulsar_in_messages_total" + selector) == backlog["msgInCounter"]


def test_bookie_metrics_through_prometheus(prometheus: Prometheus) -> None:
    assert _wait_value(prometheus, 'up{job="bookie"}') == 1
    assert _wait_value(prometheus, 'bookie_journal_JOURNAL_SYNC_count{job="bookie"}') >= 1
    assert _wait_value(prometheus, 'bookie_entries_written_total{job="bookie"}') >= MESSAGES
    assert _wait_value(prometheus, 'bookie_disk_used_bytes{job="bookie"}') > 0
    assert _wait_value(prometheus, 'process_resident_memory_bytes{job="bookie"}') > 0


# --- the Grafana dashboard -----------------------------------------------------------------------

def dashboard_queries() -> list[str]:
    """Every panel target's expression and every templating query of the dashboard."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            assert inner, query
            exprs.append(inner.group(1))
    return exprs


def _exported(text: str) -> set[str]:
    return {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and line[0] != "#"}


def test_dashboard_names_only_exported_metrics(standalone: StandaloneProcess, prometheus: Prometheus) -> None:
    exported = _exported(metrics(standalone.admin_url))
    exported |= _exported(_get(f"http://{bookie_metrics_target(standalone)}/metrics", 20).decode())
    exprs = dashboard_queries()
    assert len(exprs) >= 20
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert {p["title"] for p in panels} >= {"Messages in / out", "Backlog (entries)", "Storage vs backlog (bytes)",
                                            "Managed ledger append latency", "Process CPU", "Bookie disk"}
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, (expr, names - exported)
        concrete = (expr.replace("$__rate_interval", "1m").replace("$namespace", ".*").replace("$topic", ".*"))
        prometheus.query(concrete)          # Prometheus parses and runs it ("success")

