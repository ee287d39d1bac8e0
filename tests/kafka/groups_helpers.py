"""Consumer-group members for the group tests, each in a process of its own (so a test can kill -9
one), and the checks of what a group consumed.

    spec = member_spec(bootstrap, topic, group, "c0")                 # settings every member takes
    m = Member.start("confluent", spec, tmp_path)                      # also kafka-python, aiokafka, kafkajs
    k = KcatMember.start_kcat(bootstrap, topic, group, "k0", tmp_path)  # kcat -G
    owned = wait_assigned([m, ...], partitions=6)                      # disjoint, covering, none empty
    m.close(); m.kill9()
    check_delivery([m, ...], trickle.produced())                       # what the group read, vs what was acked

A member (`run_member` here for the Python clients, js/group.js for kafkajs) subscribes to one topic
with auto commit off; after each batch it processed it commits exactly what it processed, synchronously
(OffsetCommit, with a metadata string when `metadata` is set), and it reports everything as one JSON
line on stdout:
    {"ev": "assigned"|"revoked"|"lost", "t", "changed": [p, ...], "owned": [p, ...]}
    {"ev": "records", "t", "recs": [[partition, offset, key], ...]}
    {"ev": "committed", "t", "offsets": {"p": next offset}, "metadata": {"p": text}}
    {"ev": "commit_failed", "t", "error"}, {"ev": "client_error", "t", "error"}, {"ev": "closed", "t"}
`t` is the member's CLOCK_MONOTONIC (time.monotonic; Node's process.hrtime): one clock for every
process of the machine, so the events of different members can be ordered. A line "close" on its
stdin (or stdin closing: the test went away) makes it leave the group and exit 0; so does having
processed `limit` records.

The delivery rule checked (`check_delivery`): every acknowledged record was read by the group; each
member reads a partition it was given in order, without gaps or repeats; and when it starts on a
partition, it starts at or after every offset committed for that partition before it was given it
(a record is read twice only if it came after the last commit: at-least-once, no more).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).parent / "js"
CALL_TIMEOUT_S = 20.0
CLOSE_BOUND_S = 40.0                 # a member leaves the group and exits within this
MEMBER_BOUND_MS = 300_000            # a member process never outlives this (a test forgot it)
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kafkajs")


def member_spec(bootstrap: str, topic: str, group: str, name: str, **extra: Any) -> dict[str, Any]:
    """A member's settings: short sessions (the broker's minimum is 6 s) and rebalance timeouts, so a
    crash or a rebalance is seen in seconds; `assignor` is the client's own name for its strategy
    (None: the client's default), `instance_id` makes it a static member."""
    spec: dict[str, Any] = {"bootstrap": bootstrap, "topic": topic, "group": group, "name": name,
                            "session_ms": 6000, "heartbeat_ms": 500, "max_poll_ms": 20_000, "assignor": None,
                            "instance_id": None, "batch": 50, "limit": None, "metadata": None,
                            "bound_ms": MEMBER_BOUND_MS}
    spec.update(extra)
    return spec


# --- the member processes ---------------------------------------------------------------------------

class Member:
    """One member process; its events as they arrive (a reader thread), its fate."""

    ordered_events = True       # its events are in the order it did things (one stream, its own clock)
    stderr_events = False       # it reports some events on stderr (read here, copied to the log)

    def __init__(self, name: str, client: str, cmd: list[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        from launch.parent_death import spawn

        self.name = name
        self.client = client
        self.events: list[dict[str, Any]] = []
        self.log_path = log_path
        self._log = open(log_path, "ab")    # closed when the process is reaped
        self.proc = spawn(cmd, on_parent_death=signal.SIGKILL, stdout=subprocess.PIPE, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL if self.stderr_events else subprocess.PIPE,
                          stderr=subprocess.PIPE if self.stderr_events else self._log)
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True)]
        if self.stderr_events:
            self._readers.append(threading.Thread(target=self._read_stderr, daemon=True))
        for reader in self._readers:
            reader.start()

    @classmethod
    def start(cls, client: str, spec: dict[str, Any], directory: Path) -> Member:
        name = spec["name"]
        log = directory / f"member-{name}.log"
        if client == "kafkajs":
            node = shutil.which("node")
            assert node is not None, "node is not installed: run `make setup`"
            assert (JS_DIR / "node_modules" / "kafkajs").exists(), "kafkajs is not installed: run `make setup`"
            return cls(name, client, [node, str(JS_DIR / "group.js"), json.dumps({"action": "member", **spec})],
                       log, env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}, cwd=JS_DIR)
        assert client in CLIENTS, client
        return cls(name, client, [sys.executable, "-m", "tests.kafka.groups_helpers",
                                  json.dumps({**spec, "client": client})], log, cwd=REPO_ROOT)

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"ev": "raw", "t": time.monotonic(), "line": line.decode(errors="replace").rstrip()}
            self.events.append(event)

    # --- what it did -----------------------------------------------------------------------------

    def _read_stderr(self) -> None:
        raise NotImplementedError

    def of(self, ev: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["ev"] == ev]

    def owned(self) -> frozenset[int] | None:
        """Its partitions after its last assignment change (None before the first)."""
        changes = [e for e in list(self.events) if e["ev"] in ("assigned", "revoked", "lost")]
        return frozenset(changes[-1]["owned"]) if changes else None

    def records(self) -> list[tuple[int, int, str | None]]:
        return [(int(p), int(o), k) for e in self.of("records") for p, o, k in e["recs"]]

    def commits(self) -> list[tuple[float, int, int, str]]:
        """(time, partition, next offset, metadata) of each commit it saw succeed."""
        return [(e["t"], int(p), int(o), str((e.get("metadata") or {}).get(p) or ""))
                for e in self.of("committed") for p, o in e["offsets"].items()]

    def last_commits(self) -> dict[int, tuple[int, str]]:
        out: dict[int, tuple[int, str]] = {}
        for _t, p, o, meta in self.commits():
            out[p] = (o, meta)
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        tail = self.log_path.read_text(errors="replace")[-1500:] if self.log_path.exists() else ""
        interesting = [e for e in list(self.events) if e["ev"] != "records"][-12:]
        return (f"--- {self.name} ({self.client}, exit {self.proc.poll()}), {len(self.records())} records; "
                f"last events {interesting}\n    stderr tail: {tail}")

    # --- ending it ---------------------------------------------------------------------------------

    def close(self, bound_s: float = CLOSE_BOUND_S) -> None:
        """Ask it to leave the group and exit (bounded); it must exit 0 having said "closed"."""
        self._ask_to_close()
        try:
            self.proc.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.name} did not close within {bound_s} s:\n{self.describe()}") from None
        self._reap()
        assert self.proc.returncode == 0 and self.of("closed"), f"{self.name} did not close cleanly:\n{self.describe()}"

    def wait_closed(self, bound_s: float = CLOSE_BOUND_S) -> None:
        """It exits on its own (a `limit` reached): exit 0, having left the group."""
        try:
            self.proc.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.name} did not finish within {bound_s} s:\n{self.describe()}") from None
        self._reap()
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}:\n{self.describe()}"
        assert self.client == "kcat" or self.of("closed"), f"{self.name} did not close:\n{self.describe()}"

    def _ask_to_close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"close\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def kill9(self) -> None:
        """SIGKILL: no LeaveGroup, no last commit; the group sees it only when its session passes."""
        self.proc.kill()
        self.proc.wait(10)
        self._reap()

    def _reap(self) -> None:
        for reader in self._readers:
            reader.join(5)
        self._log.close()

    def stop(self) -> None:
        """Cleanup: close if still running, kill if that takes too long (never fails)."""
        if self.alive():
            self._ask_to_close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reap()


