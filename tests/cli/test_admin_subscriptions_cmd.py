"""`strata admin topics ...` subscription commands against a real standalone: pulsar-admin's names
and flags, each command's effect seen in the broker's stats or the messages it prints, `-o json`
and tables, confirmation before destructive commands, the progress path, and bad arguments
refused before anything is sent."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator

import pulsar
import pytest

from cli import admin
from cli.admin import subscriptions as subs_cmd
from tests.acceptance.conftest import make_client
from tests.support.admin_cli import run_admin
from tests.support.standalone_proc import StandaloneProcess

_ids = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("standalone") / "data") as sa:
        yield sa


@pytest.fixture
def client(standalone: StandaloneProcess) -> Iterator[pulsar.Client]:
    c = make_client(standalone.service_url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/subs-cli-{os.getpid()}-{next(_ids)}"


def produce(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode(), properties={"n": str(i)}) for i in range(count)]
    producer.close()
    return ids


def strata(standalone: StandaloneProcess, *argv: str) -> int:
    return run_admin(["--admin-url", standalone.admin_url, *argv])


def json_out(capsys: pytest.CaptureFixture[str]) -> object:
    return json.loads(capsys.readouterr().out)


def backlog(standalone: StandaloneProcess, topic: str, sub: str, capsys: pytest.CaptureFixture[str]) -> int:
    assert strata(standalone, "topics", "stats", topic) == 0
    stats = json_out(capsys)
    assert isinstance(stats, dict)
    return stats["subscriptions"][sub]["msgBacklog"]


def test_create_skip_peek_reset_expire_unsubscribe(standalone, client, topic, capsys, monkeypatch) -> None:
    ids = produce(client, topic, 5)
    assert strata(standalone, "topics", "create-subscription", topic, "-s", "s", "-m", "earliest") == 0
    assert strata(standalone, "topics", "subscriptions", topic) == 0
    assert json_out(capsys) == ["s"]
    assert strata(standalone, "topics", "skip", topic, "-s", "s", "-n", "2") == 0
    assert backlog(standalone, topic, "s", capsys) == 3

    assert strata(standalone, "topics", "peek-messages", topic, "-s", "s", "-n", "2") == 0
    peeked = json_out(capsys)
    assert [m["payload"] for m in peeked] == ["m2", "m3"]
    assert [m["properties"] for m in peeked] == [{"n": "2"}, {"n": "3"}]
    assert peeked[0]["messageId"] == f"{ids[2].ledger_id()}:{ids[2].entry_id()}"
    assert backlog(standalone, topic, "s", capsys) == 3               # peeking consumes nothing

    assert strata(standalone, "topics", "reset-cursor", topic, "-s", "s", "-m",
                  f"{ids[0].ledger_id()}:{ids[0].entry_id()}", "-e") == 0
    assert backlog(standalone, topic, "s", capsys) == 4
    assert strata(standalone, "topics", "reset-cursor", topic, "-s", "s", "-t", "1h") == 0
    assert backlog(standalone, topic, "s", capsys) == 5
    monkeypatch.setattr(subs_cmd, "PROGRESS_BACKLOG_MIN", 0)        # the polled path, on a small backlog
    assert strata(standalone, "topics", "expire-messages", topic, "-s", "s", "-t", "0") == 0
    assert backlog(standalone, topic, "s", capsys) == 0
    assert strata(standalone, "topics", "reset-cursor", topic, "-s", "s", "-m", "earliest") == 0
    assert strata(standalone, "topics", "clear-backlog", topic, "-s", "s") == 0
    assert backlog(standalone, topic, "s", capsys) == 0
    assert strata(standalone, "topics", "reset-cursor", topic, "-s", "s", "-m", "earliest") == 0
    assert strata(standalone, "topics", "expire-messages-all-subscriptions", topic, "-t", "0") == 0
    assert backlog(standalone, topic, "s", capsys) == 0

    assert strata(standalone, "topics", "unsubscribe", topic, "-s", "s") == 0
    assert strata(standalone, "topics", "unsubscribe", topic, "-s", "s") == 1
    assert f"HTTP 404: Subscription s not found for topic {topic}" in capsys.readouterr().err


def test_examine_get_by_id_and_a_batch(standalone, client, topic, capsys) -> None:
    first = produce(client, topic, 1)[0]
    batcher = client.create_producer(topic, batching_enabled=True, batching_max_messages=3,
                                     batching_max_publish_delay_ms=60_000)
    for i in range(3):
        batcher.send_async(f"b{i}".encode(), None, properties={"i": str(i)})
    batcher.flush()
    assert strata(standalone, "topics", "create-subscription", topic, "-s", "s", "-m", "earliest") == 0
    assert strata(standalone, "topics", "peek-messages", topic, "-s", "s", "-n", "3") == 0
    peeked = json_out(capsys)
    assert [m["payload"] for m in peeked] == ["m0", "b0", "b1"]       # a batch counts per message
    batch_entry = peeked[1]["messageId"].rsplit(":", 1)[0]
    assert [m["messageId"] for m in peeked[1:]] == [f"{batch_entry}:0", f"{batch_entry}:1"]
    assert peeked[2]["properties"] == {"i": "1"}
    assert peeked[1]["headers"]["X-Pulsar-num-batch-message"] == "3"
    assert strata(standalone, "topics", "examine-messages", topic, "-i", "earliest", "-m", "1") == 0
    assert [m["payload"] for m in json_out(capsys)] == ["m0"]
    assert strata(standalone, "topics", "examine-messages", topic) == 0     # latest, 1: the batch
    assert [m["payload"] for m in json_out(capsys)] == ["b0", "b1", "b2"]
    assert strata(standalone, "topics", "get-message-by-id", topic, "-l", str(first.ledger_id()),
                  "-e", str(first.entry_id())) == 0
    assert json_out(capsys)[0]["properties"] == {"n": "0"}
    # tables (the default): id, headers, payload
    url = ["--admin-url", standalone.admin_url]
    assert admin.main([*url, "topics", "peek-messages", topic, "-s", "s", "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert f"Message ID: {first.ledger_id()}:{first.entry_id()}" in out and "m0" in out
    assert "X-Pulsar-publish-time" in out and f"Message ID: {batch_entry}:0" in out


def test_destructive_commands_ask_first(standalone, client, topic, capsys) -> None:
    produce(client, topic, 3)
    assert strata(standalone, "topics", "create-subscription", topic, "-s", "s", "-m", "earliest") == 0
    url = ["--admin-url", standalone.admin_url]
    for argv in (["clear-backlog", topic, "-s", "s"], ["skip", topic, "-s", "s", "-n", "1"],
                 ["unsubscribe", topic, "-s", "s"], ["expire-messages", topic, "-s", "s", "-t", "0"],
                 ["reset-cursor", topic, "-s", "s", "-m", "latest"]):
        assert admin.main([*url, "topics", *argv]) == 2          # stdin is no terminal: refused
        assert "pass --yes" in capsys.readouterr().err
    assert backlog(standalone, topic, "s", capsys) == 3
    assert admin.main([*url, "topics", "skip", topic, "-s", "s", "-n", "1", "--yes"]) == 0
    assert backlog(standalone, topic, "s", capsys) == 2


@pytest.mark.parametrize("argv", [
    ["skip", "t", "-s", "s", "-n", "0"],
    ["skip", "t", "-s", "s"],
    ["peek-messages", "t", "-s", "s", "-n", "abc"],
    ["reset-cursor", "t", "-s", "s"],
    ["reset-cursor", "t", "-s", "s", "-m", "1:x"],
    ["reset-cursor", "t", "-s", "s", "-m", "latest", "-t", "1h"],
    ["reset-cursor", "t", "-s", "s", "-t", "-5m"],
    ["expire-messages", "t", "-s", "s", "-t", "10q"],
    ["create-subscription", "t", "-s", "s", "-m", "first"],
    ["examine-messages", "t", "-i", "middle"],
    ["get-message-by-id", "t", "-l", "-1", "-e", "0"],
], ids=lambda argv: "-".join(argv).replace("/", "_"))
def test_bad_arguments_exit_2_before_sending(argv: list[str]) -> None:
    # the admin URL is a closed port: anything sent would fail with exit 1, not 2
    with pytest.raises(SystemExit) as exited:
        admin.main(["--admin-url", "http://127.0.0.1:9", "-y", "topics", *argv])
    assert exited.value.code == 2


def test_bad_topic_name_exits_2() -> None:
    assert admin.main(["--admin-url", "http://127.0.0.1:9", "-y", "topics", "skip", "a//b", "-s", "s",
                       "-n", "1"]) == 2


@pytest.mark.parametrize(("text", "body"), [
    ("earliest", {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}),
    ("latest", {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1, "partitionIndex": -1}),
    ("12:3", {"ledgerId": 12, "entryId": 3, "partitionIndex": -1})])
def test_message_ids_as_pulsar_admin_sends_them(text: str, body: dict) -> None:
    assert subs_cmd.message_id(text) == body


def test_hex_dump() -> None:
    assert subs_cmd.hex_dump(b"\x00ab" + bytes(range(14)) + b"z") == (
        "00000000  00 61 62 00 01 02 03 04 05 06 07 08 09 0a 0b 0c  |.ab.............|\n"
        "00000010  0d 7a" + " " * 44 + "|.z|")


def test_a_batch_member_shows_its_own_key_and_sequence_id() -> None:
    from entries.batch import BatchMessage, serialize_batch
    raw = serialize_batch([BatchMessage(b"a", {"i": "0"}, partition_key="k6", sequence_id=300),
                           BatchMessage(b"b", {"i": "1"}, partition_key="k0", sequence_id=301),
                           BatchMessage(b"c", {"i": "2"}, sequence_id=302)])
    headers = {"X-Pulsar-Message-ID": "6:3", "X-Pulsar-num-batch-message": "3", "X-Pulsar-partition-key": "k6",
               "X-Pulsar-sequence-id": "300", "X-Pulsar-producer-name": "p"}     # the entry's: its first member's
    members = subs_cmd.split_entry(raw, headers)
    assert [m["messageId"] for m in members] == ["6:3:0", "6:3:1", "6:3:2"]
    assert [m["headers"].get("X-Pulsar-partition-key") for m in members] == ["k6", "k0", None]
    assert [m["headers"]["X-Pulsar-sequence-id"] for m in members] == ["300", "301", "302"]
    assert all(m["headers"]["X-Pulsar-producer-name"] == "p" for m in members)
