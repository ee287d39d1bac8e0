"""Bad input to the admin REST API and the CLI (issue 15 item 7), against a real standalone.

Every refusal has Pulsar's status and a `{"reason": ...}` body, and changes nothing: a snapshot of
the state an operator sees (topic lists, namespace policies, a reference topic's stats and
cursors) is the same before and after each case. The table pins one case per kind of mistake
(names, bodies, units, positions, sizes); the hypothesis run then throws generated path segments
and bodies at every route the admin app registers and checks the server never answers 500, always
gives a reason with an error, and stays healthy. Seeded: hypothesis prints the failing example.
"""

from __future__ import annotations

import json
import types
import urllib.error
import urllib.parse
import urllib.request

import pulsar
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.admin.server import AdminServer
from common.config import load_config
from tests.acceptance.conftest import make_client
from tests.support.admin_cli import run_admin
from tests.support.admin_http import exchange

REFERENCE_TOPIC = "persistent://public/default/bad-input-reference"
REF = "/admin/v2/persistent/public/default/bad-input-reference"
NS = "/admin/v2/namespaces/public/default"
TIMEOUT_S = 20


def send(base_url: str, method: str, path: str, data: bytes | None = None) -> tuple[int, object]:
    answer = exchange(method, base_url + path, raw=data, timeout_s=TIMEOUT_S)
    raw, status = answer.body, answer.status
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture(scope="module")
def reference(standalone):
    """A topic with data, a subscription with a backlog, and retention set: the state to protect."""
    client = make_client(standalone.service_url)
    consumer = client.subscribe(REFERENCE_TOPIC, "ref-sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(REFERENCE_TOPIC, batching_enabled=False)
    for i in range(5):
        producer.send(f"r{i}".encode())
    consumer.acknowledge(consumer.receive(10_000))
    consumer.close()
    producer.close()
    client.close()
    yield standalone


def snapshot(base_url: str) -> dict:
    """What an operator would look at; rates are left out (they move with time)."""
    state = {}
    for name, path in (("topics", "/admin/v2/persistent/public/default"),
                       ("partitioned", "/admin/v2/persistent/public/default/partitioned"),
                       ("retention", NS + "/retention"), ("ttl", NS + "/messageTTL"),
                       ("dedup", NS + "/deduplication"), ("bundles", NS + "/bundles"),
                       ("offload", NS + "/offloadPolicies"), ("topic_retention", REF + "/retention"),
                       ("topic_ttl", REF + "/messageTTL")):
        state[name] = send(base_url, "GET", path)
    stats = send(base_url, "GET", REF + "/stats")[1]
    assert isinstance(stats, dict)
    state["stats"] = {k: stats[k] for k in ("msgInCounter", "storageSize", "msgBacklog")}
    state["subs"] = {n: (s["msgBacklog"], s["markDeletePosition"]) for n, s in stats["subscriptions"].items()}
    return state


TOO_BIG = b"[" + b"1," * 40_000 + b"1]"

# (method, path, body bytes or None, status, a word of the reason)
CASES = [
    ("PUT", REF + "-p/partitions", _json("three"), 400, "integer"),
    ("PUT", REF + "-p/partitions", _json(0), 406, "partitions"),
    ("PUT", REF + "-p/partitions", _json(-1), 406, "partitions"),
    ("PUT", REF + "-p/partitions", _json(10**9), 406, "partitions"),
    ("PUT", REF + "-p/partitions", b"{not json", 400, "JSON"),
    ("PUT", REF + "-p/partitions", TOO_BIG, 400, "too large"),
    ("POST", REF + "-never/partitions", _json(4), 404, "not found"),
    ("GET", REF + "-never/stats", None, 404, "not found"),
    ("DELETE", REF + "-never", None, 404, "not found"),
    ("GET", "/admin/v2/persistent/public/default/" + "x" * 2000 + "/stats", None, 400, "name"),
    ("POST", NS + "/retention", _json({"retentionTimeInMinutes": "1h", "retentionSizeInMB": 1}), 400, "integer"),
    ("POST", NS + "/retention", _json({"retentionTimeInMinutes": -5, "retentionSizeInMB": 1}), 412, "retention"),
    ("POST", NS + "/retention", _json({"retentionTimeInMinutes": 10}), 400, "retention"),
    ("POST", NS + "/retention", _json([10, 10]), 400, "retention"),
    ("POST", NS + "/messageTTL", _json(-1), 412, "TTL"),
    ("POST", NS + "/messageTTL", _json("10m"), 400, "seconds"),
    ("POST", REF + "/messageTTL?messageTTL=ten", None, 400, "seconds"),
    ("POST", REF + "/retention", _json({"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}), 412, "retention"),
    ("POST", NS + "/deduplication", _json("yes"), 400, "true or false"),
    ("PUT", NS + "/offloadThreshold", _json("10M"), 400, "integer"),
    ("PUT", NS + "/offloadThreshold", _json(2**70), 412, ""),
    ("PUT", REF + "/offload", _json({"ledgerId": "L", "entryId": 0}), 400, "message id"),
    ("PUT", REF + "/offload", _json({"ledgerId": 10**12, "entryId": 0}), 412, "ledger"),
    ("PUT", NS + "/0x1_0x2/unload", None, 412, "bundle"),
    ("PUT", NS + "/not-a-bundle/split", None, 412, "bundle"),
    ("PUT", NS + "/0x00000000_0x40000000/split?splitAlgorithmName=magic", None, 412, "algorithm"),
    ("GET", "/admin/v2/brokers/other-cluster", None, 404, "Cluster"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "word"), CASES,
                         ids=[f"{c[0]} {c[1][-40:]} {c[3]}" for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(reference, method: str, path: str, body: bytes | None,
                                                  status: int, word: str) -> None:
    before = snapshot(reference.admin_url)
    got, answer = send(reference.admin_url, method, path, body)
    assert got == status, answer
    assert isinstance(answer, dict) and isinstance(answer.get("reason"), str) and answer["reason"], answer
    assert word.lower() in answer["reason"].lower()
    assert snapshot(reference.admin_url) == before


# --- the CLI: bad names and units exit 2 before anything is sent ------------------------------------

CLI_CASES = [
    ["topics", "set-retention", "t", "--time", "3x", "--size", "1G"],
    ["topics", "set-retention", "t", "--time", "-2", "--size", "1G"],
    ["topics", "set-retention", "t", "--time", "1h", "--size", "1.5G"],
    ["topics", "set-retention", "t", "--time", "1h", "--size", "4096"],      # 4096 bytes: under 1 MB
    ["topics", "set-retention", "t", "--time", "30", "--size", "1G"],        # 30 s: under a minute
    ["topics", "set-message-ttl", "t", "--ttl", "-5"],
    ["topics", "set-message-ttl", "t", "--ttl", "soon"],
    ["topics", "offload", "t", "-s", "10Q"],
    ["namespaces", "set-offload-deletion-lag", "public/default", "-l", "1.5h"],
    ["topics", "create-partitioned-topic", "t", "-p", "two"],
]


@pytest.mark.parametrize("argv", CLI_CASES, ids=[" ".join(a) for a in CLI_CASES])
def test_cli_refuses_bad_units_before_sending(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_admin(["--admin-url", "http://127.0.0.1:9", *argv])     # nothing listens there
    assert exc.value.code == 2


@pytest.mark.parametrize("argv", [
    ["topics", "stats", "bad//name"],
    ["topics", "stats", "persistent://a/b/c/d/e"],
    ["namespaces", "get-retention", "no-slash"],
    ["topics", "list", "a/b/c"],
])
def test_cli_refuses_bad_names_before_sending(argv: list[str], capsys) -> None:
    assert run_admin(["--admin-url", "http://127.0.0.1:9", *argv]) == 2
    assert "strata admin:" in capsys.readouterr().err


# --- hypothesis over every registered route ---------------------------------------------------------

def _routes() -> list[tuple[str, str]]:
    """(method, pattern) of every route the admin app registers (built, not started)."""
    service = types.SimpleNamespace(config=load_config(), astore=None)
    app = AdminServer(service.config, 0).app(service)  # type: ignore[arg-type]
    out = []
    for route in app.router.routes():
        canonical = route.resource.canonical if route.resource is not None else ""
        if route.method in ("GET", "PUT", "POST", "DELETE") and canonical.startswith(("/admin", "/lookup")):
            out.append((route.method, canonical))
    return sorted(set(out))


ROUTES = _routes()
_segment = st.one_of(
    st.text(min_size=0, max_size=40),
    st.sampled_from(["..", ".", "%00", "-1", "0", "999999999999999999999", "a" * 300, "persistent:",
                     "0x00000000_0xffffffff", "bad-input-fuzz"]),
).filter(lambda s: s not in ("public", "default", "bad-input-reference", "ref-sub"))
_body = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.recursive(st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                 max_leaves=8).map(_json),
)


def _fill(pattern: str, values: list[str]) -> str:
    parts, out, i = pattern.split("/"), [], 0
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            out.append(urllib.parse.quote(values[i % len(values)], safe="") or "x")
            i += 1
        else:
            out.append(part)
    return "/".join(out)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(route=st.sampled_from(ROUTES), values=st.lists(_segment, min_size=1, max_size=6), body=_body,
       query=st.sampled_from(["", "?force=true", "?authoritative=true", "?applied=maybe", "?messageTTL=x"]))
def test_generated_requests_never_break_the_server(reference, route, values, body, query) -> None:
    method, pattern = route
    path = _fill(pattern, values) + query
    status, answer = send(reference.admin_url, method, path, body)
    assert status < 500 or status == 503, (method, path, status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("reason"), str), (method, path, status, answer)


def test_the_reference_state_survived_the_fuzzing(reference) -> None:
    """Runs after the hypothesis run in this module: the reference topic is intact."""
    stats = send(reference.admin_url, "GET", REF + "/stats")[1]
    assert isinstance(stats, dict)
    assert stats["msgInCounter"] == 5
    assert stats["subscriptions"]["ref-sub"]["msgBacklog"] == 4
