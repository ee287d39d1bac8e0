"""The ApiVersions table (broker.kafka.handlers.TABLE) promises only what is served: every listed
version the dispatch serves is one the codec can decode and answer, and the listed ranges are the
ones documented (docs/kafka.md) and the clients need (KAFKA-FACTS: aiokafka/kafkajs classic
versions, Produce listed from 0, ListOffsets v0 kept)."""

from __future__ import annotations

from broker.kafka.handlers import TABLE, advertised, served
from wire.kafka.codec import SUPPORTED_VERSIONS, is_flexible


def test_every_served_version_is_in_the_codec():
    for key, (listed_min, served_min, listed_max, handler) in TABLE.items():
        low, high = SUPPORTED_VERSIONS[key]
        assert low <= served_min and listed_max <= high, key
        assert listed_min <= served_min <= listed_max, key
        for version in range(served_min, listed_max + 1):
            assert served(key, version) is handler


def test_the_advertised_ranges():
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in advertised()}
    assert ranges == {0: (0, 9), 1: (4, 12), 2: (0, 6), 3: (0, 12), 8: (2, 8), 9: (1, 8), 10: (0, 4), 11: (0, 9),
                      12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
                      20: (1, 6), 22: (0, 4), 32: (1, 4), 33: (0, 2), 36: (0, 2), 37: (0, 3), 42: (0, 2), 44: (0, 1),
                      47: (0, 0), 60: (0, 1)}
    assert served(0, 2) is None and served(1, 13) is None and served(8, 9) is None   # not served: answered 35
    # the classic versions aiokafka and kafkajs send are served (they never send flexible ones)
    for key, version in ((3, 5), (3, 6), (0, 7), (1, 11), (2, 3), (22, 0), (22, 1), (11, 5), (14, 3), (12, 1),
                         (12, 3), (13, 1), (13, 3), (8, 3), (8, 5), (9, 3), (9, 4), (10, 1), (10, 2), (15, 3),
                         (16, 1), (42, 1)):
        assert served(key, version) is not None and not is_flexible(key, version)


def test_a_failed_handler_is_answered_in_its_own_api_and_version():
    """A handler that raises is answered with a response the client can parse (every field its
    default, the top-level error code UNKNOWN_SERVER_ERROR where there is one), not a bare code."""
    from broker.kafka.connection import _unknown_error
    from wire.kafka.codec import Request, decode_response

    for key, (_listed, served_min, listed_max, _handler) in TABLE.items():
        for version in range(served_min, listed_max + 1):
            frame = _unknown_error(Request(key, version, 7, "c", {}))
            correlation_id, body = decode_response(key, version, frame[4:])
            assert correlation_id == 7, (key, version)
            # UNKNOWN_SERVER_ERROR (-1) where the version has a top-level code, else its default 0
            assert body.get("error_code", 0) in (-1, 0), (key, version, body.get("error_code"))
    frame = _unknown_error(Request(10, 2, 7, "c", {}))           # FindCoordinator v2 has one
    assert decode_response(10, 2, frame[4:])[1]["error_code"] == -1