class KcatMember(Member):
    """`kcat -G <group> <topic>`: librdkafka's balanced consumer with auto commit (every 500 ms, on
    rebalance and on close). It prints records as JSON (`-J -u`: one line each, unbuffered) and its
    rebalances on stderr ("assigned: t [0], t [2]" / "revoked: ..."), which are read as events
    (their time is when the line arrived here). It has no commit events: its commits are read with
    OffsetFetch (`committed`). SIGTERM makes it commit, leave the group and exit 0; but a record it
    polled just after the signal is dropped unprinted (its consume callback returns once told to
    stop) while librdkafka already stored its offset, which the close commits: a kcat bug, so a test
    stops kcat only while no records are coming."""

    ordered_events = False      # records (stdout) and rebalances (stderr) come on two pipes
    stderr_events = True
    ASSIGNMENT = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$")

    @classmethod
    def start_kcat(cls, bootstrap: str, topic: str, group: str, name: str, directory: Path,
                   extra: list[str] | None = None) -> KcatMember:
        kcat = shutil.which("kcat")
        assert kcat is not None, "kcat is not installed: run `make setup`"
        cmd = [kcat, "-b", bootstrap, "-G", group, "-J", "-u", "-X", f"client.id={name}",
               "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
               "-X", "heartbeat.interval.ms=500", "-X", "max.poll.interval.ms=20000",
               "-X", "auto.commit.interval.ms=500", *(extra or []), topic]
        return cls(name, "kcat", cmd, directory / f"member-{name}.log")

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            try:
                d = json.loads(line)
                self.events.append({"ev": "records", "t": now, "recs": [[d["partition"], d["offset"], d["key"]]]})
            except (ValueError, KeyError):
                self.events.append({"ev": "raw", "t": now, "line": line.decode(errors="replace").rstrip()})

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode(errors="replace").rstrip()
            if "Reached end of topic" in text:        # one a record (kcat turns partition EOF on): noise
                continue
            self._log.write(line)
            self._log.flush()
            found = self.ASSIGNMENT.search(text)
            if found is None:
                continue
            changed = sorted(int(p) for p in re.findall(r"\[(\d+)\]", found.group(2)))
            if found.group(1) == "assigned":
                self.events.append({"ev": "assigned", "t": time.monotonic(), "changed": changed, "owned": changed})
            else:
                self.events.append({"ev": "revoked", "t": time.monotonic(), "changed": changed, "owned": []})

    def close(self, bound_s: float = CLOSE_BOUND_S) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.name} did not exit within {bound_s} s of SIGTERM:\n"
                                 f"{self.describe()}") from None
        self._reap()
        assert self.proc.returncode == 0, f"kcat {self.name} exited {self.proc.returncode}:\n{self.describe()}"

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reap()


