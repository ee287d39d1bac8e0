"""Fixtures for acceptance tests: a real `strata standalone` and the official pulsar client.

One standalone per test module (module scope) keeps the suite fast; tests isolate themselves with
unique topic names (`topic` fixture). Tests that restart or crash the standalone start their own.
"""

from __future__ import annotations

import itertools
import os

import pulsar
import pytest

from tests.support.standalone_proc import StandaloneProcess

_ids = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("standalone") / "data"
    with StandaloneProcess.start(data_dir) as sa:
        yield sa


def make_client(service_url: str, **kwargs) -> pulsar.Client:
    """The official client, quiet, with bounded operations."""
    kwargs.setdefault("operation_timeout_seconds", 15)
    kwargs.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return pulsar.Client(service_url, **kwargs)


@pytest.fixture
def client(standalone: StandaloneProcess):
    c = make_client(standalone.service_url)
    yield c
    try:
        c.close()
    except pulsar.AlreadyClosed:
        # a producer of a terminated topic that the client itself had already closed (it re-created
        # it after the broker's CLOSE_PRODUCER and was refused): the C++ client's close reports it
        pass


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"persistent://public/default/{name}-{os.getpid()}-{next(_ids)}"


def receive_all(consumer: pulsar.Consumer, count: int, timeout_ms: int = 10_000, ack: bool = True) -> list:
    """Receive exactly `count` messages (acking each unless told not to)."""
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_ms)
        if ack:
            consumer.acknowledge(msg)
        out.append(msg)
    return out


def assert_no_more(consumer: pulsar.Consumer, timeout_ms: int = 500) -> None:
    with pytest.raises(pulsar.Timeout):
        msg = consumer.receive(timeout_ms)
        raise AssertionError(f"unexpected message {msg.data()!r}")
