"""The Spark source types `value` with the topic's own schema (no `valueSchema` given): a topic
whose producers use the official client's AvroSchema (two compatible versions, each message read
with the version that wrote it, resolved to the latest) or JsonSchema; a topic without a schema
has no `value`; an explicit `valueSchema` still wins; an Avro schema with a union Spark cannot
type is refused with a clear error. Also the Avro → Spark type mapping, without Spark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pulsar
import pytest
from pulsar.schema import AvroSchema, Boolean, Double, Integer, JsonSchema, Record, String

from analytics.topic_schema import struct_of
from common.errors import BadSourceOption
from tests.acceptance.conftest import make_client
from tests.support.standalone_proc import StandaloneProcess

pytestmark = pytest.mark.timeout(300)
NS = "public/default"


def user(**fields) -> type:
    return type("User", (Record,), fields)


V0 = user(name=String(), age=Integer())
V1 = user(name=String(), age=Integer(), score=Double(required_default=True))


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("schema-spark") / "data") as proc:
        yield proc


def _read(spark, sa: StandaloneProcess, topic: str, **extra: str):
    options = {"metadataUrl": sa.metadata_url, "admin.url": sa.admin_url, "topic": topic, **extra}
    return spark.read.format("strata").options(**options).load()


def _topic(name: str) -> str:
    return f"persistent://{NS}/{name}-{os.getpid()}"


def test_avro_values_are_decoded_with_each_writers_version(spark, sa: StandaloneProcess) -> None:
    topic = _topic("avro")
    client = make_client(sa.service_url)
    old = client.create_producer(topic, schema=AvroSchema(V0), batching_enabled=False)
    new = client.create_producer(topic, schema=AvroSchema(V1), batching_enabled=False)
    for i in range(3):
        old.send(V0(name=f"old{i}", age=i))
        new.send(V1(name=f"new{i}", age=10 + i, score=i / 2))
    client.close()
    df = _read(spark, sa, topic)
    assert [f.name for f in df.schema["value"].dataType.fields] == ["name", "age", "score"]
    rows = [r["value"].asDict() for r in df.orderBy("ledger_id", "entry_id").select("value").collect()]
    expected = []
    for i in range(3):
        expected += [{"name": f"old{i}", "age": i, "score": None}, {"name": f"new{i}", "age": 10 + i, "score": i / 2}]
    assert rows == expected


def test_json_values_and_the_explicit_value_schema_wins(spark, sa: StandaloneProcess) -> None:
    topic = _topic("json")
    flags = user(name=String(), ok=Boolean())
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, schema=JsonSchema(flags))
    for i in range(4):
        producer.send(flags(name=f"n{i}", ok=i % 2 == 0))
    client.close()
    values = [r["value"] for r in _read(spark, sa, topic).orderBy("entry_id").select("value").collect()]
    assert [(v["name"], v["ok"]) for v in values] == [(f"n{i}", i % 2 == 0) for i in range(4)]
    only_name = json.dumps({"type": "struct", "fields": [{"name": "name", "type": "string", "nullable": True,
                                                          "metadata": {}}]})
    df = _read(spark, sa, topic, valueSchema=only_name)
    assert [f.name for f in df.schema["value"].dataType.fields] == ["name"]


def test_a_topic_without_schema_has_no_value_column(spark, sa: StandaloneProcess) -> None:
    topic = _topic("bytes")
    client = make_client(sa.service_url)
    client.create_producer(topic).send(b"raw")
    client.close()
    df = _read(spark, sa, topic)
    assert "value" not in df.columns and df.count() == 1


def test_avro_to_spark_types() -> None:
    record = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "long"]}, {"name": "b", "type": {"type": "array", "items": "string"}},
        {"name": "c", "type": {"type": "map", "values": "int"}},
        {"name": "d", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "e", "type": {"type": "record", "name": "In", "fields": [{"name": "f", "type": "bytes"}]}}]}
    struct = struct_of(record)
    assert [(f["name"], f["type"], f["nullable"]) for f in struct["fields"][:1]] == [("a", "long", True)]
    assert struct["fields"][1]["type"] == {"type": "array", "elementType": "string", "containsNull": False}
    assert struct["fields"][2]["type"]["valueType"] == "integer"
    assert struct["fields"][3]["type"] == "string"
    assert struct["fields"][4]["type"]["fields"][0]["type"] == "binary"
    with pytest.raises(BadSourceOption, match="union Spark cannot type"):
        struct_of({"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]})


def test_official_client_decoding_still_works(sa: StandaloneProcess) -> None:
    """The schema the source reads is the one the client decodes with (a sanity check of the pair)."""
    topic = _topic("pair")
    client = make_client(sa.service_url)
    consumer = client.subscribe(topic, "s", schema=AvroSchema(V0))
    client.create_producer(topic, schema=AvroSchema(V0)).send(V0(name="x", age=1))
    assert consumer.receive(10_000).value().name == "x"
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(user(name=Integer())))
    client.close()