# --- waiting on a group -------------------------------------------------------------------------------

def _details(members: list[Member]) -> str:
    return "\n".join(m.describe() for m in members)


def wait_assigned(members: list[Member], partitions: int, bound_s: float, what: str = "") -> dict[str, frozenset[int]]:
    """Until the members' current assignments are disjoint, none empty, and cover 0..partitions-1;
    those assignments. A member that exits meanwhile fails it at once."""
    from tests.support.waiting import wait_until

    def settled() -> dict[str, frozenset[int]] | None:
        for m in members:
            if not m.alive():
                raise AssertionError(f"{what}: {m.name} exited while waiting for the assignment:\n{_details(members)}")
        owned = {m.name: m.owned() for m in members}
        if any(not o for o in owned.values()):
            return None
        flat = sorted(p for o in owned.values() for p in o or ())
        return owned if flat == list(range(partitions)) else None

    try:
        return wait_until(settled, bound_s, what=f"{what}: {len(members)} members sharing {partitions} partitions")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_details(members)}") from None


def consumed(members: list[Member]) -> set[tuple[int, int]]:
    return {(p, o) for m in members for p, o, _k in m.records()}


def wait_consumed(members: list[Member], target: set[tuple[int, int]], bound_s: float, what: str = "") -> None:
    """Until the members together have read every (partition, offset) of `target`."""
    from tests.support.waiting import wait_until

    try:
        wait_until(lambda: target <= consumed(members), bound_s, what=f"{what}: {len(target)} records read")
    except AssertionError as e:
        missing = sorted(target - consumed(members))
        raise AssertionError(f"{e}; missing {len(missing)}, e.g. {missing[:10]}\n{_details(members)}") from None


# --- the delivery rule -------------------------------------------------------------------------------

@dataclass
class Session:
    """A member's turn on one partition: from the assignment that gave it the partition on (for a
    member whose events are not ordered, kcat: its whole life, `since` 0)."""

    member: str
    partition: int
    since: float
    contiguous: bool = True         # read without gaps (a kcat member may have lost it in between)
    offsets: list[int] = field(default_factory=list)


