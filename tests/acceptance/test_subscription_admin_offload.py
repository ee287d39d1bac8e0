"""Subscription admin operations on entries that live only in the cold tier: a real standalone with a
real SeaweedFS (the session's `s3_server`), ledgers rolled every 100 entries, the closed ones
offloaded and their bookie copies deleted (deletion lag 0). Peek, examine, get-by-id, skip and a
reset by time then read through the managed ledger's cold path: payloads and headers as sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.acceptance.conftest import make_client
from tests.acceptance.test_subscription_admin import base_url, call, call_raw, sub_stats
from tests.support.namespaces import ensure_namespace
from tests.support.offload_checks import Admin, bookie_snapshot
from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

MESSAGES = 250                   # ledgers of 100, 100 (both offloaded) and 50 (open)
OFFLOAD_TIMEOUT_S = 120.0
BOOKIE_DELETE_TIMEOUT_S = 60.0
NS = f"public/subs-offload-{os.getpid()}"
TOPIC = f"persistent://{NS}/cold"
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "100",
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200",
       "STRATA_RETENTION_TIME_MINUTES": "-1", "STRATA_RETENTION_SIZE_MB": "-1",
       "STRATA_BOOKIE_CHECKPOINT_INTERVAL_MS": "300", "STRATA_BOOKIE_GC_INTERVAL_MS": "300"}


@pytest.fixture(scope="module")
def cold(s3_server: TestSeaweed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneProcess,
                                                                                             list]]:
    env = {**s3_server.standalone_env(s3_server.new_bucket(), f"subs-{os.getpid()}"), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("subs-offload") / "data", env=env) as sa:
        ensure_namespace(sa.admin_url, NS)
        client = make_client(sa.service_url)
        producer = client.create_producer(TOPIC, batching_enabled=False, producer_name="cold-producer")
        ids = [producer.send(f"c{i}".encode(), properties={"i": str(i)}) for i in range(MESSAGES)]
        client.close()
        admin = Admin(sa.admin_url)
        ledgers = admin.ledgers(TOPIC)
        closed = {int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0}
        assert len(closed) == 2, ledgers
        status, answer = admin.offload(TOPIC, int(ledgers[-1]["ledgerId"]))
        assert status == 204, (status, answer)
        assert admin.wait_offload_finished(TOPIC, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        assert admin.set_ns(NS, "offloadDeletionLagMs", 0)[0] == 204
        wait_until(lambda: not (bookie_snapshot(sa.data_dir).ledger_ids & closed), BOOKIE_DELETE_TIMEOUT_S,
                   what="the bookie copies of the offloaded ledgers deleted", interval_s=0.2)
        yield sa, ids


def test_peek_examine_and_get_by_id_read_the_cold_tier(cold) -> None:
    sa, ids = cold
    url = base_url(sa, TOPIC)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    status, headers, body = call_raw("GET", url + "/subscription/s/position/1")
    assert (status, body) == (200, b"c0")
    assert headers["X-Pulsar-Message-ID"] == f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert json.loads(headers["X-Pulsar-PROPERTY"]) == {"i": "0"}
    assert headers["X-Pulsar-producer-name"] == "cold-producer"
    status, headers, body = call_raw("GET", url + f"/ledger/{ids[150].ledger_id()}/entry/{ids[150].entry_id()}")
    assert (status, body) == (200, b"c150") and headers["X-Pulsar-sequence-id"] == "150"
    status, _headers, body = call_raw("GET", url + "/examinemessage?initialPosition=earliest&messagePosition=101")
    assert (status, body) == (200, b"c100")
    status, _headers, body = call_raw("GET", url + "/examinemessage?initialPosition=latest&messagePosition=1")
    assert (status, body) == (200, f"c{MESSAGES - 1}".encode())


def test_skip_and_reset_into_offloaded_ledgers(cold) -> None:
    sa, _ids = cold
    url = base_url(sa, TOPIC)
    assert call("PUT", url + "/subscription/moves", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call("POST", url + "/subscription/moves/skip/120")[0] == 204
    assert sub_stats(sa, TOPIC, "moves")["msgBacklog"] == MESSAGES - 120
    status, _headers, body = call_raw("GET", url + "/subscription/moves/position/1")
    assert (status, body) == (200, b"c120")
    assert call("POST", url + "/subscription/moves/skip_all")[0] == 204
    assert call("POST", url + "/subscription/moves/resetcursor/0")[0] == 204
    assert sub_stats(sa, TOPIC, "moves")["msgBacklog"] == MESSAGES
    client = make_client(sa.service_url)
    try:
        consumer = client.subscribe(TOPIC, "moves")
        got = [consumer.receive(30_000) for _ in range(MESSAGES)]
        assert [m.data() for m in got] == [f"c{i}".encode() for i in range(MESSAGES)]
    finally:
        client.close()


def test_console_browses_offloaded_ledgers(cold) -> None:
    """The web console's `GET .../messages` reads the cold tier too, both ways and by publish time."""
    sa, ids = cold
    url = base_url(sa, TOPIC) + "/messages"
    status, oldest = call("GET", url + "?from=earliest&limit=3")
    assert status == 200, oldest
    assert [m["payload"]["value"] for m in oldest["messages"]] == ["c0", "c1", "c2"]
    assert oldest["messages"][0]["properties"] == {"i": "0"}
    assert oldest["messages"][0]["messageId"] == f"{ids[0].ledger_id()}:{ids[0].entry_id()}:-1"
    status, middle = call("GET", url + f"?messageId={ids[150].ledger_id()}:{ids[150].entry_id()}&limit=1")
    assert status == 200 and middle["messages"][0]["payload"]["value"] == "c150", middle
    status, back = call("GET", url + f"?before={ids[101].ledger_id()}:{ids[101].entry_id()}&limit=3")
    assert status == 200 and [m["payload"]["value"] for m in back["messages"]] == ["c100", "c99", "c98"], back
    status, filtered = call("GET", url + "?contains=c42&from=earliest&limit=1")
    assert status == 200 and [m["payload"]["value"] for m in filtered["messages"]] == ["c42"], filtered
    first_ms = oldest["messages"][1]["publishTime"]
    status, by_time = call("GET", url + f"?publishTime={first_ms}&limit=1")
    assert status == 200 and by_time["messages"][0]["publishTime"] >= first_ms, by_time
