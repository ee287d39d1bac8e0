"""The HTTP lookup's request handling (`broker.admin.lookup`), on aiohttp requests built in
memory: which topic a lookup route names (both domains), which listener it asks for (the query
before the header, an empty value is none), the LookupData it answers, and that the 307 to the
owner keeps the query (so the listener name reaches the owner) and adds `authoritative=true`.
The routes end to end are in tests/acceptance/test_http_service_url.py and
tests/acceptance/test_advertised_listeners.py."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from aiohttp.test_utils import make_mocked_request

from broker.admin.lookup import listener_name_of, lookup_data, lookup_topic_of, redirect_to
from common.errors import InvalidTopicName


def _request(path: str, headers: dict[str, str] | None = None):
    """A GET of `path` as the router hands it to the handler (route variables filled in)."""
    parts = [unquote(p) for p in path.split("?", 1)[0].removeprefix("/lookup/v2/topic/").split("/")]
    return make_mocked_request("GET", path, headers=headers or {},
                               match_info={"tenant": parts[1], "ns": parts[2], "topic": parts[3]})


@pytest.mark.parametrize(("path", "topic"), [
    ("/lookup/v2/topic/persistent/public/default/t", "persistent://public/default/t"),
    ("/lookup/v2/topic/non-persistent/acme/orders/t-partition-2", "non-persistent://acme/orders/t-partition-2"),
])
def test_the_route_names_the_topic_in_its_domain(path: str, topic: str) -> None:
    assert str(lookup_topic_of(_request(path))) == topic


def test_a_bad_name_is_invalid() -> None:
    with pytest.raises(InvalidTopicName):
        lookup_topic_of(_request("/lookup/v2/topic/persistent/public/default/bad%20name"))


def test_the_listener_comes_from_the_query_then_the_header() -> None:
    base = "/lookup/v2/topic/persistent/public/default/t"
    assert listener_name_of(_request(base)) == ""
    assert listener_name_of(_request(base + "?listenerName=external")) == "external"
    assert listener_name_of(_request(base, {"X-Pulsar-ListenerName": "external"})) == "external"
    assert listener_name_of(_request(base + "?listenerName=internal", {"X-Pulsar-ListenerName": "external"})) == \
        "internal"
    assert listener_name_of(_request(base + "?listenerName=", {"X-Pulsar-ListenerName": "external"})) == "external"


def test_lookup_data_is_pulsars_shape() -> None:
    assert lookup_data("pulsar://b:6650", "http://b:8080", "pulsar+ssl://b:6651") == {
        "brokerUrl": "pulsar://b:6650", "brokerUrlTls": "pulsar+ssl://b:6651", "httpUrl": "http://b:8080",
        "httpUrlTls": "", "nativeUrl": "pulsar://b:6650"}


def test_the_redirect_keeps_the_query_and_is_authoritative() -> None:
    request = _request("/lookup/v2/topic/persistent/public/default/t?listenerName=external")
    answer = redirect_to("http://other:8081/", request)
    assert answer.status == 307
    assert answer.headers["Location"] == \
        "http://other:8081/lookup/v2/topic/persistent/public/default/t?listenerName=external&authoritative=true"