def _sessions(m: Member, problems: list[str]) -> list[Session]:
    sessions: list[Session] = []
    current: dict[int, Session] = {}
    for e in list(m.events):
        if e["ev"] == "assigned" and m.ordered_events:
            for p in e["changed"]:
                current[int(p)] = Session(m.name, int(p), float(e["t"]))
                sessions.append(current[int(p)])
        elif e["ev"] == "records":
            for p, o, _key in e["recs"]:
                p, o = int(p), int(o)
                if not m.ordered_events and p not in current:
                    current[p] = Session(m.name, p, 0.0, contiguous=False)
                    sessions.append(current[p])
                if p not in current:
                    problems.append(f"{m.name} read partition {p} offset {o} without ever being given it")
                    continue
                current[p].offsets.append(o)
    return sessions


def check_delivery(members: list[Member], produced: dict[tuple[int, int], str | None], what: str = "",
                   exactly_once: bool = False) -> dict[str, int]:
    """The group read every acknowledged record of `produced` ((partition, offset) -> key), nothing
    else, each with its key; each member read each partition it was given in order, without gap or
    repeat; and each such turn started at or after every offset committed (and acknowledged to a
    member) for that partition before the turn began: a record is read twice only when it came after
    the last commit. exactly_once: no record read twice at all. Counts for the test's report."""
    commits = sorted((t, p, o) for m in members for t, p, o, _meta in m.commits())
    problems: list[str] = []
    reads: Counter[tuple[int, int]] = Counter()
    for m in members:
        for p, o, key in m.records():
            reads[(p, o)] += 1
            if (p, o) not in produced:
                problems.append(f"{m.name} read partition {p} offset {o}, which was never acknowledged")
            elif produced[(p, o)] != key:
                problems.append(f"{m.name} read key {key!r} at {p}/{o}, acknowledged with {produced[(p, o)]!r}")
    sessions = [s for m in members for s in _sessions(m, problems)]
    for s in sessions:
        if not s.offsets:
            continue
        in_order = (s.offsets == list(range(s.offsets[0], s.offsets[0] + len(s.offsets))) if s.contiguous
                    else all(a < b for a, b in zip(s.offsets, s.offsets[1:])))
        if not in_order:
            problems.append(f"{s.member} read partition {s.partition} out of order, repeated or with a gap: "
                            f"{s.offsets[:30]}")
        floor = max((o for t, p, o in commits if p == s.partition and t < s.since), default=0)
        if s.offsets[0] < floor:
            problems.append(f"{s.member} started partition {s.partition} at {s.offsets[0]} though {floor} had "
                            f"been committed (and acknowledged) before it was given the partition")
    missing = sorted(set(produced) - set(reads))
    if missing:
        problems.append(f"{len(missing)} acknowledged records never read by the group, e.g. {missing[:10]}")
    twice = sorted(k for k, n in reads.items() if n > 1)
    if exactly_once and twice:
        problems.append(f"{len(twice)} records read more than once, e.g. {twice[:10]}")
    assert not problems, f"{what}:\n  " + "\n  ".join(problems[:20]) + f"\n{_details(members)}"
    return {"produced": len(produced), "read": sum(reads.values()), "read_twice": len(twice),
            "turns": len(sessions), "commits": len(commits)}


# --- producing ----------------------------------------------------------------------------------------

