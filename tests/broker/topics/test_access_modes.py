"""Producer access modes and the topic epoch on the wire (`broker.topics.access_modes`), with a raw
protocol client against a real standalone, so every reply (ERROR codes, producer_ready=false,
topic_epoch, CLOSE_PRODUCER) is seen as sent.

- Exclusive: the first gets epoch 0; another Exclusive is ProducerFenced, a Shared one
  ProducerBusy; a Shared producer first makes an Exclusive one ProducerFenced.
- WaitForExclusive: answered producer_ready=false at once, then a second PRODUCER_SUCCESS with
  the next epoch when the holder leaves; a waiter whose connection closed is skipped.
- ExclusiveWithFencing: the holder gets CLOSE_PRODUCER, the new one the next epoch; the old one
  coming back with its epoch is ProducerFenced; a waiter is refused ProducerFenced.
- The epoch is in the managed ledger's record: after an unload (topic loaded again) the next
  exclusive producer gets the next epoch, and one showing an older epoch is ProducerFenced.
- The epoch survives a restart of the standalone.
- A waiter of a topic being unloaded is answered ServiceNotReady (the client retries with the
  next owner) rather than left waiting on a topic that is gone.
"""

from __future__ import annotations

import itertools

import pytest

from broker.topics.access_modes import AccessMode
from common.errors import PulsarServerError
from proto import pulsar_api_pb2 as pb
from tests.support.admin_http import admin_call
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T

_ids = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("access-modes") / "data") as sa:
        yield sa
        log = sa.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/access-{next(_ids)}"


class Client(RawClient):
    def __init__(self, port: int) -> None:
        super().__init__(port, timeout_s=10.0)
        self.connect()

    def create(self, topic: str, producer_id: int, mode: AccessMode, *, name: str = "",
               epoch: int | None = None) -> pb.BaseCommand:
        cmd = pb.CommandProducer(topic=topic, producer_id=producer_id, request_id=100 + producer_id,
                                 producer_access_mode=int(mode))  # type: ignore[arg-type]
        if name:
            cmd.producer_name = name
        if epoch is not None:
            cmd.topic_epoch = epoch
        self.send(pb.BaseCommand(type=T.PRODUCER, producer=cmd))
        return self.next_command()


def _error(reply: pb.BaseCommand) -> int:
    assert reply.type == T.ERROR, reply
    return reply.error.error


def _ready(reply: pb.BaseCommand) -> pb.CommandProducerSuccess:
    assert reply.type == T.PRODUCER_SUCCESS and reply.producer_success.producer_ready, reply
    return reply.producer_success


def test_exclusive_refuses_everyone_else(standalone: StandaloneProcess, topic: str) -> None:
    a, b = Client(standalone.port), Client(standalone.port)
    try:
        first = _ready(a.create(topic, 1, AccessMode.EXCLUSIVE))
        assert first.HasField("topic_epoch") and first.topic_epoch == 0
        assert _error(b.create(topic, 1, AccessMode.EXCLUSIVE)) == PulsarServerError.ProducerFenced
        assert _error(b.create(topic, 2, AccessMode.SHARED)) == PulsarServerError.ProducerBusy
        a.send(pb.BaseCommand(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(
            producer_id=1, request_id=9)))
        assert a.next_command().type == T.SUCCESS
        shared = _ready(b.create(topic, 3, AccessMode.SHARED))
        assert shared.topic_epoch == 0                       # shared producers are told the epoch too
        assert _error(a.create(topic, 4, AccessMode.EXCLUSIVE)) == PulsarServerError.ProducerFenced
    finally:
        a.close()
        b.close()


def test_wait_for_exclusive_is_queued_then_promoted(standalone: StandaloneProcess, topic: str) -> None:
    a, b, c = (Client(standalone.port) for _ in range(3))
    try:
        assert _ready(a.create(topic, 1, AccessMode.EXCLUSIVE)).topic_epoch == 0
        queued = b.create(topic, 1, AccessMode.WAIT_FOR_EXCLUSIVE, name="waiter-b")
        assert queued.type == T.PRODUCER_SUCCESS and not queued.producer_success.producer_ready
        assert queued.producer_success.producer_name == "waiter-b"
        queued = c.create(topic, 1, AccessMode.WAIT_FOR_EXCLUSIVE, name="waiter-c")
        assert not queued.producer_success.producer_ready
        b.close()                                           # b gives up: it must not keep the topic
        assert _error(Client(standalone.port).create(topic, 5, AccessMode.SHARED)) == PulsarServerError.ProducerBusy
        a.close()                                           # the holder leaves: c gets the topic
        promoted = _ready(c.next_command())
        assert promoted.producer_name == "waiter-c" and promoted.topic_epoch == 1
        c.send_message(1, 0, b"from c", producer_name="waiter-c")
        assert c.next_command().type == T.SEND_RECEIPT
    finally:
        for client in (a, b, c):
            client.close()


