"""Golden bytes from real clients: kafka-python's and aiokafka's own protocol classes encode requests our
decoder must read, and decode the responses we encode (KAFKA-FACTS §1: the versions they really send)."""

import struct

from aiokafka.protocol.admin import ApiVersionRequest_v0, ApiVersionResponse_v0
from aiokafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11
from aiokafka.protocol.metadata import MetadataRequest_v5, MetadataResponse_v5
from aiokafka.protocol.produce import ProduceRequest_v7, ProduceResponse_v7
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from wire.kafka import codec
from wire.kafka.records import Record, decode_batches, encode_batch

BATCH = encode_batch([Record(0, 0, b"k", b"v", [("h", b"x")])], base_offset=0, base_timestamp=1, max_timestamp=1)


def _kp_frame(msg, corr, client_id="kafka-python"):
    msg.with_header(correlation_id=corr, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


def _aio_frame(req, corr, client_id="aiokafka"):
    data = req.build_request_header(corr, client_id).encode() + req.encode()
    return struct.pack(">i", len(data)) + data


def test_kafka_python_api_versions_v4():
    frame = _kp_frame(ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12",
                                         version=4), 5)
    assert codec.frame_length(frame[:4]) == len(frame) - 4
    req = codec.decode_request(frame[4:])
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (18, 4, 5, "kafka-python")
    assert req.body == {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    out = codec.encode_response(18, 4, 5, {"api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
                                           "throttle_time_ms": 0})
    resp = ApiVersionsResponse.decode(out[4:], version=4, header=True)
    assert resp.header.correlation_id == 5 and resp.api_keys[0].max_version == 12


def test_kafka_python_metadata_v12():
    msg = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t1")], allow_auto_topic_creation=True,
                          version=12)
    req = codec.decode_request(_kp_frame(msg, 9)[4:])
    assert req.body["topics"] == [{"topic_id": bytes(16), "name": "t1"}]
    assert req.body["allow_auto_topic_creation"] is True
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
            "controller_id": 1, "topics": [{"name": "t1", "topic_id": bytes(range(16)), "partitions": [
                {"partition_index": 0, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1]}]}]}
    resp = MetadataResponse.decode(codec.encode_response(3, 12, 9, body)[4:], version=12, header=True)
    assert resp.brokers[0].port == 9092 and resp.topics[0].partitions[0].leader_id == 1
    assert resp.topics[0].name == "t1"


def test_kafka_python_produce_v9_and_fetch_v12():
    produce = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=BATCH)])],
        version=9)
    req = codec.decode_request(_kp_frame(produce, 11)[4:])
    records = req.body["topic_data"][0]["partition_data"][0]["records"]
    assert req.body["acks"] == -1 and decode_batches(records)[0].records[0].value == b"v"
    out = codec.encode_response(0, 9, 11, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "base_offset": 42}]}]})
    assert ProduceResponse.decode(out[4:], version=9, header=True).responses[0].partition_responses[0].base_offset == 42
    fetch = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, session_epoch=0, topics=[
        FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
            partition=0, fetch_offset=7, partition_max_bytes=1 << 20)])], version=12)
    req = codec.decode_request(_kp_frame(fetch, 12)[4:])
    assert req.body["max_wait_ms"] == 500 and req.body["topics"][0]["partitions"][0]["fetch_offset"] == 7
    out = codec.encode_response(1, 12, 12, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 8, "last_stable_offset": 8, "records": [BATCH[:30], BATCH[30:]]}]}]})
    part = FetchResponse.decode(out[4:], version=12, header=True).responses[0].partitions[0]
    assert part.high_watermark == 8 and bytes(part.records) == BATCH


def test_aiokafka_api_versions_v0_and_metadata_v5():
    req = codec.decode_request(_aio_frame(ApiVersionRequest_v0(), 1)[4:])
    assert (req.api_key, req.api_version, req.client_id, req.body) == (18, 0, "aiokafka", {
        "client_software_name": "", "client_software_version": ""})
    resp = ApiVersionResponse_v0.decode(codec.api_versions_error_response(1)[8:])
    assert resp.error_code == 35 and resp.api_versions == [(18, 0, 4)]
    req = codec.decode_request(_aio_frame(MetadataRequest_v5(["a", "b"], True), 2)[4:])
    assert [t["name"] for t in req.body["topics"]] == ["a", "b"]
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "cluster_id": "c", "controller_id": 1,
            "topics": [{"name": "a", "partitions": [{"partition_index": 0, "leader_id": 1}]}]}
    resp5 = MetadataResponse_v5.decode(codec.encode_response(3, 5, 2, body)[8:])
    assert resp5.topics[0][1] == "a"


def test_aiokafka_produce_v7_and_fetch_v11():
    req = codec.decode_request(_aio_frame(ProduceRequest_v7(None, 1, 40000, [("t", [(0, BATCH)])]), 3)[4:])
    assert req.body["acks"] == 1 and req.body["timeout_ms"] == 40000
    assert req.body["topic_data"][0]["partition_data"][0]["records"] == BATCH
    out = codec.encode_response(0, 7, 3, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0}]}]})
    assert ProduceResponse_v7.decode(out[8:]).topics[0][1][0][2] == 5
    fetch = FetchRequest_v11(-1, 500, 1, 50 << 20, 0, 0, -1, [("t", [(0, -1, 3, -1, 1 << 20)])], [], "")
    req = codec.decode_request(_aio_frame(fetch, 4)[4:])
    assert req.body["session_epoch"] == -1 and req.body["topics"][0]["partitions"][0]["fetch_offset"] == 3
    out = codec.encode_response(1, 11, 4, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 9, "records": BATCH}]}]})
    resp = FetchResponse_v11.decode(out[8:])
    assert resp.topics[0][1][0][-1] == BATCH
