"""The schema registry against a real standalone with the official client (pulsar-client 3.13.0:
`pulsar.schema.AvroSchema` / `JsonSchema` over `Record` classes), the admin REST API, the CLI and,
for what the client cannot send, a raw protocol client.

- A topic without a schema: no schema over REST (404), an empty version in each message, and a
  BytesSchema producer registers nothing.
- The first Avro producer registers version 0; an evolution FULL accepts (a field with a default)
  is version 1, and a consumer decodes both versions' messages (the client fetches the writer
  schema by version with GET_SCHEMA).
- An incompatible producer and an incompatible consumer get IncompatibleSchema and nothing
  changes (no version, no subscription). A record renamed with the same fields is compatible
  (Pulsar's Avro check does not compare record names).
- A namespace set to BACKWARD (JSON schemas) and FORWARD accepts and refuses as Pulsar's table.
- isAllowAutoUpdateSchema=false refuses a new version and takes a known one;
  schemaValidationEnforced=true refuses a producer without a schema.
- REST: upload, versions, compatibility check, delete, and bad input (a malformed definition 422,
  an unknown type 400); the same through `strata admin schemas`.
"""

from __future__ import annotations

import json
import os
import time

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String

from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import receive_all
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call
from tests.support.namespaces import ensure_namespace
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T


def user(**fields) -> type:
    """A Record class named User with these fields."""
    return type("User", (Record,), fields)


USER = user(name=String(), age=Integer())                                       # v0
USER_EMAIL = user(name=String(), age=Integer(), email=String(required_default=True))  # + a field with default
USER_AGE_TEXT = user(name=String(), age=String())                               # a field changes type
ADD_REQUIRED = user(name=String(), age=Integer(), email=String(required=True))  # + a field without default
NAME_AGE = user(name=String(required=True), age=Integer(required=True))
NAME_ONLY = user(name=String(required=True))                                   # NAME_AGE minus a field


def _schema_url(topic: str, suffix: str = "/schema") -> str:
    return "/admin/v2/schemas/" + topic.split("://", 1)[1] + suffix


def _versions(admin_url: str, topic: str) -> list[int]:
    status, body = admin_call(admin_url, "GET", _schema_url(topic, "/schemas"))
    assert status == 200, body
    return [s["version"] for s in body["getSchemaResponses"]]


def test_a_topic_without_schema_has_none_and_bytes_register_nothing(standalone, client, topic) -> None:
    status, body = admin_call(standalone.admin_url, "GET", _schema_url(topic))
    assert status == 404 and body["reason"] == "Schema not found"
    producer = client.create_producer(topic, schema=pulsar.schema.BytesSchema())
    consumer = client.subscribe(topic, "s")
    producer.send(b"plain")
    msg = consumer.receive(10_000)
    assert msg.data() == b"plain" and msg.schema_version() == ""
    assert admin_call(standalone.admin_url, "GET", _schema_url(topic))[0] == 404
    assert _versions(standalone.admin_url, topic) == []


def test_first_consumer_of_an_idle_topic_registers_its_schema(standalone, client, topic) -> None:
    client.subscribe(topic, "s", schema=AvroSchema(USER))
    status, body = admin_call(standalone.admin_url, "GET", _schema_url(topic))
    assert status == 200 and (body["version"], body["type"]) == (0, "AVRO")
    assert json.loads(body["data"]) == USER.schema()


def test_avro_producers_register_versions_and_a_consumer_decodes_both(standalone, client, topic) -> None:
    v0 = client.create_producer(topic, schema=AvroSchema(USER))
    consumer = client.subscribe(topic, "s", schema=AvroSchema(USER_EMAIL))
    v1 = client.create_producer(topic, schema=AvroSchema(USER_EMAIL))
    assert client.create_producer(topic, schema=AvroSchema(USER)) is not None     # v0 again: no new version
    assert _versions(standalone.admin_url, topic) == [0, 1]
    status, body = admin_call(standalone.admin_url, "GET", _schema_url(topic, "/schema/0"))
    assert status == 200 and json.loads(body["data"]) == USER.schema()
    v0.send(USER(name="ann", age=3))
    v1.send(USER_EMAIL(name="bob", age=4, email="b@x"))
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    # the version each message carries (the C++ client shows its 8 bytes as a string)
    assert [m._message.int_schema_version() for m in (first, second)] == [0, 1]
    assert (first.value().name, first.value().age, first.value().email) == ("ann", 3, None)
    assert (second.value().name, second.value().email) == ("bob", "b@x")


