"""The official client's TableView (pulsar-client 3.x `Client.create_table_view`) over a compacted
topic, against a real standalone.

The topic is written, compacted, and then retention trims every ledger the compaction replaced
(ledgers roll every 10 entries, retention 0, no other subscription): the TableView's reader
(read_compacted, from earliest) must rebuild the table from the compacted ledger alone, then
follow the tail: the latest value per key, a tombstoned key absent, later messages applied.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.acceptance.conftest import make_client
from tests.acceptance.test_compaction import compact
from tests.support.admin_http import topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "10", "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "300"}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("table-view") / "data", env=ENV) as sa:
        yield sa


def test_table_view_over_a_compacted_and_trimmed_topic(standalone) -> None:
    topic = "persistent://public/default/table-view"
    client = make_client(standalone.service_url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(60):
            producer.send(f"v{i}".encode(), partition_key=f"k{i % 6}")
        producer.send(b"", partition_key="k4")             # tombstone
        first_ledger = topic_get(standalone.admin_url, topic, "internalStats")["ledgers"][0]["ledgerId"]
        compact(standalone, topic)

        def trimmed() -> bool:
            ledgers = topic_get(standalone.admin_url, topic, "internalStats")["ledgers"]
            return ledgers[0]["ledgerId"] != first_ledger and len(ledgers) <= 2

        wait_until(trimmed, 30, "retention trims what compaction replaced")
        table = client.create_table_view(topic)
        try:
            assert len(table) == 5
            assert {f"k{k}": table.get(f"k{k}") for k in range(6)} == {
                "k0": b"v54", "k1": b"v55", "k2": b"v56", "k3": b"v57", "k4": None, "k5": b"v59"}
            producer.send(b"new", partition_key="k1")
            producer.send(b"", partition_key="k0")
            wait_until(lambda: table.get("k1") == b"new" and table.get("k0") is None, 10, "tail applied")
            assert len(table) == 4
        finally:
            table.close()
    finally:
        client.close()
