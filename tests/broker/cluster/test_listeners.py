"""`broker.cluster.listeners`: parsing `advertised_listeners` (Pulsar's rules, each refusal naming what is
wrong), the records' JSON shape, the choice a lookup makes, which listener ports the broker binds;
and that a broker refuses to start with a malformed setting."""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster import listeners
from broker.cluster.ownership import LookupAnswer, LookupKind, broker_urls
from broker.server import Broker
from common.config import default_config, load_config
from common.errors import ConfigError, PulsarServerError, UnknownListener
from common.net import free_port


def test_parse_names_urls_and_the_internal_listener() -> None:
    parsed = listeners.parse(" internal:pulsar://10.0.0.5:6650, external:pulsar://broker.example.com:6652,"
                             "external:pulsar+ssl://broker.example.com:6653,internal:http://10.0.0.5:8080")
    assert list(parsed.by_name) == ["internal", "external"]
    assert parsed.internal_name == "internal"
    assert parsed.internal == listeners.Listener("internal", "pulsar://10.0.0.5:6650", http_url="http://10.0.0.5:8080")
    assert parsed.by_name["external"].pulsar_tls_url == "pulsar+ssl://broker.example.com:6653"
    assert listeners.parse("a:pulsar://h:1,b:pulsar://h:2", "b").internal_name == "b"
    assert listeners.parse("") == listeners.NO_LISTENERS
    assert listeners.parse(" , ").internal is None


@pytest.mark.parametrize(("text", "internal", "says"), [
    ("pulsar://h:6650", "", "no listener name"),
    (":pulsar://h:6650", "", "no listener name"),
    ("in ternal:pulsar://h:6650", "", "letters, digits"),
    ("a:kafka://h:9092", "", "unknown scheme 'kafka'"),
    ("a:pulsar://h", "", "needs a host and a port"),
    ("a:pulsar://:6650", "", "needs a host and a port"),
    ("a:pulsar://h:99999", "", "not a URL"),
    ("a:pulsar://h:6650/path", "", "nothing more"),
    ("a:pulsar://h:1,a:pulsar://h:2", "", "already has a pulsar URL"),
    ("a:pulsar://h:1,b:pulsar://h:1", "", "cannot share a host:port"),
    ("a:http://h:8080", "", "no pulsar:// or pulsar+ssl:// URL"),
    ("a:pulsar://h:1,b:pulsar://h:2", "c", "internal_listener_name 'c' is not one of"),
    ("a:pulsar+ssl://h:1", "", "needs a pulsar:// URL"),
    ("", "internal", "advertised_listeners is empty"),
])
def test_malformed_settings_are_refused_with_a_clear_reason(text: str, internal: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        listeners.parse(text, internal)
    assert says in str(caught.value)


def test_a_broker_with_a_malformed_setting_does_not_start() -> None:
    with pytest.raises(ConfigError, match="unknown scheme"):
        Broker(default_config(advertised_listeners="external:tcp://h:1"), "sqlite:///unused.db")
    config = load_config(env={"STRATA_ADVERTISED_LISTENERS": "internal:pulsar://127.0.0.1:7000"})
    assert Broker(config, "sqlite:///unused.db").service_url == "pulsar://127.0.0.1:7000"
    assert Broker(default_config(broker_port=7001), "sqlite:///unused.db").service_url == "pulsar://127.0.0.1:7001"


def test_records_round_trip_and_tolerate_junk() -> None:
    parsed = listeners.parse("internal:pulsar://a:1,external:pulsar://b:2,external:pulsar+ssl://b:3")
    assert listeners.decode(parsed.to_json()) == dict(parsed.by_name)
    assert parsed.to_json()["external"] == {"brokerServiceUrl": "pulsar://b:2", "brokerServiceUrlTls": "pulsar+ssl://b:3",
                                            "brokerHttpUrl": "", "brokerHttpsUrl": ""}
    assert listeners.decode(None) == {} and listeners.decode([1]) == {}
    assert list(listeners.decode({"ok": {"brokerServiceUrl": "pulsar://a:1"}, "bad": {"brokerServiceUrl": 5},
                                  "worse": "x"})) == ["ok"]


def test_a_lookup_answers_the_named_listener_or_refuses_the_name() -> None:
    parsed = listeners.parse("internal:pulsar://a:1,external:pulsar://b:2,external:pulsar+ssl://b:3")
    answer = LookupAnswer(LookupKind.CONNECT, "pulsar://a:1", "http://a:8080", True, parsed.by_name)
    assert broker_urls(answer, "") == ("pulsar://a:1", "")
    assert broker_urls(answer, "external") == ("pulsar://b:2", "pulsar+ssl://b:3")
    assert broker_urls(answer, "internal") == ("pulsar://a:1", "")
    with pytest.raises(UnknownListener) as caught:
        broker_urls(answer, "nope")
    assert str(caught.value) == "the broker do not have nope listener (its advertised listeners: external, internal)"
    assert caught.value.server_error == PulsarServerError.NotAllowedError and not caught.value.retriable
    bare = LookupAnswer(LookupKind.CONNECT, "pulsar://a:1", "http://a:8080", True)
    with pytest.raises(UnknownListener, match="its advertised listeners: none"):
        broker_urls(bare, "external")


def test_local_listener_ports_are_bound_others_only_advertised() -> None:
    async def run() -> None:
        taken = await asyncio.get_running_loop().create_server(asyncio.Protocol, host="127.0.0.1", port=0)
        taken_port = taken.sockets[0].getsockname()[1]
        free = free_port()
        parsed = listeners.parse(f"internal:pulsar://127.0.0.1:{taken_port},own:pulsar://127.0.0.1:{free},"
                                 "nat:pulsar://192.0.2.10:6650")
        servers = await listeners.bind_listener_ports(parsed, taken_port, asyncio.Protocol)
        try:   # the broker's own port skipped, the NAT address advertised only, the local one bound
            assert [s.sockets[0].getsockname()[1] for s in servers] == [free]
        finally:
            for server in servers:
                server.close()
        clash = listeners.parse(f"internal:pulsar://127.0.0.1:{free},other:pulsar://127.0.0.1:{taken_port}")
        with pytest.raises(ConfigError, match=f"listener 'other': cannot listen on pulsar://127.0.0.1:{taken_port}"):
            await listeners.bind_listener_ports(clash, free, asyncio.Protocol)
        taken.close()

    asyncio.run(run())
