"""Retention and message TTL with the official client against a real standalone: the broker's
retention task (`broker.retention.task`) trims acked ledgers as the namespace's retention allows,
TTL acks old messages without deleting them, (-1, -1) keeps everything, bad policies are refused
and change nothing, and no ledger a durable subscription still needs is trimmed.

Ledgers roll every 10 entries, so 25 unbatched messages make ledgers of 10, 10 and 5 (the open
one). "Nothing was trimmed" is observed after two later passes of the task, proven by a probe
topic whose acked ledger gets trimmed (passes visit every topic, one pass at a time).

The last test drives the trim race in process (a managed ledger on real bookies): a cursor seeks
back while the trim waits for the ledger's metadata lock, and the re-check keeps its ledgers."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from types import SimpleNamespace

import pulsar
import pytest

from broker.retention.task import _RecheckedTrim
from cursor.managed_cursor import ManagedCursor
from cursor.retention import RetentionPolicy, apply_retention
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST
from tests.acceptance.conftest import make_client, receive_all
from tests.acceptance.test_admin import http
from tests.ledger.conftest import env, run, shutdown  # noqa: F401  (env is a fixture)
from tests.support.namespaces import ensure_namespace
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import until

ENV = {"STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200",
       "STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "10",
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}
ROLL = 10
DEADLINE_S = 15.0
_ids = itertools.count()


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("retention") / "data", env=ENV) as proc:
        yield proc


@pytest.fixture
def client(sa):
    c = make_client(sa.service_url)
    yield c
    c.close()


@pytest.fixture
def ns(sa: StandaloneProcess) -> str:
    """A namespace of its own, so each test sets its own policies."""
    name = f"public/ret-{os.getpid()}-{next(_ids)}"
    ensure_namespace(sa.admin_url, name)
    return name


def _ns_url(sa: StandaloneProcess, ns: str, what: str) -> str:
    return f"{sa.admin_url}/admin/v2/namespaces/{ns}/{what}"


def _set_retention(sa: StandaloneProcess, ns: str, minutes: int, mb: int) -> None:
    body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": mb}
    assert http("POST", _ns_url(sa, ns, "retention"), body)[0] == 204
    assert http("GET", _ns_url(sa, ns, "retention")) == (200, body)


def _stats(sa: StandaloneProcess, topic: str) -> dict:
    status, body = http("GET", f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")
    assert status == 200, body
    return body


def _wait_for(what: str, check) -> object:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _produce(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(count)]
    producer.close()
    return ids


def _read_all(client: pulsar.Client, topic: str) -> list[pulsar.Message]:
    """Every message still stored, read from the earliest position by a reader."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(10_000))
    reader.close()
    return out


def _sealed_ledgers_passed(sa: StandaloneProcess, client: pulsar.Client, rounds: int = 2) -> None:
    """Return once the retention task has run `rounds` passes that began after this call: each
    round fills and acks one ledger of a probe topic (retention 0, 0) and waits for its trim."""
    ns = f"public/ret-probe-{os.getpid()}-{next(_ids)}"
    ensure_namespace(sa.admin_url, ns)
    _set_retention(sa, ns, 0, 0)
    topic = f"persistent://{ns}/probe"
    consumer = client.subscribe(topic, "probe")
    for _ in range(rounds):
        _produce(client, topic, ROLL)
        receive_all(consumer, ROLL)
        _wait_for("the probe's ledger to be trimmed", lambda: _stats(sa, topic)["storageSize"] == 0)
    consumer.close()


def test_acked_ledgers_are_trimmed_with_zero_retention(sa, client, ns: str) -> None:
    _set_retention(sa, ns, 0, 0)
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    ids = _produce(client, topic, 25)
    full = _stats(sa, topic)["storageSize"]
    assert full > 0
    receive_all(consumer, 25)
    last_ledger = ids[-1].ledger_id()
    assert ids[0].ledger_id() != last_ledger
    _wait_for("acked ledgers to be trimmed", lambda: _stats(sa, topic)["storageSize"] < full / 2)
    stats = _stats(sa, topic)
    assert 0 < stats["storageSize"] <= full * 6 / 25     # only the open ledger's 5 entries
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    left = _read_all(client, topic)
    assert [m.data() for m in left] == [f"m{i}".encode() for i in range(20, 25)]
    assert {m.message_id().ledger_id() for m in left} == {last_ledger}
    consumer.close()