def test_incompatible_producer_and_consumer_are_refused_and_nothing_changes(standalone, client, topic) -> None:
    client.create_producer(topic, schema=AvroSchema(USER))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(USER_AGE_TEXT))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "wrong", schema=AvroSchema(USER_AGE_TEXT))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(USER))           # another type
    assert _versions(standalone.admin_url, topic) == [0]
    status, subs = admin_call(standalone.admin_url, "GET",
                              "/admin/v2/persistent/" + topic.split("://")[1] + "/subscriptions")
    assert status == 200 and "wrong" not in subs


def test_a_renamed_record_is_accepted_under_the_default_full(standalone, client, topic) -> None:
    fields = {"name": String(), "age": Integer()}
    a, b = type("A", (Record,), dict(fields)), type("B", (Record,), dict(fields))
    first = client.create_producer(topic, schema=AvroSchema(a))
    consumer = client.subscribe(topic, "s", schema=AvroSchema(b))
    first.send(a(name="x", age=1))
    client.create_producer(topic, schema=AvroSchema(b)).send(b(name="y", age=2))
    assert [(m.value().name, m.value().age) for m in receive_all(consumer, 2)] == [("x", 1), ("y", 2)]
    assert _versions(standalone.admin_url, topic) == [0, 1]


def _namespace(admin_url: str, name: str, **policy) -> str:
    ns = f"schemas/{name}-{os.getpid()}-{time.monotonic_ns()}"
    ensure_namespace(admin_url, ns)
    for suffix, value in policy.items():
        method = "PUT" if suffix == "schemaCompatibilityStrategy" else "POST"
        status, body = admin_call(admin_url, method, f"/admin/v2/namespaces/{ns}/{suffix}", value)
        assert status == 204, body
        assert admin_call(admin_url, "GET", f"/admin/v2/namespaces/{ns}/{suffix}") == (200, value)
    return ns


def _accepted(client: pulsar.Client, topic: str, schema) -> bool:
    try:
        client.create_producer(topic, schema=schema).close()
    except pulsar.IncompatibleSchema:
        return False
    return True


@pytest.mark.parametrize(("strategy", "add_required_ok", "remove_required_ok"),
                         [("BACKWARD", False, True), ("FORWARD", True, False), ("FULL_TRANSITIVE", False, False),
                          ("ALWAYS_COMPATIBLE", True, True)])
def test_json_schemas_follow_the_namespace_strategy(standalone, client, strategy, add_required_ok,
                                                    remove_required_ok) -> None:
    ns = _namespace(standalone.admin_url, strategy.lower().replace("_", "-"), schemaCompatibilityStrategy=strategy)
    assert _accepted(client, f"persistent://{ns}/a", JsonSchema(USER))
    assert _accepted(client, f"persistent://{ns}/a", JsonSchema(ADD_REQUIRED)) is add_required_ok
    assert _accepted(client, f"persistent://{ns}/b", JsonSchema(NAME_AGE))
    assert _accepted(client, f"persistent://{ns}/b", JsonSchema(NAME_ONLY)) is remove_required_ok


def test_auto_update_off_and_validation_enforced(standalone, client) -> None:
    ns = _namespace(standalone.admin_url, "policies", isAllowAutoUpdateSchema=False, schemaValidationEnforced=True)
    topic = f"persistent://{ns}/t"
    status, body = admin_call(standalone.admin_url, "POST", _schema_url(topic),
                              {"type": "AVRO", "schema": json.dumps(USER.schema()), "properties": {}})
    assert status == 200 and body == {"version": {"version": 0}}
    assert _accepted(client, topic, AvroSchema(USER))                    # a known version: fine
    assert not _accepted(client, topic, AvroSchema(USER_EMAIL))          # compatible, but no auto update
    with pytest.raises(pulsar.IncompatibleSchema):                       # no schema on a topic with one
        client.create_producer(topic)
    plain = f"persistent://{ns}/no-schema"
    client.create_producer(plain).close()                                # no schema on either side: fine
    assert _versions(standalone.admin_url, topic) == [0]