class Trickle:
    """A confluent-kafka producer (acks=all) sending record n (key `k<n>`) to partition n % partitions,
    `rate` a second, from a thread, until stopped; paused, it sends nothing. `produced()`: the
    (partition, offset) -> key of every acknowledged record so far."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 100.0,
                 idempotent: bool = False) -> None:
        from confluent_kafka import Producer

        self.topic, self.partitions, self.interval_s = topic, partitions, 1.0 / rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "enable.idempotence": idempotent, "message.timeout.ms": 60_000,
                                  "socket.timeout.ms": 10_000})
        self._acked: dict[tuple[int, int], str | None] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._sent = 0
        self._sending = threading.Lock()         # held by the thread while it sends one record
        self._thread: threading.Thread | None = None

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        key = msg.key()
        with self._lock:
            self._acked[(msg.partition(), msg.offset())] = None if key is None else key.decode()

    def send(self, count: int) -> None:
        for _ in range(count):
            n = self._sent
            self._sent += 1
            self.producer.produce(self.topic, key=f"k{n}".encode(), value=f"v{n}".encode(),
                                  partition=n % self.partitions, on_delivery=self._cb)
            self.producer.poll(0)

    def flush(self, bound_s: float = 60.0) -> None:
        left = self.producer.flush(bound_s)
        assert left == 0 and not self.errors, \
            f"{left} records unacknowledged after {bound_s} s; errors {self.errors[:5]}"

    def start(self) -> Trickle:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._sending:
                if not self._paused.is_set():
                    self.send(1)
            self.producer.poll(0)
            self._stop.wait(self.interval_s)

    def pause(self) -> None:
        """Stop sending and wait for everything sent to be acknowledged."""
        self._paused.set()
        with self._sending:                  # the thread's current send is done
            pass
        self.flush()

    def resume(self) -> None:
        self._paused.clear()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            assert not self._thread.is_alive(), "the producing thread did not stop"
        self.flush()

    def produced(self) -> dict[tuple[int, int], str | None]:
        with self._lock:
            return dict(self._acked)


def send_one_per_batch(trickle: Trickle, count: int) -> None:
    """`count` more records from a (not started) Trickle, each its own batch (flushed alone), so each
    is one entry of its partition's ledger: a Pulsar backlog counts them one for one."""
    for _ in range(count):
        trickle.send(1)
        trickle.flush(CALL_TIMEOUT_S)


# --- reading a group's state through Kafka and Pulsar ---------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """CreateTopics through confluent-kafka's AdminClient (Kafka's 7-day retention)."""
    from tests.kafka.test_confluent import Confluent

    Confluent(bootstrap).create_topic(topic, partitions, {})


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    # log_level 4: not librdkafka's notice that a dropped handle had unserved events
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000,
                        "allow.auto.create.topics": False, "log_level": 4})


CONFLUENT_METADATA_NOTE = (
    "confluent-kafka-python commits a metadata string with its terminating NUL (it sends strlen + 1 "
    "bytes), and hands the metadata it reads back to Python as a C string: a string committed by "
    "another client (no NUL) is read past its end, as garbage; so confluent-kafka's reading of "
    "metadata is not compared, and what it commits is expected back with the NUL")


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str]]:
    """The group's committed offsets (OffsetFetch through kafka-python's KafkaAdminClient):
    partition -> (offset, metadata); (-1, "") where nothing is committed. (Not through confluent-kafka:
    CONFLUENT_METADATA_NOTE.)"""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000, bootstrap_timeout_ms=10_000)
    try:
        answer = client.list_group_offsets({group: [TopicPartition(topic, p) for p in range(partitions)]})
    finally:
        client.close()
    out = {p: (-1, "") for p in range(partitions)}
    for tp, found in answer.get(group, {}).items():
        if found.offset >= 0:
            out[tp.partition] = (found.offset, found.metadata or "")
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-never-joins",
                         "enable.auto.commit": False, "socket.timeout.ms": 10_000})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=CALL_TIMEOUT_S)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def wait_committed_to_end(bootstrap: str, group: str, topic: str, partitions: int, bound_s: float,
                          members: list[Member] | None = None) -> dict[int, int]:
    """Until the group's committed offset is the end of every partition (everything read and
    committed); the ends."""
    from tests.support.waiting import wait_until

    ends = end_offsets(bootstrap, topic, partitions)
    try:
        wait_until(lambda: {p: o for p, (o, _m) in committed(bootstrap, group, topic, partitions).items()} == ends,
                   bound_s, what=f"group {group} committed up to the ends {ends}", interval_s=0.3)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_details(members or [])}") from None
    return ends


def pulsar_subscription(admin_url: str, topic: str, partition: int, group: str) -> dict[str, Any] | None:
    """The Pulsar subscription `group` on the partition's topic (admin REST stats, precise backlog:
    messages, not entries); None when there is none."""
    from admin_client.client import AdminClient
    from tests.kafka.helpers import NAMESPACE

    stats = AdminClient(admin_url).call("GET", f"/admin/v2/persistent/{NAMESPACE}/{topic}-partition-{partition}/stats",
                                        query={"getPreciseBacklog": "true"})
    return stats["subscriptions"].get(group)