def test_ttl_expires_backlog_but_keeps_ledgers_until_retention_allows(sa, client, ns: str) -> None:
    _set_retention(sa, ns, 60, -1)                       # time bound only: an hour
    assert http("POST", _ns_url(sa, ns, "messageTTL"), 1)[0] == 204
    assert http("GET", _ns_url(sa, ns, "messageTTL")) == (200, 1)
    topic = f"persistent://{ns}/t"
    client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
    _produce(client, topic, 25)
    full = _stats(sa, topic)["storageSize"]
    assert _stats(sa, topic)["subscriptions"]["sub"]["msgBacklog"] == 25
    _wait_for("TTL to expire the backlog",
              lambda: _stats(sa, topic)["subscriptions"]["sub"]["msgBacklog"] == 0)
    _sealed_ledgers_passed(sa, client)
    assert _stats(sa, topic)["storageSize"] == full      # TTL deleted nothing; retention holds
    assert len(_read_all(client, topic)) == 25
    _set_retention(sa, ns, 0, 0)                         # now retention allows
    _wait_for("expired ledgers to be trimmed", lambda: _stats(sa, topic)["storageSize"] < full / 2)
    assert [m.data() for m in _read_all(client, topic)] == [f"m{i}".encode() for i in range(20, 25)]


def test_infinite_retention_trims_nothing(sa, client, ns: str) -> None:
    _set_retention(sa, ns, -1, -1)
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 25)
    full = _stats(sa, topic)["storageSize"]
    receive_all(consumer, 25)
    _wait_for("the acks", lambda: _stats(sa, topic)["subscriptions"]["sub"]["msgBacklog"] == 0)
    _sealed_ledgers_passed(sa, client)
    assert _stats(sa, topic)["storageSize"] == full
    assert [m.data() for m in _read_all(client, topic)] == [f"m{i}".encode() for i in range(25)]
    consumer.close()


@pytest.mark.parametrize("body", [
    {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10},
    {"retentionTimeInMinutes": 10, "retentionSizeInMB": 0},
    {"retentionTimeInMinutes": -2, "retentionSizeInMB": -1},
])
def test_invalid_retention_is_refused_and_changes_nothing(sa, client, ns: str, body: dict) -> None:
    _set_retention(sa, ns, -1, -1)
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 25)
    receive_all(consumer, 25)
    status, reply = http("POST", _ns_url(sa, ns, "retention"), body)
    assert status == 412 and "retention" in reply["reason"]
    for bad in ("abc", {"retentionTimeInMinutes": 5}, {"retentionTimeInMinutes": "5", "retentionSizeInMB": 5}):
        assert http("POST", _ns_url(sa, ns, "retention"), bad)[0] == 400
    status, reply = http("POST", _ns_url(sa, ns, "messageTTL"), -1)
    assert status == 412 and "messageTTL" in reply["reason"]
    assert http("POST", _ns_url(sa, ns, "messageTTL"), "soon")[0] == 400
    assert http("GET", _ns_url(sa, ns, "retention")) == (200, {"retentionTimeInMinutes": -1,
                                                               "retentionSizeInMB": -1})
    assert http("GET", _ns_url(sa, ns, "messageTTL")) == (200, None)     # never set: null, as Pulsar
    _sealed_ledgers_passed(sa, client, rounds=1)
    assert len(_read_all(client, topic)) == 25
    consumer.close()