def test_admin_upload_check_delete_and_bad_input(standalone, topic) -> None:
    url = standalone.admin_url
    payload = {"type": "AVRO", "schema": json.dumps(USER.schema()), "properties": {"owner": "ops"}}
    assert admin_call(url, "POST", _schema_url(topic), payload) == (200, {"version": {"version": 0}})
    status, body = admin_call(url, "GET", _schema_url(topic))
    assert status == 200 and body["properties"] == {"owner": "ops"} and body["timestamp"] > 0
    worse = {"type": "AVRO", "schema": json.dumps(USER_AGE_TEXT.schema())}
    assert admin_call(url, "POST", _schema_url(topic, "/compatibility"), worse) == (
        200, {"compatibility": False, "schemaCompatibilityStrategy": "FULL"})
    better = {"type": "AVRO", "schema": json.dumps(USER_EMAIL.schema())}
    assert admin_call(url, "POST", _schema_url(topic, "/compatibility"), better)[1]["compatibility"] is True
    status, body = admin_call(url, "POST", _schema_url(topic), worse)
    assert status == 409 and "FULL" in body["reason"]
    assert admin_call(url, "POST", _schema_url(topic, "/version"), payload) == (200, {"version": 0})
    status, body = admin_call(url, "POST", _schema_url(topic), {"type": "AVRO", "schema": '{"type": "record"'})
    assert status == 422 and "Invalid schema definition" in body["reason"]
    status, body = admin_call(url, "POST", _schema_url(topic), {"type": "AVROZ", "schema": "{}"})
    assert status == 400 and "Invalid schema type" in body["reason"]
    status, body = admin_call(url, "POST", _schema_url(topic), {"type": "BYTES", "schema": ""})
    assert status == 406 and "Do not upload a BYTES schema" in body["reason"]
    status, body = admin_call(url, "PUT", "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy", "NOPE")
    assert status == 400
    assert _versions(url, topic) == [0]
    assert admin_call(url, "DELETE", _schema_url(topic)) == (200, {"version": 1})
    assert admin_call(url, "GET", _schema_url(topic)) == (404, {"reason": "Schema is deleted"})
    assert admin_call(url, "GET", _schema_url(topic, "/schema/1"))[1] == {"reason": "Schema is deleted"}
    assert admin_call(url, "POST", _schema_url(topic), worse) == (200, {"version": {"version": 2}})


def test_binary_protocol_bad_schemas_get_clear_errors(standalone, topic) -> None:
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        bad = pb.Schema(name="x", schema_data=b'{"type": "record", "name": "X", "fields": [{"name": "a"}]}',
                        type=pb.Schema.Avro)
        raw.send(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic=topic, producer_id=1, request_id=1, schema=bad)))
        reply = raw.next_command()
        assert reply.type == T.ERROR and reply.error.error == pb.IncompatibleSchema
        assert "Invalid schema definition" in reply.error.message
        good = pb.Schema(name="x", schema_data=json.dumps(USER.schema()).encode(), type=pb.Schema.Json)
        raw.send(pb.BaseCommand(type=T.GET_OR_CREATE_SCHEMA, getOrCreateSchema=pb.CommandGetOrCreateSchema(
            request_id=2, topic=topic, schema=good)))
        reply = raw.next_command()
        assert reply.type == T.GET_OR_CREATE_SCHEMA_RESPONSE and reply.getOrCreateSchemaResponse.schema_version \
            == (0).to_bytes(8, "big")
        raw.send(pb.BaseCommand(type=T.GET_SCHEMA, getSchema=pb.CommandGetSchema(request_id=3, topic=topic)))
        reply = raw.next_command().getSchemaResponse
        assert reply.schema.type == pb.Schema.Json and reply.schema_version == (0).to_bytes(8, "big")
        raw.send(pb.BaseCommand(type=T.GET_SCHEMA, getSchema=pb.CommandGetSchema(
            request_id=4, topic=topic, schema_version=(7).to_bytes(8, "big"))))
        reply = raw.next_command().getSchemaResponse
        assert reply.error_code == pb.TopicNotFound and "no-schema" in reply.error_message
        raw.send(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic=topic, producer_id=5, request_id=5, schema=good)))
        reply = raw.next_command()
        assert reply.type == T.PRODUCER_SUCCESS and reply.producer_success.schema_version == (0).to_bytes(8, "big")
    finally:
        raw.close()


