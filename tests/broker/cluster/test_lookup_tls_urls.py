"""The TLS URL a lookup answers (`brokerServiceUrlTls`) for this broker and for other owners.

Another owner's pulsar+ssl:// URL comes from its ownership record (`nativeUrlTls`) or its registry
entry (`pulsarServiceUrlTls`); a broker serving only TLS is known by its TLS URL, and a lookup then
answers no plain URL (a pulsar:// client could not reach it anyway).
"""

from __future__ import annotations

import json

from broker.cluster import ownership
from broker.cluster.ownership import LookupAnswer, LookupKind, broker_urls
from broker.cluster.registry import BrokerInfo

PLAIN = "pulsar://broker-2:6650"
TLS = "pulsar+ssl://broker-2:6651"


def test_a_lookup_answers_both_urls_and_only_tls_for_a_tls_only_broker() -> None:
    answer = LookupAnswer(LookupKind.CONNECT, PLAIN, "http://broker-2:8080", True, native_url_tls=TLS)
    assert broker_urls(answer, "") == (PLAIN, TLS)
    assert broker_urls(LookupAnswer(LookupKind.CONNECT, PLAIN, "", True), "") == (PLAIN, "")
    tls_only = LookupAnswer(LookupKind.REDIRECT, TLS, "https://broker-2:8443", True, native_url_tls=TLS)
    assert broker_urls(tls_only, "") == ("", TLS)


def test_records_of_other_brokers_carry_their_tls_url() -> None:
    record = json.dumps({"nativeUrl": PLAIN, "nativeUrlTls": TLS, "httpUrl": "", "disabled": False}).encode()
    assert ownership._decode_extras(record) == ({}, TLS)
    assert ownership._decode_extras(json.dumps({"nativeUrl": PLAIN}).encode()) == ({}, "")
    assert ownership._decode_extras(json.dumps({"nativeUrlTls": 7}).encode()) == ({}, "")   # not a string: none
    assert ownership._decode_extras(b"not json") == ({}, "")
    report = {"webServiceUrl": "http://broker-2:8080", "pulsarServiceUrl": PLAIN, "pulsarServiceUrlTls": TLS}
    info = BrokerInfo.from_value("broker-2:8080", json.dumps(report).encode())
    assert info is not None and info.service_url_tls == TLS
    older = BrokerInfo.from_value("broker-3:8080", json.dumps({**report, "pulsarServiceUrlTls": None}).encode())
    assert older is not None and older.service_url_tls == ""