# --- the member processes' side (python -m tests.kafka.groups_helpers '<spec>') ---------------------------

class _Out:
    """One JSON line per event on stdout, flushed (a kill -9 loses nothing already reported)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "t": time.monotonic(), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def _watch_stdin(closing: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "close":
            break
    closing.set()


def _key(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode(errors="replace")


def _metadata(spec: dict[str, Any], partition: int, offset: int) -> str:
    return f"{spec['metadata']}-p{partition}-o{offset}" if spec.get("metadata") else ""


def _next_offsets(recs: list[list[Any]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _k in recs:
        out[p] = max(out.get(p, 0), o + 1)
    return out


class _Budget:
    """How many more records a member with a `limit` may process."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self, recs: list[list[Any]]) -> list[list[Any]]:
        if self.left is None:
            return recs
        taken = recs[:self.left]
        self.left -= len(taken)
        return taken

    @property
    def spent(self) -> bool:
        return self.left is not None and self.left <= 0


def _run_confluent(spec: dict[str, Any], out: _Out, closing: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    topic = spec["topic"]
    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "client.id": spec["name"],
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": spec["session_ms"],
        "heartbeat.interval.ms": spec["heartbeat_ms"], "max.poll.interval.ms": spec["max_poll_ms"],
        "socket.timeout.ms": 10_000, "error_cb": lambda err: out("client_error", error=str(err), fatal=err.fatal()),
    }
    if spec.get("assignor"):
        conf["partition.assignment.strategy"] = spec["assignor"]
    if spec.get("instance_id"):
        conf["group.instance.id"] = spec["instance_id"]
    consumer = Consumer(conf)
    owned: set[int] = set()

    def change(ev: str, gained: bool):
        def cb(_consumer: Any, parts: list[Any]) -> None:
            changed = sorted(tp.partition for tp in parts)
            if gained:
                owned.update(changed)
            else:
                owned.difference_update(changed)
            out(ev, changed=changed, owned=sorted(owned))
        return cb

    consumer.subscribe([topic], on_assign=change("assigned", True), on_revoke=change("revoked", False),
                       on_lost=change("lost", False))
    out("subscribed")
    budget = _Budget(spec.get("limit"))
    while not closing.is_set() and not budget.spent:
        recs = []
        for msg in consumer.consume(num_messages=spec["batch"], timeout=0.2):
            err = msg.error()
            if err is None:
                recs.append([msg.partition(), msg.offset(), _key(msg.key())])
            elif err.code() != KafkaError._PARTITION_EOF:
                out("client_error", error=str(err))
        recs = budget.take(recs)
        if not recs:
            continue
        out("records", recs=recs)
        nxt = _next_offsets(recs)
        tps = [TopicPartition(topic, p, o, **({"metadata": _metadata(spec, p, o)} if spec.get("metadata") else {}))
               for p, o in nxt.items()]
        try:
            answer = consumer.commit(offsets=tps, asynchronous=False) or []
            failed = [f"{tp.partition}: {tp.error}" for tp in answer if tp.error is not None]
            if failed:
                out("commit_failed", error="; ".join(failed))
            else:
                # what went on the wire: CONFLUENT_METADATA_NOTE
                out("committed", offsets={str(p): o for p, o in nxt.items()},
                    metadata={str(p): _metadata(spec, p, o) + "\0" if spec.get("metadata") else ""
                              for p, o in nxt.items()})
        except KafkaException as e:
            out("commit_failed", error=str(e))
    consumer.close()
    out("closed")