def test_cli_schemas_commands(standalone, topic, tmp_path, capsys) -> None:
    url = ["--admin-url", standalone.admin_url]
    good = tmp_path / "user.json"
    good.write_text(json.dumps({"type": "JSON", "schema": json.dumps(USER.schema()), "properties": {}}))
    assert run_admin([*url, "schemas", "upload", topic, "-f", str(good)]) == 0
    assert run_admin([*url, "schemas", "compatibility", topic, "-f", str(good)]) == 0
    capsys.readouterr()
    assert run_admin([*url, "schemas", "get", topic, "--all-version"]) == 0
    assert [s["version"] for s in json.loads(capsys.readouterr().out)["getSchemaResponses"]] == [0]
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    assert run_admin([*url, "schemas", "upload", topic, "-f", str(broken)]) == 2
    assert run_admin([*url, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "full"]) == 0
    assert run_admin([*url, "schemas", "delete", topic]) == 0
    assert run_admin([*url, "schemas", "get", topic]) == 1


def test_deleting_a_topic_deletes_its_schemas(standalone, client, topic) -> None:
    client.create_producer(topic, schema=AvroSchema(USER)).close()
    assert _versions(standalone.admin_url, topic) == [0]
    status, body = admin_call(standalone.admin_url, "DELETE", "/admin/v2/persistent/" + topic.split("://")[1])
    assert status == 204, body
    assert _versions(standalone.admin_url, topic) == []
    client.create_producer(topic, schema=AvroSchema(USER_AGE_TEXT)).close()   # a new topic: any schema
    assert _versions(standalone.admin_url, topic) == [0]


def test_key_value_schemas_over_rest(standalone, topic) -> None:
    url = standalone.admin_url
    props = {"key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"}
    payload = {"type": "KEY_VALUE", "schema": json.dumps({"key": "", "value": USER.schema()}), "properties": props}
    assert admin_call(url, "POST", _schema_url(topic), payload) == (200, {"version": {"version": 0}})
    status, body = admin_call(url, "GET", _schema_url(topic))
    assert status == 200 and json.loads(body["data"]) == {"key": "", "value": USER.schema()}
    worse = {**payload, "schema": json.dumps({"key": "", "value": USER_AGE_TEXT.schema()})}
    assert admin_call(url, "POST", _schema_url(topic), worse)[0] == 409
    status, body = admin_call(url, "POST", _schema_url(topic), {**payload, "schema": "[1]"})
    assert status == 422 and "KeyValue" in body["reason"]


def test_policy_defaults_and_the_topic_level_strategy(standalone, client, topic) -> None:
    url = standalone.admin_url
    ns = _namespace(url, "defaults")
    assert admin_call(url, "GET", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy") == (200, "FULL")
    assert admin_call(url, "GET", f"/admin/v2/namespaces/{ns}/isAllowAutoUpdateSchema") == (200, True)
    assert admin_call(url, "GET", f"/admin/v2/namespaces/{ns}/schemaValidationEnforced") == (200, False)
    status, policies = admin_call(url, "GET", f"/admin/v2/namespaces/{ns}")
    assert status == 200 and policies["schema_compatibility_strategy"] == "UNDEFINED"
    assert admin_call(url, "GET", "/admin/v2/namespaces/schemas/absent/isAllowAutoUpdateSchema")[0] == 404
    t = f"persistent://{ns}/t"
    base = "/admin/v2/persistent/" + t.split("://")[1] + "/schemaCompatibilityStrategy"
    assert admin_call(url, "GET", base) == (200, None)
    assert admin_call(url, "PUT", base, "ALWAYS_COMPATIBLE")[0] == 204
    assert admin_call(url, "GET", base + "?applied=true") == (200, "ALWAYS_COMPATIBLE")
    client.create_producer(t, schema=AvroSchema(USER)).close()
    client.create_producer(t, schema=JsonSchema(USER)).close()        # another type: the topic allows it
    assert admin_call(url, "DELETE", base)[0] == 204
    assert admin_call(url, "GET", base + "?applied=true") == (200, "FULL")
    assert not _accepted(client, t, AvroSchema(USER_AGE_TEXT))


def test_partitions_share_one_schema(standalone, client, topic) -> None:
    status, body = admin_call(standalone.admin_url, "PUT",
                              "/admin/v2/persistent/" + topic.split("://")[1] + "/partitions", 3)
    assert status == 204, body
    consumer = client.subscribe(topic, "s", schema=AvroSchema(USER))    # three SUBSCRIBEs race to register
    producer = client.create_producer(topic, schema=AvroSchema(USER))
    for i in range(6):
        producer.send(USER(name=f"p{i}", age=i), partition_key=str(i))
    names = sorted(consumer.receive(10_000).value().name for _ in range(6))
    assert names == [f"p{i}" for i in range(6)]
    assert _versions(standalone.admin_url, topic) == [0]
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(USER_AGE_TEXT))
