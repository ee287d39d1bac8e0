"""The nemesis: faults aimed at one role at a time (and, sometimes, two at once), on a seeded
schedule, each recorded in the history as `fault` when it begins and `heal` when it ends.

    nemesis = Nemesis(cluster, HistoryWriter(out, "nemesis"), random.Random(seed), lease_s=3.0)
    nemesis.run(faults=100)            # or run(duration_s=600)
    nemesis.heal_everything()          # whatever is still broken, mended (idempotent)

The faults, by role (`CATALOGUE`):
- broker: kill -9 then restart; SIGTERM then restart; SIGSTOP past the lease then SIGCONT (a
  frozen owner must write nothing after its lease: the checker's duplicate and order checks see
  it if it did); a clean restart;
- bookie: kill -9 then restart; SIGSTOP then SIGCONT; a full disk (when the cluster can:
  `disk_faults`); a bit flip in one stored entry of one sealed segment (the bookie's CRC must
  catch it and the read go to another copy);
- metadata (PostgreSQL): kill -9 (postmaster and backends) then restart; SIGSTOP longer than the lease;
- s3: stopped then started; SIGSTOP then SIGCONT; `503 SlowDown` from the proxy for a while;
- network (the proxies): one broker from every bookie; one bookie from every broker; one broker
  from PostgreSQL; broker from broker; clients from one broker; each `reset` or `blackhole`;
- combined: two faults of different roles at once.
A run of N faults walks the roles in rounds (each round a seeded shuffle of them), so every role
gets its share however small N is; kinds and targets are drawn from the same seeded generator,
so `--seed` repeats the schedule (the timing of a real cluster, and so its history, still varies).

What must hold: every fault is healed before the next begins (a combined fault heals both);
every wait is bounded; a heal that fails is retried and, failing again, raised (the run then
reports it: a cluster the nemesis cannot mend is a finding, not noise); `heal_everything` never
raises.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bookie.record import HEADER_BYTES, RecordKind, RecordScanner
from chaos.cluster import ChaosCluster
from chaos.history import HistoryWriter

log = logging.getLogger(__name__)

ROLES = ("broker", "bookie", "metadata", "s3", "network", "combined")
PROCESS_ROLES = frozenset({"broker", "bookie"})
GAP_S = (2.0, 5.0)          # quiet time between faults
HEAL_RETRIES = 2

Heal = Callable[[], None]


@dataclass(frozen=True)
class Fault:
    """One fault kind: `begin(nemesis, target) -> heal`, and how long it is held."""
    name: str
    role: str
    targets: Callable[[ChaosCluster], list[str]]
    begin: Callable[[Nemesis, str], Heal]
    hold_s: Callable[[float], tuple[float, float]]   # lease_s -> (min, max)


def _brokers(c: ChaosCluster) -> list[str]:
    return [b.name for b in c.brokers]


def _bookies(c: ChaosCluster) -> list[str]:
    return [b.name for b in c.bookies]


def _one(_c: ChaosCluster) -> list[str]:
    return ["-"]


def _short(_lease: float) -> tuple[float, float]:
    return (1.0, 4.0)


def _past_lease(lease: float) -> tuple[float, float]:
    return (lease + 0.5, lease + 3.0)


def _instant(_lease: float) -> tuple[float, float]:
    return (0.0, 0.0)


# -- brokers and bookies ---------------------------------------------------------------------------

def _kill9(n: Nemesis, target: str) -> Heal:
    node = n.cluster.node(target)
    node.kill9()
    return lambda: node.launch() if node.proc is None else None


def _term(n: Nemesis, target: str) -> Heal:
    node = n.cluster.node(target)
    node.stop()
    return lambda: node.launch() if node.proc is None else None


def _pause(n: Nemesis, target: str) -> Heal:
    node = n.cluster.node(target)
    node.freeze()
    return node.thaw


def _restart(n: Nemesis, target: str) -> Heal:
    """A clean restart: SIGTERM, then started again at once; its heal waits until it serves (not
    the fault's begin: combined with a PostgreSQL fault, the node can only come up after that heals)."""
    node = n.cluster.node(target)
    node.stop()
    node.spawn()
    return node.wait_ready


def _disk_full(n: Nemesis, target: str) -> Heal:
    n.cluster.fill_disk(target)
    return lambda: n.cluster.free_disk(target)


def _bitflip(n: Nemesis, target: str) -> Heal:
    """Flip one bit in the payload of one record of a sealed segment of `target`."""
    flipped = flip_sealed_payload(n.cluster.node(target).data_dir, n.rng)
    n.note(bitflip=flipped)
    return lambda: None


def flip_sealed_payload(data_dir: Path, rng: random.Random) -> str | None:
    """Flip one bit inside a record's payload in a sealed segment (one with its .idx) under
    `data_dir`; where (file:offset), or None when no sealed segment holds a payload yet."""
    sealed = sorted(p for p in (data_dir / "segments").glob("*.seg") if p.with_suffix(".idx").exists())
    rng.shuffle(sealed)
    for path in sealed:
        data = path.read_bytes()
        scanner = RecordScanner(payload_bytes_max=len(data))
        spans = [(r.offset + HEADER_BYTES, len(r.payload)) for r in scanner.feed(data)
                 if r.kind == RecordKind.ADD and r.payload]
        if not spans:
            continue
        start, size = spans[rng.randrange(len(spans))]
        offset = start + rng.randrange(size)
        with open(path, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)[0]
            f.seek(offset)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        return f"{path.name}:{offset}"
    return None


# -- PostgreSQL and S3 -------------------------------------------------------------------------------

def _pg_kill9(n: Nemesis, _target: str) -> Heal:
    n.cluster.postgres_kill9()
    return n.cluster.postgres_start


def _pg_pause(n: Nemesis, _target: str) -> Heal:
    n.cluster.postgres_signal(signal.SIGSTOP)

    def heal() -> None:
        n.cluster.postgres_signal(signal.SIGCONT)
    return heal


def _s3(n: Nemesis) -> Any:
    s3 = n.cluster.s3
    assert s3 is not None, "chaos runs have S3"
    return s3


def _s3_stop(n: Nemesis, _target: str) -> Heal:
    _s3(n).stop()
    return _s3(n).start


def _s3_pause(n: Nemesis, _target: str) -> Heal:
    proc = _s3(n).proc
    proc.send_signal(signal.SIGSTOP)
    return lambda: proc.send_signal(signal.SIGCONT)


def _s3_slowdown(n: Nemesis, _target: str) -> Heal:
    n.cluster.hub.slowdown("s3", True)
    return lambda: n.cluster.hub.slowdown("s3", False)


# -- partitions --------------------------------------------------------------------------------------

def _cut(n: Nemesis, a: set[str], b: set[str]) -> Heal:
    mode = n.rng.choice(("reset", "blackhole"))
    fault_id = n.cluster.hub.partition(a, b, mode=mode)
    n.note(mode=mode, a=sorted(a), b=sorted(b))
    return lambda: n.cluster.hub.heal(fault_id)


def _broker_bookies(n: Nemesis, target: str) -> Heal:
    return _cut(n, {target}, set(_bookies(n.cluster)))


def _bookie_brokers(n: Nemesis, target: str) -> Heal:
    return _cut(n, {target}, set(_brokers(n.cluster)))


def _broker_pg(n: Nemesis, target: str) -> Heal:
    return _cut(n, {target}, {"postgres"})


def _broker_broker(n: Nemesis, target: str) -> Heal:
    return _cut(n, {target}, set(_brokers(n.cluster)) - {target})


def _client_broker(n: Nemesis, target: str) -> Heal:
    return _cut(n, {"client"}, {target})


CATALOGUE: list[Fault] = [
    Fault("broker-kill9", "broker", _brokers, _kill9, _short),
    Fault("broker-term", "broker", _brokers, _term, _short),
    Fault("broker-pause", "broker", _brokers, _pause, _past_lease),
    Fault("broker-restart", "broker", _brokers, _restart, _instant),
    Fault("bookie-kill9", "bookie", _bookies, _kill9, _short),
    Fault("bookie-pause", "bookie", _bookies, _pause, _short),
    Fault("bookie-disk-full", "bookie", _bookies, _disk_full, _short),
    Fault("bookie-bitflip", "bookie", _bookies, _bitflip, _instant),
    Fault("postgres-kill9", "metadata", _one, _pg_kill9, _short),
    Fault("postgres-pause", "metadata", _one, _pg_pause, _past_lease),
    Fault("s3-stop", "s3", _one, _s3_stop, _short),
    Fault("s3-pause", "s3", _one, _s3_pause, _short),
    Fault("s3-slowdown", "s3", _one, _s3_slowdown, _short),
    Fault("partition-broker-bookies", "network", _brokers, _broker_bookies, _short),
    Fault("partition-bookie-brokers", "network", _bookies, _bookie_brokers, _short),
    Fault("partition-broker-postgres", "network", _brokers, _broker_pg, _past_lease),
    Fault("partition-broker-broker", "network", _brokers, _broker_broker, _short),
    Fault("partition-client-broker", "network", _brokers, _client_broker, _short),
]


class Nemesis:
    """Runs the schedule against `cluster`, writing `fault`/`heal` records to `history`."""

    def __init__(self, cluster: ChaosCluster, history: HistoryWriter, rng: random.Random, *,
                 lease_s: float, kinds: set[str] | None = None) -> None:
        self.cluster = cluster
        self.history = history
        self.rng = rng
        self.lease_s = lease_s
        self.catalogue = [f for f in CATALOGUE if self._offered(f) and (kinds is None or f.name in kinds
                                                                       or f.role in kinds)]
        self._open: dict[int, tuple[Fault, str, Heal]] = {}
        self._ids = 0
        self._notes: dict[str, Any] = {}
        self.count = 0

    def _offered(self, fault: Fault) -> bool:
        if fault.name == "bookie-disk-full":
            return self.cluster.disk_faults
        if fault.name == "partition-broker-broker":
            return len(self.cluster.brokers) > 1
        return True

    def note(self, **fields: Any) -> None:
        """Details a fault adds to its `fault` record (a partition's mode, a bit flip's place)."""
        self._notes.update(fields)

    def roles(self) -> list[str]:
        return [r for r in ROLES if r == "combined" or any(f.role == r for f in self.catalogue)]

    def schedule(self, faults: int) -> list[str]:
        """The role of each of `faults` faults: rounds of a seeded shuffle of the roles."""
        out: list[str] = []
        while len(out) < faults:
            round_ = self.roles()
            self.rng.shuffle(round_)
            out.extend(round_)
        return out[:faults]

    def run(self, *, faults: int | None = None, duration_s: float | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> int:
        """Inject faults until `faults` were injected or `duration_s` passed; the count."""
        deadline = time.monotonic() + duration_s if duration_s is not None else float("inf")
        plan = self.schedule(faults if faults is not None else 1_000_000)
        for role in plan:
            if time.monotonic() >= deadline or should_stop():
                break
            self.one(role)
            time.sleep(self.rng.uniform(*GAP_S))
        return self.count

    def one(self, role: str) -> None:
        """One fault of `role` (two, of different roles, for `combined`): begin, hold, heal."""
        if role == "combined":
            first, second = self.rng.sample([r for r in self.roles() if r != "combined"], 2)
            kinds = [self._pick(first), self._pick(second)]
        else:
            kinds = [self._pick(role)]
        opened = [fault_id for fault, target in kinds if (fault_id := self._try_begin(fault, target)) is not None]
        hold = max(self.rng.uniform(*fault.hold_s(self.lease_s)) for fault, _ in kinds)   # drawn always: same schedule
        time.sleep(hold)
        # the surroundings first (network, PostgreSQL, S3), then processes: a broker restarted
        # while still cut from PostgreSQL would only exit again
        for fault_id in sorted(opened, key=lambda i: self._open[i][0].role in PROCESS_ROLES):
            self._heal(fault_id)
        self.revive()
        self.count += 1

    def revive(self) -> list[str]:
        """Start again any node that is not running once every fault is healed (it exited by
        itself, or a fault could not finish), recording it
        as a spontaneous fault: a node dying on its own is a finding, and what followed is judged."""
        revived = []
        for node in self.cluster.nodes():
            if node.proc is not None and node.proc.poll() is None:
                continue
            self._ids += 1
            code = node.proc.returncode if node.proc is not None else None
            self.history.write("fault", fault="node-exited", role=node.kind, target=node.name, id=self._ids,
                               spontaneous=True, exit_code=code, log_tail=node.log_tail()[-1500:])
            log.warning("%s exited by itself (code %s); starting it again", node.name, code)
            node.proc = None
            node.launch()
            self.history.write("heal", fault="node-exited", role=node.kind, target=node.name, id=self._ids)
            revived.append(node.name)
        return revived

    def _pick(self, role: str) -> tuple[Fault, str]:
        fault = self.rng.choice([f for f in self.catalogue if f.role == role])
        return fault, self.rng.choice(fault.targets(self.cluster))

    def _try_begin(self, fault: Fault, target: str) -> int | None:
        """`_begin`, or None when the fault could not be injected (recorded, and the run goes on:
        the nemesis failing to act is not a finding about the cluster, but it is reported)."""
        try:
            return self._begin(fault, target)
        except Exception as exc:
            log.warning("could not begin %s on %s: %r", fault.name, target, exc)
            self.history.write("nemesis-error", fault=fault.name, role=fault.role, target=target, error=repr(exc))
            return None

    def _begin(self, fault: Fault, target: str) -> int:
        self._ids += 1
        self._notes = {}
        log.info("fault %d: %s on %s", self._ids, fault.name, target)
        began = time.time()
        heal = fault.begin(self, target)
        self.history.write_at(began, "fault", fault=fault.name, role=fault.role, target=target, id=self._ids,
                              **self._notes)
        self._open[self._ids] = (fault, target, heal)
        return self._ids

    def _heal(self, fault_id: int) -> None:
        fault, target, heal = self._open.pop(fault_id)
        for attempt in range(HEAL_RETRIES + 1):
            try:
                heal()
                break
            except Exception:
                if attempt == HEAL_RETRIES:
                    raise
                log.warning("heal of %s on %s failed; again", fault.name, target, exc_info=True)
                time.sleep(1.0)
        self.history.write("heal", fault=fault.name, role=fault.role, target=target, id=fault_id)

    def heal_everything(self) -> None:
        """Mend whatever is broken: open faults, partitions, frozen or dead nodes, PostgreSQL, S3."""
        for fault_id in list(self._open):
            with contextlib.suppress(Exception):
                self._heal(fault_id)
        c = self.cluster
        with contextlib.suppress(Exception):
            c.hub.heal_all()
        with contextlib.suppress(Exception):
            c.postgres_signal(signal.SIGCONT)
        with contextlib.suppress(Exception):
            if not c._pg().running:
                c.postgres_start()
        s3 = c.s3
        if s3 is not None:
            with contextlib.suppress(Exception):
                if s3.proc is not None:
                    s3.proc.send_signal(signal.SIGCONT)
                else:
                    s3.start()
        for node in c.nodes():
            with contextlib.suppress(Exception):
                node.thaw()
                if node.proc is None:
                    node.launch()
        with contextlib.suppress(Exception):
            self.revive()
        for bookie in c.bookies:
            with contextlib.suppress(Exception):
                c.free_disk(bookie.name)