def _run_kafka_python(spec: dict[str, Any], out: _Out, closing: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    topic = spec["topic"]
    names = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    strategy = [names[n] for n in (spec.get("assignor") or "range,roundrobin").split(",")]
    kwargs: dict[str, Any] = dict(
        bootstrap_servers=spec["bootstrap"], group_id=spec["group"], client_id=spec["name"],
        enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=spec["session_ms"],
        heartbeat_interval_ms=spec["heartbeat_ms"], max_poll_interval_ms=spec["max_poll_ms"],
        partition_assignment_strategy=strategy, max_poll_records=spec["batch"], bootstrap_timeout_ms=10_000)
    if spec.get("instance_id"):
        kwargs["group_instance_id"] = spec["instance_id"]
    consumer = KafkaConsumer(**kwargs)
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            changed = sorted(tp.partition for tp in revoked)
            owned.difference_update(changed)
            out("revoked", changed=changed, owned=sorted(owned))

        def on_partitions_assigned(self, assigned: Any) -> None:
            changed = sorted(tp.partition for tp in assigned)
            owned.update(changed)
            out("assigned", changed=changed, owned=sorted(owned))

        def on_partitions_lost(self, lost: Any) -> None:
            changed = sorted(tp.partition for tp in lost)
            owned.difference_update(changed)
            out("lost", changed=changed, owned=sorted(owned))

    consumer.subscribe(topics=[topic], listener=Listener())
    out("subscribed")
    budget = _Budget(spec.get("limit"))
    while not closing.is_set() and not budget.spent:
        recs = [[r.partition, r.offset, _key(r.key)]
                for batch in consumer.poll(timeout_ms=200, max_records=spec["batch"]).values() for r in batch]
        recs = budget.take(recs)
        if not recs:
            continue
        out("records", recs=recs)
        nxt = _next_offsets(recs)
        try:
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, _metadata(spec, p, o), -1)
                             for p, o in nxt.items()})
            out("committed", offsets={str(p): o for p, o in nxt.items()},
                metadata={str(p): _metadata(spec, p, o) for p, o in nxt.items()})
        except KafkaError as e:
            out("commit_failed", error=repr(e))
    consumer.close(autocommit=False)
    out("closed")


def _run_aiokafka(spec: dict[str, Any], out: _Out, closing: threading.Event) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    topic = spec["topic"]
    names = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    strategy = tuple(names[n] for n in (spec.get("assignor") or "roundrobin").split(","))
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            changed = sorted(tp.partition for tp in revoked)
            owned.difference_update(changed)
            out("revoked", changed=changed, owned=sorted(owned))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            changed = sorted(tp.partition for tp in assigned)
            owned.update(changed)
            out("assigned", changed=changed, owned=sorted(owned))

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=spec["bootstrap"], group_id=spec["group"], client_id=spec["name"],
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=spec["session_ms"],
            heartbeat_interval_ms=spec["heartbeat_ms"], max_poll_interval_ms=spec["max_poll_ms"],
            rebalance_timeout_ms=spec["max_poll_ms"], partition_assignment_strategy=strategy,
            group_instance_id=spec.get("instance_id"), request_timeout_ms=20_000)
        await consumer.start()
        consumer.subscribe([topic], listener=Listener())
        out("subscribed")
        budget = _Budget(spec.get("limit"))
        while not closing.is_set() and not budget.spent:
            got = await consumer.getmany(timeout_ms=200, max_records=spec["batch"])
            recs = budget.take([[r.partition, r.offset, _key(r.key)] for batch in got.values() for r in batch])
            if not recs:
                continue
            out("records", recs=recs)
            nxt = _next_offsets(recs)
            try:
                await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, _metadata(spec, p, o))
                                       for p, o in nxt.items()})
                out("committed", offsets={str(p): o for p, o in nxt.items()},
                    metadata={str(p): _metadata(spec, p, o) for p, o in nxt.items()})
            except KafkaError as e:
                out("commit_failed", error=repr(e))
        await consumer.stop()

    asyncio.run(run())
    out("closed")


RUNNERS = {"confluent": _run_confluent, "kafka-python": _run_kafka_python, "aiokafka": _run_aiokafka}


def run_member(spec: dict[str, Any]) -> None:
    out = _Out()
    closing = threading.Event()
    threading.Thread(target=_watch_stdin, args=(closing,), daemon=True).start()
    # the bound: a member a test forgot (or a stuck close) goes away on its own
    bound = threading.Timer(spec["bound_ms"] / 1000, lambda: (out("bound_passed"), os._exit(3)))
    bound.daemon = True
    bound.start()
    try:
        RUNNERS[spec["client"]](spec, out, closing)
    except BaseException as e:
        out("crash", error=repr(e))
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(2)
    os._exit(0)


if __name__ == "__main__":
    run_member(json.loads(sys.argv[1]))
