"""Seeded fuzzing: random bytes and mutations of valid frames and batches raise only the codec's typed
errors, never another exception. The seed is printed on failure; set KAFKA_FUZZ_SEED to replay one."""

import os
import random

import pytest

from wire.kafka import codec
from wire.kafka.errors import KafkaCodecError
from wire.kafka.records import Record, decode_batches, encode_batch
from wire.kafka.schemas import REQUESTS, RESPONSES

from .test_kafka_codec import CASES, sample

SEED = int(os.environ.get("KAFKA_FUZZ_SEED", random.SystemRandom().randrange(1 << 32)))


def _mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.4 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif choice < 0.6 and data:
            del data[rng.randrange(len(data)):]
        elif choice < 0.8:
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.randbytes(rng.randint(1, 8))
        elif len(data) > 4:
            i = rng.randrange(len(data) - 4)
            data[i:i + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80"])
    return bytes(data)


def test_fuzz_requests_and_responses():
    rng = random.Random(SEED)
    frames = []
    for api_key, version in CASES:
        flexible = codec.is_flexible(api_key, version)
        req = codec.encode_request(api_key, version, 1, "c", sample(REQUESTS[api_key]["fields"], version, flexible))
        resp = codec.encode_response(api_key, version, 1, sample(RESPONSES[api_key]["fields"], version, flexible))
        frames.append((api_key, version, req[4:], resp[4:]))
    try:
        for _ in range(6000):
            api_key, version, req, resp = rng.choice(frames)
            for decode in (codec.decode_request, lambda b, k=api_key, v=version: codec.decode_response(k, v, b)):
                data = _mutate(rng, req if decode is codec.decode_request else resp)
                try:
                    decode(data)
                except KafkaCodecError:
                    pass
            try:
                codec.decode_request(rng.randbytes(rng.randint(0, 64)))
            except KafkaCodecError:
                pass
    except Exception:
        pytest.fail(f"non-codec exception; replay with KAFKA_FUZZ_SEED={SEED}", pytrace=True)


def test_fuzz_record_batches():
    rng = random.Random(SEED)
    recs = [Record(i, i, b"k" * i, b"v" * (i * 7), [("h", b"x")]) for i in range(6)]
    batches = [encode_batch(recs, base_offset=0, base_timestamp=0, max_timestamp=5, compression=c) for c in range(5)]
    try:
        for _ in range(3000):
            data = _mutate(rng, rng.choice(batches))
            for verify in (True, False):
                try:
                    decode_batches(data, verify_crc=verify, strict=rng.random() < 0.5)
                except KafkaCodecError:
                    pass
    except Exception:
        pytest.fail(f"non-codec exception; replay with KAFKA_FUZZ_SEED={SEED}", pytrace=True)
