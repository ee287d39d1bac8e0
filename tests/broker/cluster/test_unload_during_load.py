"""A topic load in flight when its bundle is unloaded must not leave the topic served.

Found by `strata chaos`: load shedding moved a bundle while a client's reconnect was loading one of
its topics on the old owner. The load had passed its ownership check before the unload began and
finished after it, so the old owner served the topic again and opened its managed ledger under
the new owner (whose ledger and cursors were then fenced: appends failed and acks were dropped).

A real broker (in process, on SQLite and a real bookie) is made to hold one load inside its
managed ledger's open (fault injection: `ManagedLedger.open` waits on a gate). The bundle is
unloaded meanwhile; then the gate opens. What must hold: the unload waits for the load in flight,
the load ends with BundleNotOwned (it closes what it opened), and the topic is not served.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.server import Broker
from common.config import default_config
from common.errors import BundleNotOwned
from common.topic_names import parse_topic
from launch.bookie import BookieProcess
from ledger.managed_ledger import ManagedLedger

BOUND_S = 60.0


@pytest.fixture
def bookie(tmp_path):
    url = f"sqlite:///{tmp_path}/meta.db"
    node = BookieProcess.start(tmp_path / "bookie", metadata_url=url)
    try:
        yield url
    finally:
        node.close()


def test_a_load_in_flight_does_not_outlive_the_unload_of_its_bundle(bookie, monkeypatch):
    gate: asyncio.Event | None = None
    entered: asyncio.Event | None = None
    real_open = ManagedLedger.open.__func__   # type: ignore[attr-defined]

    async def held_open(cls, *args, **kwargs):
        assert gate is not None and entered is not None
        entered.set()
        await gate.wait()
        return await real_open(cls, *args, **kwargs)

    async def scenario() -> None:
        nonlocal gate, entered
        gate, entered = asyncio.Event(), asyncio.Event()
        config = default_config(broker_port=0, broker_admin_port=0, ledger_ensemble_size=1,
                                ledger_write_quorum=1, ledger_ack_quorum=1)
        broker = Broker(config, bookie)
        await broker.start()
        try:
            service = broker.service
            assert service is not None
            warm = parse_topic("persistent://public/default/warm")
            await service.get_topic(warm)                      # the service has started
            name = parse_topic("persistent://public/default/held")
            monkeypatch.setattr(ManagedLedger, "open", classmethod(held_open))
            load = asyncio.ensure_future(service.get_topic(name))
            await asyncio.wait_for(entered.wait(), BOUND_S)     # past its ownership check, inside open
            bundle = await service.ownership.bundle_of(name)
            unload = asyncio.ensure_future(service.ownership.unload(name.tenant, name.namespace, bundle))
            await asyncio.sleep(0.2)
            assert not unload.done(), "the unload waits for the load in flight"
            gate.set()
            assert await asyncio.wait_for(unload, BOUND_S)
            with pytest.raises(BundleNotOwned):
                await asyncio.wait_for(load, BOUND_S)
            assert str(name) not in service.topics
        finally:
            gate.set()
            await broker.stop()

    asyncio.run(asyncio.wait_for(scenario(), BOUND_S * 2))
