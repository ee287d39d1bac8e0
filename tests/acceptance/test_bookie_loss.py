"""Losing a bookie does not stop writes: `strata standalone --bookies 3` (defaults, as a new user
runs it) under load from the official client, kill -9 of a bookie that holds the topic's
current ledger.

Checked: production resumes within 2 s of the kill (the first ack of a message sent after it,
and the longest gap between consecutive acks); no send fails; every acknowledged message is
consumed back, in order; and the copies are restored: once the dead bookie's registration
expires, the auditor re-replicates, so every ledger of the topic names only live bookies, at
least Qw of them (ledger metadata), internalStats says `underReplicated: false` and /metrics
`strata_ledgers_under_replicated 0`. The time from the kill to the first acked publish after it
is printed (`bookie_failover_s`).
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path

import pulsar

from admin_client import request, request_json
from ledger.ledger_metadata import LedgerMetadata, ledger_path
from ledger.placement import AVAILABLE_PATH
from metadata import open_store
from tests.acceptance.conftest import make_client
from tests.support.standalone_proc import StandaloneProcess

TOPIC = "persistent://public/default/bookie-loss"
SEND_PERIOD_S = 0.002          # one send every 2 ms: ~500 messages/s, steady
BEFORE_KILL = 1_500            # messages acknowledged before the kill
AFTER_KILL_S = 6.0             # keep producing this long after the kill
RESUME_BOUND_S = 2.0
RESTORE_BOUND_S = 90.0         # lease (10 s) + the auditor's reaction + copying, with room for a loaded box


def _http_json(url: str) -> dict:
    return request_json("GET", url, timeout_s=20)


def _bookie_pids(data_dir: Path) -> dict[str, int]:
    """address -> pid of the standalone's bookie processes (children started with --port)."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bookie" in argv and b"--port" in argv and any(str(data_dir).encode() in a for a in argv):
            out[f"127.0.0.1:{int(argv[argv.index(b'--port') + 1])}"] = int(pid)
    return out


class Load:
    """Sends one message every SEND_PERIOD_S from a thread; records (send time, ack time, result)."""

    def __init__(self, producer: pulsar.Producer) -> None:
        self.producer = producer
        self.sent: list[float] = []
        self.acks: dict[int, tuple[float, pulsar.Result]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.sent.append(time.monotonic())
            self.producer.send_async(b"m%06d" % i, lambda res, _mid, i=i: self._acked(i, res))
            i += 1
            time.sleep(SEND_PERIOD_S)

    def _acked(self, i: int, result: pulsar.Result) -> None:
        with self.lock:
            self.acks[i] = (time.monotonic(), result)

    def acked_ok(self) -> int:
        with self.lock:
            return sum(1 for _, r in self.acks.values() if r == pulsar.Result.Ok)


def _wait(predicate, bound_s: float, what: str) -> None:
    deadline = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {bound_s} s waiting for {what}"
        time.sleep(0.1)


def test_kill_9_of_a_bookie_under_load_keeps_producing_and_restores_copies(tmp_path) -> None:
    with StandaloneProcess.start(tmp_path / "data", bookies=3) as sa:
        store = open_store(f"sqlite:///{sa.data_dir / 'metadata.db'}")
        client = make_client(sa.service_url)
        try:
            _run(sa, store, client)
        finally:
            client.close()
            store.close()


def _run(sa: StandaloneProcess, store, client: pulsar.Client) -> None:
    consumer = client.subscribe(TOPIC, "all", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=30_000,
                                      max_pending_messages=20_000, block_if_queue_full=True)
    load = Load(producer)
    load.thread.start()
    _wait(lambda: load.acked_ok() >= BEFORE_KILL, 60, "acks before the kill")

    stats = _http_json(f"{sa.admin_url}/admin/v2/persistent/public/default/bookie-loss/internalStats")
    current = stats["ledgers"][-1]["ledgerId"]
    meta = LedgerMetadata.from_json(store.get(ledger_path(current)).value)
    victim = meta.last_ensemble[0]                 # a bookie the current ledger writes to
    pids = _bookie_pids(sa.data_dir)
    assert len(pids) == 3 and victim in pids
    os.kill(pids[victim], signal.SIGKILL)
    killed_s = time.monotonic()
    time.sleep(AFTER_KILL_S)
    load.stop.set()
    load.thread.join(10)
    total = len(load.sent)
    _wait(lambda: len(load.acks) == total, 40, "every send answered")

    with load.lock:
        results = {r for _, r in load.acks.values()}
        after = [(load.sent[i], t) for i, (t, _) in load.acks.items() if load.sent[i] >= killed_s]
        ack_times = sorted(t for t, _ in load.acks.values())
    assert results == {pulsar.Result.Ok}, f"sends failed: {results}"
    first_after_s = min(t for _, t in after) - killed_s
    print(f"bookie_failover_s={first_after_s:.3f} (first ack of a message sent after the kill)")
    gaps_after = [b - a for a, b in itertools.pairwise(ack_times) if b >= killed_s]
    print(f"longest ack gap after the kill {max(gaps_after):.3f} s, {total} messages")
    assert first_after_s <= RESUME_BOUND_S
    assert max(gaps_after) <= RESUME_BOUND_S

    got = []
    for _ in range(total):                         # nothing acknowledged is lost, order kept
        msg = consumer.receive(15_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == [b"m%06d" % i for i in range(total)]

    def restored() -> bool:
        live = set(store.children(AVAILABLE_PATH))
        if victim in live:
            return False
        stats = _http_json(f"{sa.admin_url}/admin/v2/persistent/public/default/bookie-loss/internalStats")
        for entry in stats["ledgers"]:
            m = LedgerMetadata.from_json(store.get(ledger_path(entry["ledgerId"])).value)
            if not (m.all_bookies() <= live and m.ensemble_size >= m.write_quorum):
                return False
        return not stats["underReplicated"] and not any(e["underReplicated"] for e in stats["ledgers"])
    _wait(restored, RESTORE_BOUND_S, "every ledger back to Qw live copies")
    metrics = request("GET", f"{sa.admin_url}/metrics", timeout_s=20).text()
    assert 'strata_ledgers_under_replicated{cluster="standalone"} 0' in metrics
    rereplicated = [line for line in metrics.splitlines() if line.startswith("strata_ledgers_rereplicated_total")]
    assert rereplicated and float(rereplicated[0].rsplit(" ", 1)[1]) >= 1   # the victim's copies moved
    log = sa.log_path.read_text(errors="replace")
    assert log.count("failed: ") < 50, "repeated warnings are rate-limited"
