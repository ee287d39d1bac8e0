"""What every workload process shares: the stop signal, bounded waits, the client, id formatting.

A process stops when its stop file appears in the run's directory (`stop-producers` for
producers, `stop-consumers` for consumers and readers) or when it gets SIGTERM (or SIGINT);
`Stop` turns both into one event. A stop file means "finish": producers first wait for their
pending sends (up to `--drain-s`); SIGTERM means "now".

Nothing here may hang: every call into pulsar-client that can block on a broker (close, create,
receive) is either bounded by the client's own timeouts (OPERATION_TIMEOUT_S, receive timeouts)
or run through `bounded`, which gives up on it after a time. A process ends with `os._exit`
once its history is written: pulsar-client's C++ threads must not be able to hold the
interpreter's exit.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar

STOP_PRODUCERS = "stop-producers"      # <out>/stop-producers: producers drain and exit
STOP_CONSUMERS = "stop-consumers"      # <out>/stop-consumers: consumers and readers exit
OPERATION_TIMEOUT_S = 10               # client: lookups, create producer/consumer, close
CONNECTION_TIMEOUT_MS = 5_000          # client: one TCP connect to a broker
CLOSE_TIMEOUT_S = 15.0                 # bound on closing one producer, consumer, reader or client
RECEIVE_TIMEOUT_MS = 200               # one receive()/read_next(): how often a loop sees the stop
STOP_POLL_S = 0.2
RETRY_PAUSE_S = 0.5                    # between attempts to create a producer/consumer/reader


class Stop:
    """Set by the stop file `<out>/<file_name>` (None: no file) or by SIGTERM/SIGINT (then
    `terminated` is true)."""

    def __init__(self, out_dir: str | Path, file_name: str | None) -> None:
        self.path = Path(out_dir) / file_name if file_name else None
        self.event = threading.Event()
        self.terminated = False        # true: a signal, not the stop file, asked us to stop

    def install(self) -> Stop:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        self.terminated = True
        self.event.set()

    def requested(self) -> bool:
        if not self.event.is_set() and self.path is not None and self.path.exists():
            self.event.set()
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when a stop is requested; whether one is."""
        if self.requested():
            return True
        self.event.wait(seconds)
        return self.requested()


def bounded(fn: Callable[[], Any], timeout_s: float = CLOSE_TIMEOUT_S) -> str | None:
    """Run `fn` on a daemon thread and wait at most `timeout_s`: None when it returned, else
    the error text ("timeout after ..." when it is still running, abandoned)."""
    outcome: list[str | None] = []

    def run() -> None:
        try:
            fn()
            outcome.append(None)
        except Exception as exc:
            outcome.append(error_text(exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return outcome[0] if outcome else f"timeout after {timeout_s:.0f} s"


def make_client(service_url: str) -> pulsar.Client:
    """The process's one client: bounded operations, reconnecting by itself, quiet logs."""
    return pulsar.Client(service_url, operation_timeout_seconds=OPERATION_TIMEOUT_S,
                         connection_timeout_ms=CONNECTION_TIMEOUT_MS,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def format_msg_id(msg_id: Any) -> str:
    """"ledger:entry:partition:batch" of a pulsar.MessageId (partition -1 on a plain topic)."""
    return f"{msg_id.ledger_id()}:{msg_id.entry_id()}:{msg_id.partition()}:{msg_id.batch_index()}"


def partition_name(base: str, msg_id: Any) -> str:
    """The full name of the partition that stored `msg_id` (the base topic when not partitioned):
    pulsar-client's send receipts carry the partition index, not the topic name."""
    partition = msg_id.partition()
    return f"{base}-partition-{partition}" if partition >= 0 else base


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def exit_process(code: int = 0) -> None:
    """End now, without waiting on pulsar-client's threads (history lines are already written)."""
    logging.shutdown()
    os._exit(code)
