"""The console's Messages and Live tail tabs against a real secured standalone: Avro and JSON
messages decoded into their fields, newest first, a key filter, the largest message the
standalone takes shown truncated with "Show all", and a live tail showing a message sent after
it opened.

Messages are produced with the official client as the tenant's admin (alice), who is also the
role logged in to the page.
"""

from __future__ import annotations

from collections.abc import Iterator

import pulsar
import pytest
from playwright.sync_api import Page, expect
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String

from tests.console.conftest import ConsoleStandalone, doc_shot, login, unique

# broker_max_message_bytes is 5 MiB and bounds payload plus metadata: 5 MiB itself is
# MessageTooBig from the client, 512 bytes less is taken
LARGEST_PAYLOAD_BYTES = 5 * 1024 * 1024 - 512


class Reading(Record):
    sensor = String()
    celsius = Integer()


@pytest.fixture
def client(console_sa: ConsoleStandalone) -> Iterator[pulsar.Client]:
    c = console_sa.client("alice")
    yield c
    c.close()


def open_tab(page: Page, console_sa: ConsoleStandalone, topic: str, tab: str) -> None:
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(f"{console_sa.url}#/topic/ta/ns/{topic}/{tab}")


def payloads(page: Page):
    return page.get_by_role("article").get_by_test_id("payload")


def test_avro_messages_are_decoded_newest_first(page: Page, console_sa: ConsoleStandalone,
                                                client: pulsar.Client) -> None:
    topic = unique("avro")
    producer = client.create_producer(f"persistent://ta/ns/{topic}", schema=AvroSchema(Reading),
                                      batching_enabled=False)
    for i in range(3):
        producer.send(Reading(sensor=f"greenhouse-{i}", celsius=20 + i))
    producer.close()
    open_tab(page, console_sa, topic, "messages")
    page.get_by_role("button", name="Browse").click()
    expect(payloads(page)).to_have_count(3)
    expect(payloads(page).first).to_contain_text('"sensor": "greenhouse-2"')   # the newest first
    expect(payloads(page).first).to_contain_text('"celsius": 22')
    expect(payloads(page).last).to_contain_text('"sensor": "greenhouse-0"')
    expect(page.get_by_role("article").first).to_contain_text("avro")
    expect(page.get_by_test_id("browse-summary")).to_contain_text("Reached the end of the topic")
    doc_shot(page, "messages")


def test_json_messages_are_decoded_and_filtered_by_key(page: Page, console_sa: ConsoleStandalone,
                                                       client: pulsar.Client) -> None:
    topic = unique("json")
    producer = client.create_producer(f"persistent://ta/ns/{topic}", schema=JsonSchema(Reading),
                                      batching_enabled=False)
    for i in range(6):
        producer.send(Reading(sensor=f"field-{i}", celsius=i), partition_key=f"k{i % 2}")
    producer.close()
    open_tab(page, console_sa, topic, "messages")
    page.get_by_label("Key").fill("k1")
    page.get_by_role("button", name="Browse").click()
    expect(payloads(page)).to_have_count(3)
    for position, i in enumerate((5, 3, 1)):
        expect(payloads(page).nth(position)).to_contain_text(f'"sensor": "field-{i}"')
    expect(page.get_by_role("article").first).to_contain_text("json")
    page.get_by_label("Start from").select_option("earliest")
    page.get_by_label("Key").fill("k0")
    page.get_by_role("button", name="Browse").click()
    expect(payloads(page).first).to_contain_text('"sensor": "field-0"')
    expect(payloads(page)).to_have_count(3)


def test_the_largest_message_is_truncated_until_show_all(page: Page, console_sa: ConsoleStandalone,
                                                         client: pulsar.Client) -> None:
    topic = unique("large")
    producer = client.create_producer(f"persistent://ta/ns/{topic}", batching_enabled=False,
                                      chunking_enabled=False)
    producer.send(b"B" * (LARGEST_PAYLOAD_BYTES - 3) + b"END")
    producer.close()
    open_tab(page, console_sa, topic, "messages")
    page.get_by_role("button", name="Browse").click()
    message = page.get_by_role("article")
    expect(message).to_contain_text("Payload truncated")
    shown = message.get_by_test_id("payload")
    assert shown.evaluate("e => e.textContent.length") < LARGEST_PAYLOAD_BYTES
    message.get_by_role("button", name="Show all").click()
    expect(message.get_by_text("Payload truncated")).to_have_count(0, timeout=30_000)
    assert shown.evaluate("e => e.textContent.length") == LARGEST_PAYLOAD_BYTES
    assert shown.evaluate("e => e.textContent.endsWith('BEND')")


def test_the_live_tail_shows_a_message_sent_after_it_opened(page: Page, console_sa: ConsoleStandalone,
                                                            client: pulsar.Client) -> None:
    topic = unique("tail")
    producer = client.create_producer(f"persistent://ta/ns/{topic}", batching_enabled=False)
    producer.send(b"before the tail opened")
    open_tab(page, console_sa, topic, "tail")
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_test_id("tail-status")).to_contain_text("Tailing")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_role("article")).to_have_count(0)
    producer.send(b"hello from the tail test", properties={"origin": "pytest"})
    expect(page.get_by_role("article")).to_contain_text("hello from the tail test")
    expect(page.get_by_role("article")).to_contain_text("origin=pytest")
    producer.send(b"a second one")
    expect(page.get_by_role("article").first).to_contain_text("a second one")   # the newest at the top
    expect(page.get_by_text("before the tail opened")).to_have_count(0)
    doc_shot(page, "tail")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_test_id("tail-status")).to_contain_text("Stopped")
    producer.close()
