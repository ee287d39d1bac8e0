"""The consumer role: every consumer of the plan's subscriptions of one type, a thread each.

Each consumer subscribes by name to its (pre-created) subscription, then loops on
`receive(RECEIVE_TIMEOUT_MS)` until the stop: every message is recorded `deliver` (with its
redelivery count), then either nacked (with the subscription's seeded probability; redelivered
after NACK_REDELIVERY_DELAY_MS) or acked: individually, or, on a cumulative subscription,
cumulatively every `cumulative_every`th delivery (the `ack` record names the message the
cumulative ack was given for). Rarely (seeded, per delivery) it closes its consumer and
subscribes again, so unacked messages are redelivered. Each consumer records `consumer` events:
open, closed (a close we asked for, or at the end) and crashed (receive failed with something
other than a timeout: the consumer is closed, bounded, and opened again).

An `ack` record means the client was asked to ack (pulsar-client groups acks and sends them
within 100 ms; it does not wait for the broker); a lost ack is Pulsar's at-least-once, not loss.

What must hold: a consumer's records are written by its own thread, in the order it acted; a
consumer is opened again only after its previous incarnation is recorded closed or crashed; no
thread blocks past RECEIVE_TIMEOUT_MS (receive), the client's operation timeout (subscribe) or
CLOSE_TIMEOUT_S (close) before it sees the stop.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pulsar

from chaos.history import HistoryWriter
from chaos.workload.plan import CUMULATIVE, SubscriptionPlan, WorkloadPlan
from chaos.workload.runtime import (
    CLOSE_TIMEOUT_S,
    RECEIVE_TIMEOUT_MS,
    RETRY_PAUSE_S,
    STOP_CONSUMERS,
    STOP_POLL_S,
    Stop,
    bounded,
    error_text,
    exit_process,
    format_msg_id,
    make_client,
)

RECEIVER_QUEUE_SIZE = 100       # messages prefetched per consumer (small: spread Shared dispatch)
JOIN_S = CLOSE_TIMEOUT_S + 5.0  # after the stop: every thread closes its consumer within this
CONSUMER_TYPES = {"Exclusive": pulsar.ConsumerType.Exclusive, "Failover": pulsar.ConsumerType.Failover,
                  "Shared": pulsar.ConsumerType.Shared, "Key_Shared": pulsar.ConsumerType.KeyShared}


class ConsumerThread:
    """One named consumer of one subscription, run on its own thread."""

    def __init__(self, plan: WorkloadPlan, sub: SubscriptionPlan, name: str, client: pulsar.Client,
                 writer: HistoryWriter, stop: Stop) -> None:
        self.sub = sub
        self.name = name
        self.client = client
        self.writer = writer
        self.stop = stop
        self.rng = random.Random(f"{plan.seed}:{sub.topic}:{name}")
        self.nack_delay_ms = plan.nack_redelivery_delay_ms
        self.handle: Any = None          # the open pulsar.Consumer, None while closed
        self.deliveries = 0              # since the consumer opened (cumulative_every counts these)

    def run(self) -> None:
        while not self.stop.requested():
            if self.handle is None and not self._open():
                break
            try:
                msg = self.handle.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
            except pulsar.Timeout:
                continue
            except Exception as exc:
                self._close("crashed", error_text(exc))
                continue
            self._handle(msg)
        if self.handle is not None:
            self._close("closed", None)

    def _event(self, event: str, **fields: Any) -> None:
        self.writer.write("consumer", topic=self.sub.topic, sub=self.sub.name, consumer=self.name, event=event,
                          **fields)

    def _open(self) -> bool:
        while not self.stop.requested():
            try:
                self.handle = self.client.subscribe(
                    self.sub.topic, self.sub.name, consumer_type=CONSUMER_TYPES[self.sub.subtype],
                    consumer_name=self.name, receiver_queue_size=RECEIVER_QUEUE_SIZE,
                    negative_ack_redelivery_delay_ms=self.nack_delay_ms,
                    initial_position=pulsar.InitialPosition.Earliest)
            except Exception as exc:
                self.writer.write("open-failed", kind="consumer", topic=self.sub.topic, sub=self.sub.name,
                                  name=self.name, error=error_text(exc))
                self.stop.wait(RETRY_PAUSE_S)
                continue
            self.deliveries = 0
            self._event("open")
            return True
        return False

    def _close(self, event: str, error: str | None) -> None:
        handle, self.handle = self.handle, None
        close_error = bounded(handle.close, CLOSE_TIMEOUT_S)
        self._event(event, error=error, close_error=close_error)

    def _handle(self, msg: Any) -> None:
        sub = self.sub
        common = {"topic": msg.topic_name(), "sub": sub.name, "consumer": self.name,
                  "value": msg.data().decode(errors="replace"), "msg_id": format_msg_id(msg.message_id())}
        self.writer.write("deliver", subtype=sub.subtype, key=msg.partition_key() or None,
                          redelivery=msg.redelivery_count(), **common)
        self.deliveries += 1
        if sub.ack_mode == CUMULATIVE:
            if self.deliveries % sub.cumulative_every == 0:
                self._ack(lambda: self.handle.acknowledge_cumulative(msg), common, "cumulative")
        elif self.rng.random() < sub.nack_probability:
            self.handle.negative_acknowledge(msg)
            self.writer.write("nack", **common)
        else:
            self._ack(lambda: self.handle.acknowledge(msg), common, "individual")
        if self.rng.random() < sub.reopen_probability:
            self._close("closed", None)

    def _ack(self, ack: Any, common: dict[str, Any], mode: str) -> None:
        try:
            ack()
        except Exception as exc:
            self.writer.write("ack-failed", mode=mode, error=error_text(exc), **common)
            return
        self.writer.write("ack", mode=mode, **common)


def main(plan: WorkloadPlan, proc: str, service_url: str, out_dir: str) -> None:
    stop = Stop(out_dir, STOP_CONSUMERS).install()
    writer = HistoryWriter(out_dir, proc)
    client = make_client(service_url)
    consumers = [ConsumerThread(plan, sub, name, client, writer, stop)
                 for sub in plan.subscriptions if sub.proc == proc for name in sub.consumers]
    threads = [threading.Thread(target=c.run, name=c.name, daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    while not stop.wait(STOP_POLL_S):
        pass
    deadline = time.monotonic() + JOIN_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    bounded(client.close)
    writer.close()
    exit_process(0)