def test_wait_for_exclusive_behind_shared_producers_gets_the_topic_when_they_leave(
        standalone: StandaloneProcess, topic: str) -> None:
    a, b = Client(standalone.port), Client(standalone.port)
    try:
        _ready(a.create(topic, 1, AccessMode.SHARED))
        assert not b.create(topic, 1, AccessMode.WAIT_FOR_EXCLUSIVE).producer_success.producer_ready
        a.close()
        assert _ready(b.next_command()).topic_epoch == 0
    finally:
        a.close()
        b.close()


def test_fencing_takes_the_topic_and_the_old_producer_stays_out(standalone: StandaloneProcess, topic: str) -> None:
    a, b, c = (Client(standalone.port) for _ in range(3))
    try:
        old = _ready(a.create(topic, 1, AccessMode.EXCLUSIVE, name="old"))
        assert not c.create(topic, 1, AccessMode.WAIT_FOR_EXCLUSIVE).producer_success.producer_ready
        new = _ready(b.create(topic, 1, AccessMode.EXCLUSIVE_WITH_FENCING, name="new"))
        assert new.topic_epoch == old.topic_epoch + 1
        closed = a.next_command()
        assert closed.type == T.CLOSE_PRODUCER and closed.close_producer.producer_id == 1
        assert _error(c.next_command()) == PulsarServerError.ProducerFenced     # the waiter is refused
        # the fenced producer reconnects as the official client does: same mode, its old epoch
        again = a.create(topic, 1, AccessMode.EXCLUSIVE, name="old", epoch=old.topic_epoch)
        assert _error(again) == PulsarServerError.ProducerFenced
    finally:
        for client in (a, b, c):
            client.close()


def _unload(admin_url: str, topic: str) -> None:
    status, body = admin_call(admin_url, "PUT", f"/admin/v2/persistent/{topic.split('://', 1)[1]}/unload",
                              timeout_s=30)
    assert status in (200, 204), (status, body)


def test_the_epoch_is_kept_with_the_topic(standalone: StandaloneProcess, topic: str) -> None:
    a = Client(standalone.port)
    try:
        assert _ready(a.create(topic, 1, AccessMode.EXCLUSIVE)).topic_epoch == 0
    finally:
        a.close()
    b = Client(standalone.port)
    try:
        assert _ready(b.create(topic, 1, AccessMode.EXCLUSIVE)).topic_epoch == 1
        _unload(standalone.admin_url, topic)
        assert b.next_command().type == T.CLOSE_PRODUCER
        # back with its epoch after the topic was loaded again: the same epoch, not fenced
        assert _ready(b.create(topic, 2, AccessMode.EXCLUSIVE, epoch=1)).topic_epoch == 1
    finally:
        b.close()
    c = Client(standalone.port)
    try:
        assert _error(c.create(topic, 1, AccessMode.EXCLUSIVE, epoch=0)) == PulsarServerError.ProducerFenced
        assert _ready(c.create(topic, 2, AccessMode.EXCLUSIVE)).topic_epoch == 2
    finally:
        c.close()


def test_a_waiter_is_answered_when_the_topic_closes(standalone: StandaloneProcess, topic: str) -> None:
    a, b = Client(standalone.port), Client(standalone.port)
    try:
        _ready(a.create(topic, 1, AccessMode.EXCLUSIVE))
        assert not b.create(topic, 1, AccessMode.WAIT_FOR_EXCLUSIVE).producer_success.producer_ready
        _unload(standalone.admin_url, topic)
        assert a.next_command().type == T.CLOSE_PRODUCER
        assert _error(b.next_command()) == PulsarServerError.ServiceNotReady
    finally:
        a.close()
        b.close()


def test_the_epoch_survives_a_restart(standalone: StandaloneProcess, topic: str) -> None:
    """Last in this module: it restarts the module's standalone."""
    a = Client(standalone.port)
    try:
        assert _ready(a.create(topic, 1, AccessMode.EXCLUSIVE)).topic_epoch == 0
    finally:
        a.close()
    b = Client(standalone.port)
    try:
        assert _ready(b.create(topic, 1, AccessMode.EXCLUSIVE)).topic_epoch == 1
    finally:
        b.close()
    standalone.restart()
    c = Client(standalone.port)
    try:
        assert _error(c.create(topic, 1, AccessMode.EXCLUSIVE, epoch=0)) == PulsarServerError.ProducerFenced
        assert _ready(c.create(topic, 2, AccessMode.EXCLUSIVE)).topic_epoch == 2
    finally:
        c.close()