def test_topic_level_policies_override_the_namespace(sa, client, ns: str) -> None:
    """Topic-level retention and TTL (pulsar-admin topics set-retention / set-message-ttl) win over
    the namespace's for that topic only; removing them brings the namespace's back."""
    _set_retention(sa, ns, -1, -1)                       # the namespace keeps everything
    own, other = f"persistent://{ns}/own", f"persistent://{ns}/other"
    url = f"{sa.admin_url}/admin/v2/persistent/{ns}/own"
    assert http("GET", f"{url}/retention") == (200, None)            # unset at topic level
    assert http("GET", f"{url}/retention?applied=true") == (200, {"retentionTimeInMinutes": -1,
                                                                  "retentionSizeInMB": -1})
    assert http("POST", f"{url}/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})[0] == 204
    assert http("POST", f"{url}/messageTTL?messageTTL=1")[0] == 204
    assert http("GET", f"{url}/messageTTL") == (200, 1)
    assert http("POST", f"{url}/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 5})[0] == 412
    assert http("POST", f"{url}/messageTTL?messageTTL=soon")[0] == 400
    assert http("POST", f"{url}/messageTTL", -5)[0] == 412
    for topic in (own, other):
        client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
        _produce(client, topic, 25)
    full = _stats(sa, other)["storageSize"]
    _wait_for("the topic's TTL to expire its backlog",
              lambda: _stats(sa, own)["subscriptions"]["sub"]["msgBacklog"] == 0)
    _wait_for("the topic's retention to trim", lambda: _stats(sa, own)["storageSize"] < full / 2)
    _sealed_ledgers_passed(sa, client)
    assert _stats(sa, other)["subscriptions"]["sub"]["msgBacklog"] == 25   # the namespace's rules
    assert _stats(sa, other)["storageSize"] == full
    assert http("DELETE", f"{url}/messageTTL")[0] == 204
    assert http("DELETE", f"{url}/retention")[0] == 204
    assert http("GET", f"{url}/messageTTL") == (200, None)
    assert http("GET", f"{url}/messageTTL?applied=true") == (200, 0)


def test_no_trim_past_the_slowest_durable_subscription(sa, client, ns: str) -> None:
    _set_retention(sa, ns, 0, 0)
    topic = f"persistent://{ns}/t"
    start = pulsar.InitialPosition.Earliest
    fast = client.subscribe(topic, "fast", initial_position=start)
    slow = client.subscribe(topic, "slow", initial_position=start)
    _produce(client, topic, 25)
    full = _stats(sa, topic)["storageSize"]
    receive_all(fast, 25)
    held = receive_all(slow, 25, ack=False)
    for msg in held[:5]:
        slow.acknowledge(msg)
    _wait_for("the acks", lambda: (lambda s: s["fast"]["msgBacklog"] == 0 and s["slow"]["msgBacklog"] == 20)(
        _stats(sa, topic)["subscriptions"]))
    _sealed_ledgers_passed(sa, client)
    assert _stats(sa, topic)["storageSize"] == full      # "slow" still needs the first ledger
    for msg in held[5:15]:                               # "slow" passes the first ledger only
        slow.acknowledge(msg)
    _wait_for("the first ledger to be trimmed", lambda: _stats(sa, topic)["storageSize"] < full)
    _sealed_ledgers_passed(sa, client)
    stats = _stats(sa, topic)
    assert full * 14 / 25 <= stats["storageSize"] <= full * 16 / 25   # ledgers 2 and 3 kept
    assert [m.data() for m in _read_all(client, topic)] == [f"m{i}".encode() for i in range(10, 25)]
    fast.close()
    slow.close()


def _has_waiter(lock: asyncio.Lock) -> bool:
    """Some task waits to acquire `lock` (asyncio keeps its waiters in `_waiters`)."""
    return bool(getattr(lock, "_waiters", None))


@pytest.mark.parametrize("seek_back", [False, True])
def test_trim_rechecks_cursors_that_moved_back_while_it_waited(env, seek_back: bool) -> None:  # noqa: F811
    env.start_bookies(1)

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=ROLL, managed_ledger_rollover_min_age_ms=0)
        store, ledger_client = await env.open(config)
        ml = await ManagedLedger.open("public/default/persistent/race", store, ledger_client, config,
                                      ensemble_size=1, write_quorum=1, ack_quorum=1)
        positions = [await ml.append(b"x%d" % i, publish_time_ms=1) for i in range(25)]
        cursor = ManagedCursor.starting_at("sub", ml, EARLIEST, durable=False)
        cursor.ack_cumulative(positions[-1])
        topic = SimpleNamespace(ml=ml, subscriptions={"sub": SimpleNamespace(durable=True, closed=False,
                                                                              cursor=cursor)})
        policy = RetentionPolicy(0, 0)
        before_ids = [i.ledger_id for i in ml.ledgers()]
        async with ml._meta_lock:           # a rollover holds the lock: the trim must wait
            trim = asyncio.ensure_future(apply_retention(_RecheckedTrim(topic, policy, 10**13), ml,
                                                         [cursor], policy, 10**13))
            await until(lambda: _has_waiter(ml._meta_lock) or trim.done(), 10,
                        what="the trim waiting for the managed ledger's lock")
            assert not trim.done()
            if seek_back:
                cursor.seek(EARLIEST)       # a reset while the trim waits for the lock
        await trim
        kept = [i.ledger_id for i in ml.ledgers()]
        assert kept == (before_ids if seek_back else before_ids[2:])
        assert len(await ml.read(EARLIEST, 100)) == (25 if seek_back else 5)
        await ml.close()
        await shutdown(store, ledger_client)

    run(body(), 60)
