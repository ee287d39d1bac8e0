"""The cursor state limit through a real broker (`strata standalone`, raw protocol client).

With `cursor_state_bytes_max` at its smallest (1 KiB) and no background persist to re-measure,
a consumer acking every other message of a Shared subscription soon adds more ack holes than the
state may hold. What must hold: the broker answers those ACKs (asked with a receipt) with an
error ACK_RESPONSE and logs those without one; the admin stats of the subscription show the
error and the state size, /metrics counts the refusals; acks that close holes are still taken,
and once the state is measured under the limit again the error is gone."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from admin_client import request
from proto import pulsar_api_pb2 as pb
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T

TOPIC = "persistent://public/default/cursor-state-limit"
SUB = "holes"
MESSAGES = 600
_request_ids = itertools.count(100)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    env = {"STRATA_CURSOR_STATE_BYTES_MAX": "1024", "STRATA_CURSOR_PERSIST_INTERVAL_MS": "60000"}
    with StandaloneProcess.start(tmp_path_factory.mktemp("state-limit") / "data", env=env) as sa:
        yield sa


def admin_json(sa: StandaloneProcess, path: str):
    body = request("GET", sa.admin_url + path, timeout_s=30).text()
    return json.loads(body) if path.endswith("stats") else body


def sub_stats(sa: StandaloneProcess) -> dict:
    return admin_json(sa, "/admin/v2/persistent/public/default/cursor-state-limit/stats")["subscriptions"][SUB]


def publish(client: RawClient, count: int) -> None:
    reply = client.producer(TOPIC, producer_id=1, request_id=next(_request_ids))
    assert reply.type == T.PRODUCER_SUCCESS, reply
    name = reply.producer_success.producer_name
    for sequence_id in range(count):  # pipelined: all sends, then all receipts
        client.send_message(1, sequence_id, b"m%d" % sequence_id, producer_name=name)
    receipts = [client.next_command() for _ in range(count)]
    assert all(r.type == T.SEND_RECEIPT for r in receipts)


def subscribe_and_receive(client: RawClient, count: int) -> list[pb.MessageIdData]:
    client.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic=TOPIC, subscription=SUB, subType=pb.CommandSubscribe.Shared, consumer_id=1,
        request_id=next(_request_ids), initialPosition=pb.CommandSubscribe.Earliest)))
    assert client.next_command().type == T.SUCCESS
    client.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=count)))
    ids = []
    while len(ids) < count:
        cmd = client.next_command()
        if cmd.type == T.MESSAGE:
            ids.append(cmd.message.message_id)
    return ids


def ack(client: RawClient, mid: pb.MessageIdData, receipt: bool = True) -> pb.CommandAckResponse | None:
    cmd = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Individual,
                        message_id=[pb.MessageIdData(ledgerId=mid.ledgerId, entryId=mid.entryId)])
    if receipt:
        cmd.request_id = next(_request_ids)
    client.send(pb.BaseCommand(type=T.ACK, ack=cmd))
    if not receipt:
        return None
    reply = client.next_command()
    assert reply.type == T.ACK_RESPONSE and reply.ackResponse.request_id == cmd.request_id, reply
    return reply.ackResponse


def wait_for(condition, deadline_s: float = 60.0):
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.1)


def test_acks_over_the_state_limit_are_refused_visible_and_recoverable(standalone):
    producer = RawClient(standalone.port)
    producer.connect()
    publish(producer, MESSAGES)
    consumer = RawClient(standalone.port)
    consumer.connect()
    ids = subscribe_and_receive(consumer, MESSAGES)

    replies = [ack(consumer, mid) for mid in ids[1::2]]       # every other one: a hole each
    refused = [r for r in replies if r.HasField("error")]
    assert refused, "no ack was refused although the holes exceed 1 KiB"
    assert "cursor_state_bytes_max" in refused[0].message
    first_refused = replies.index(refused[0])
    assert all(not r.HasField("error") for r in replies[:first_refused])

    stats = sub_stats(standalone)
    assert stats["cursorStateError"] and "cursor_state_bytes_max" in stats["cursorStateError"]
    assert stats["cursorStateBytesMax"] == 1024 and stats["cursorStateBytes"] > 0
    metrics = admin_json(standalone, "/metrics")
    assert "strata_cursor_acks_refused_total" in metrics
    refused_total = next(float(line.split()[-1]) for line in metrics.splitlines()
                         if line.startswith("strata_cursor_acks_refused_total{"))
    assert refused_total >= len(refused)
    assert 'strata_subscription_cursor_state_error{' in metrics

    last_refused = ids[1::2][len(replies) - 1 - replies[::-1].index(refused[-1])]
    ack(consumer, last_refused, receipt=False)                 # no receipt asked: logged
    wait_for(lambda: "asked for no receipt: ack refused" in
             standalone.log_path.read_text(errors="replace"))

    taken = {i for i, reply in zip(range(1, MESSAGES, 2), replies) if not reply.HasField("error")}
    for i, mid in enumerate(ids):                              # the rest, oldest first: each one
        if i not in taken:                                     # is the first unacked or extends
            reply = ack(consumer, mid)                         # a run, so it is always taken
            assert not reply.HasField("error"), (i, reply)
    consumer.send(pb.BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=pb.CommandCloseConsumer(
        consumer_id=1, request_id=next(_request_ids))))        # closing flushes: a measurement
    wait_for(lambda: sub_stats(standalone)["cursorStateError"] is None)
    stats = sub_stats(standalone)
    assert stats["msgBacklog"] == 0 and stats["cursorPersistError"] is None
    assert stats["cursorPersistedBytes"] <= 1024
    producer.close()
    consumer.close()
