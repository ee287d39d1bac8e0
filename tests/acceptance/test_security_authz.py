"""Authorization on the binary protocol of a secured standalone, with the official client.

One standalone for the module (tests/support/security.py's kit: token authentication,
authorization on, superuser `admin`, permissions rechecked every 300 ms). Tenants `ta` (admin role
`ta-admin`) and `tb` (admin role `tb-admin`), each with namespace `ns`; `tb/ns/secret` holds a
message. Checked: a role without permission is refused with AuthorizationError at once and
allowed after a grant (REST and `strata admin`); a revoke closes a live producer and consumer
within a bounded time and nothing is stored or delivered for them after it; a role of tenant A
can neither look up, produce to, consume from nor list tenant B's topics, and the broker's
refusal is the same for a topic that does not exist; a tenant admin manages its own namespaces
(grants included, also through a namespace-create body's auth_policies) and not another tenant's.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pulsar
import pytest

from cli.admin import main as admin_main
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client
from tests.support.admin_http import exchange
from tests.support.raw_client import RawClient
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port
from wire.pulsar import CommandType as T

RECHECK_INTERVAL_MS = 300
REFUSAL_S_MAX = 5.0          # an unauthorized create fails this fast (the client does not retry it)
REVOKE_CLOSES_S_MAX = 5.0    # a revoked producer/consumer is closed within this
_ids = itertools.count()


def call(url: str, method: str = "GET", body: object = None, *, token: str) -> tuple[int, object]:
    answer = exchange(method, url, body, token=token)
    return answer.status, (json.loads(answer.body) if answer.body else None)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("secured-authz")
    kit = SecurityKit.create(root / "security")
    env = kit.standalone_env(tls_port=free_port(), providers="token",
                             extra={"STRATA_AUTHORIZATION_RECHECK_INTERVAL_MS": str(RECHECK_INTERVAL_MS)})
    with StandaloneProcess.start(root / "data", env=env) as sa:
        su = kit.token(SUPERUSER)
        for tenant in ("ta", "tb"):
            assert call(f"{sa.admin_url}/admin/v2/tenants/{tenant}", "PUT",
                        {"adminRoles": [f"{tenant}-admin"], "allowedClusters": ["standalone"]}, token=su)[0] == 204
            assert call(f"{sa.admin_url}/admin/v2/namespaces/{tenant}/ns", "PUT", token=su)[0] == 204
        superuser = client_of(sa, kit, SUPERUSER)
        superuser.create_producer("persistent://tb/ns/secret").send(b"tenant b's")
        yield SimpleNamespace(sa=sa, kit=kit, su=su, superuser=superuser)
        superuser.close()


def client_of(sa: StandaloneProcess, kit: SecurityKit, role: str) -> pulsar.Client:
    return make_client(sa.service_url, authentication=pulsar.AuthenticationToken(kit.token(role)),
                       operation_timeout_seconds=10)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}-{time.monotonic_ns() % 10**6}"


def refused_fast(create, *args) -> pulsar.AuthorizationError:
    started = time.monotonic()
    with pytest.raises(pulsar.AuthorizationError) as caught:
        create(*args)
    assert time.monotonic() - started < REFUSAL_S_MAX
    return caught.value


def cli(secured, token: str, *args: str) -> int:
    return admin_main(["--admin-url", secured.sa.admin_url, "--auth-token", token, "-o", "json", *args])


def stats(secured, topic: str) -> dict:
    status, body = call(f"{secured.sa.admin_url}/admin/v2/{topic.replace('://', '/')}/stats", token=secured.su)
    assert status == 200, body
    return body


def test_a_role_without_permission_is_refused_then_allowed_after_a_grant(secured, capsys) -> None:
    role, topic = unique("app"), f"persistent://ta/ns/{unique('orders')}"
    client = client_of(secured.sa, secured.kit, role)
    try:
        refused_fast(client.create_producer, topic)
        refused_fast(client.subscribe, topic, "s")
        # a topic grant by REST (superuser): produce only
        assert call(f"{secured.sa.admin_url}/admin/v2/persistent/ta/ns/{topic.rsplit('/', 1)[1]}/permissions/{role}",
                    "POST", ["produce"], token=secured.su)[0] == 204
        producer = client.create_producer(topic)
        refused_fast(client.subscribe, topic, "s")
        with raw_session(secured, role) as raw:   # a producer creating a subscription needs consume too
            raw.send(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
                topic=topic, producer_id=1, request_id=1, initial_subscription_name="init")))
            refusal = raw.next_command()
            assert (refusal.type, refusal.error.error) == (T.ERROR, pb.AuthorizationError), refusal
        # a namespace grant by the CLI, as the tenant's admin: consume
        admin_token = secured.kit.token("ta-admin")
        assert cli(secured, admin_token, "namespaces", "grant-permission", "ta/ns", "--role", role,
                   "--actions", "consume") == 0
        consumer = client.subscribe(topic, "s")
        producer.send(b"hello")
        assert consumer.receive(10_000).data() == b"hello"
        capsys.readouterr()
        assert cli(secured, admin_token, "topics", "permissions", topic) == 0
        assert json.loads(capsys.readouterr().out)[role] == ["consume", "produce"]   # namespace's + topic's
        assert cli(secured, admin_token, "namespaces", "permissions", "ta/ns") == 0
        assert json.loads(capsys.readouterr().out)[role] == ["consume"]
        assert cli(secured, admin_token, "namespaces", "grant-permission", "ta/ns", "--role", role,
                   "--actions", "produce,fly") == 1                                  # 400: not an action
    finally:
        client.close()


def test_a_revoke_closes_live_producers_and_consumers_and_nothing_passes_after_it(secured) -> None:
    role, topic = unique("app"), f"persistent://ta/ns/{unique('revoked')}"
    assert call(f"{secured.sa.admin_url}/admin/v2/namespaces/ta/ns/permissions/{role}", "POST",
                ["produce", "consume"], token=secured.su)[0] == 204
    kept_role = unique("kept")    # a role whose grant stays: its consumer is never closed
    assert call(f"{secured.sa.admin_url}/admin/v2/persistent/ta/ns/{topic.rsplit('/', 1)[1]}/permissions/{kept_role}",
                "POST", ["consume"], token=secured.su)[0] == 204
    client, kept_client = client_of(secured.sa, secured.kit, role), client_of(secured.sa, secured.kit, kept_role)
    try:
        producer = client.create_producer(topic, send_timeout_millis=2_000, batching_enabled=False)
        consumer = client.subscribe(topic, "s", receiver_queue_size=1)
        kept = kept_client.subscribe(topic, "k")
        producer.send(b"before")
        assert consumer.receive(10_000).data() == b"before"
        revoked_at = time.monotonic()
        assert call(f"{secured.sa.admin_url}/admin/v2/namespaces/ta/ns/permissions/{role}", "DELETE",
                    token=secured.su)[0] == 204
        while True:   # the broker closes both (its recheck), and the client's re-creation is refused
            found = stats(secured, topic)
            if not found["publishers"] and not found["subscriptions"]["s"]["consumers"]:
                break
            assert time.monotonic() - revoked_at < REVOKE_CLOSES_S_MAX, found
            time.sleep(0.1)
        closed_after_s = time.monotonic() - revoked_at
        with pytest.raises(pulsar.Timeout):
            producer.send(b"after")                              # never stored: no producer any more
        secured.superuser.create_producer(topic).send(b"from the superuser")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(1_500)                              # never delivered to the revoked consumer
        reader = secured.superuser.create_reader(topic, pulsar.MessageId.earliest)
        stored = [reader.read_next(5_000).data() for _ in range(2)]
        assert stored == [b"before", b"from the superuser"] and not reader.has_message_available()
        assert stats(secured, topic)["subscriptions"]["s"]["consumers"] == []
        assert [kept.receive(5_000).data() for _ in range(2)] == [b"before", b"from the superuser"]
        assert len(stats(secured, topic)["subscriptions"]["k"]["consumers"]) == 1   # after several rechecks
        print(f"revoke -> closed in {closed_after_s:.2f} s (recheck every {RECHECK_INTERVAL_MS} ms)")
    finally:
        client.close()
        kept_client.close()


def test_a_revoke_closes_non_persistent_producers_and_consumers_too(secured) -> None:
    role, topic = unique("app"), f"non-persistent://ta/ns/{unique('live')}"
    grant = f"{secured.sa.admin_url}/admin/v2/non-persistent/ta/ns/{topic.rsplit('/', 1)[1]}/permissions/{role}"
    assert call(grant, "POST", ["produce", "consume"], token=secured.su)[0] == 204
    client = client_of(secured.sa, secured.kit, role)
    try:
        producer = client.create_producer(topic, send_timeout_millis=2_000, batching_enabled=False)
        consumer = client.subscribe(topic, "s")
        producer.send(b"before")
        assert consumer.receive(10_000).data() == b"before"
        revoked_at = time.monotonic()
        assert call(grant, "DELETE", token=secured.su)[0] == 204
        while True:
            status, found = call(f"{secured.sa.admin_url}/admin/v2/non-persistent/ta/ns/"
                                 f"{topic.rsplit('/', 1)[1]}/stats", token=secured.su)
            if status == 404 or (not found["publishers"] and
                                 not any(sub["consumers"] for sub in found["subscriptions"].values())):
                break
            assert time.monotonic() - revoked_at < REVOKE_CLOSES_S_MAX, found
            time.sleep(0.1)
        with pytest.raises(pulsar.Timeout):
            producer.send(b"after")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
    finally:
        client.close()


@contextlib.contextmanager
def raw_session(secured, role: str) -> Iterator[RawClient]:
    """A raw protocol connection, CONNECTed with `role`'s token."""
    raw = RawClient(int(secured.sa.service_url.rsplit(":", 1)[1]))
    try:
        raw.send(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="raw-test", protocol_version=20, auth_method_name="token",
            auth_data=secured.kit.token(role).encode())))
        assert raw.next_command().type == T.CONNECTED
        yield raw
    finally:
        raw.close()


def raw_refusals(secured, role: str, topic: str) -> dict[str, str]:
    """The broker's answers (code and message) to LOOKUP, PARTITIONED_METADATA, PRODUCER, SUBSCRIBE, GET_SCHEMA
    and GET_OR_CREATE_SCHEMA of `topic`."""
    with raw_session(secured, role) as raw:
        out = {}
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=topic, request_id=1)))
        reply = raw.next_command().lookupTopicResponse
        out["lookup"] = f"{reply.error} {reply.message}"
        raw.send(pb.BaseCommand(type=T.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(
            topic=topic, request_id=2)))
        reply = raw.next_command().partitionMetadataResponse
        out["metadata"] = f"{reply.error} {reply.message}"
        raw.send(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1,
                                                                            request_id=3)))
        reply = raw.next_command().error
        out["producer"] = f"{reply.error} {reply.message}"
        raw.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=4)))
        reply = raw.next_command().error
        out["subscribe"] = f"{reply.error} {reply.message}"
        raw.send(pb.BaseCommand(type=T.GET_SCHEMA, getSchema=pb.CommandGetSchema(topic=topic, request_id=5)))
        answer = raw.next_command().getSchemaResponse
        out["get schema"] = f"{answer.error_code} {answer.error_message}"
        raw.send(pb.BaseCommand(type=T.GET_OR_CREATE_SCHEMA, getOrCreateSchema=pb.CommandGetOrCreateSchema(
            topic=topic, request_id=6, schema=pb.Schema(name="s", schema_data=b"", type=pb.Schema.String))))
        created = raw.next_command().getOrCreateSchemaResponse
        out["get or create schema"] = f"{created.error_code} {created.error_message}"
        return out


def raw_topic_list(secured, role: str, namespace: str) -> pb.BaseCommand:
    """The broker's answer to GET_TOPICS_OF_NAMESPACE of `namespace`."""
    with raw_session(secured, role) as raw:
        raw.send(pb.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=pb.CommandGetTopicsOfNamespace(
            namespace=namespace, request_id=1)))
        return raw.next_command()


def raw_topic_list_refusal(secured, role: str, namespace: str) -> str:
    reply = raw_topic_list(secured, role, namespace)
    assert reply.type == T.ERROR, reply
    return f"{reply.error.error} {reply.error.message}"


def test_a_role_of_tenant_a_cannot_reach_tenant_b_whether_the_topic_exists_or_not(secured) -> None:
    role = unique("app")
    assert call(f"{secured.sa.admin_url}/admin/v2/namespaces/ta/ns/permissions/{role}", "POST",
                ["produce", "consume"], token=secured.su)[0] == 204
    for who in (role, "ta-admin"):
        client = client_of(secured.sa, secured.kit, who)
        try:
            for topic in ("persistent://tb/ns/secret", "persistent://tb/ns/no-such-topic",
                          "persistent://tb/no-such-ns/x", "persistent://no-such-tenant/ns/x",
                          "non-persistent://tb/ns/live"):
                refused_fast(client.create_producer, topic)
                refused_fast(client.subscribe, topic, "s")
                refused_fast(client.create_reader, topic, pulsar.MessageId.earliest)
            with pytest.raises(pulsar.LookupError):   # the C++ client reports a refused topic list so
                client.subscribe(re.compile("persistent://tb/ns/.*"), "s")
        finally:
            client.close()
    existing = raw_refusals(secured, role, "persistent://tb/ns/secret")
    auth_error = str(pb.AuthorizationError)
    assert all(answer.startswith(auth_error + " Client is not authorized to") for answer in existing.values()), existing
    for missing in ("persistent://tb/ns/no-such-topic", "persistent://no-such-tenant/ns/secret"):
        answers = raw_refusals(secured, role, missing)
        assert answers == {k: v.replace("persistent://tb/ns/secret", missing) for k, v in existing.items()}
    listing = raw_topic_list_refusal(secured, role, "tb/ns")
    assert listing.startswith(auth_error + " Client is not authorized to list the topics"), listing
    for missing in ("tb/no-such-ns", "no-such-tenant/ns"):
        assert raw_topic_list_refusal(secured, role, missing) == listing.replace("tb/ns", missing)
    assert raw_topic_list(secured, role, "ta/ns").type == T.GET_TOPICS_OF_NAMESPACE_RESPONSE   # its own: listed


def test_a_tenant_admin_manages_its_own_namespaces_only(secured) -> None:
    base, admin_token = secured.sa.admin_url, secured.kit.token("ta-admin")
    ns, role = unique("ns"), unique("app")
    body = {"auth_policies": {"namespace_auth": {role: ["produce"]}}}
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}", "PUT", body, token=admin_token)[0] == 204
    status, policies = call(f"{base}/admin/v2/namespaces/ta/{ns}", token=admin_token)
    assert status == 200 and policies["auth_policies"]["namespace_auth"] == {role: ["produce"]}
    client = client_of(secured.sa, secured.kit, role)
    try:
        client.create_producer(f"persistent://ta/{ns}/t").send(b"granted at creation")
    finally:
        client.close()
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}/permissions/{role}", "DELETE", token=admin_token)[0] == 204
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}/permissions", token=admin_token) == (200, {})
    for method, path, payload in (("PUT", f"/admin/v2/namespaces/tb/{ns}", None),
                                  ("POST", f"/admin/v2/namespaces/tb/ns/permissions/{role}", ["produce"]),
                                  ("GET", "/admin/v2/namespaces/tb/ns/permissions", None),
                                  ("DELETE", "/admin/v2/namespaces/tb/ns", None)):
        assert call(base + path, method, payload, token=admin_token)[0] == 403, (method, path)
    assert cli(secured, admin_token, "namespaces", "grant-permission", "tb/ns", "--role", role,
               "--actions", "produce") == 1
    assert call(f"{base}/admin/v2/namespaces/tb/ns/permissions", token=secured.su) == (200, {})


def next_command_within(raw: RawClient, timeout_s: float) -> pb.BaseCommand | None:
    """The broker's next command, or None if none comes within `timeout_s`."""
    raw.sock.settimeout(timeout_s)
    try:
        return raw.next_command()
    except TimeoutError:
        return None
    finally:
        raw.sock.settimeout(raw.timeout_s)


def test_a_revoke_stops_a_live_topic_list_watcher_and_a_re_grant_lets_the_role_back(secured) -> None:
    role, base = unique("watcher"), secured.sa.admin_url
    grant = f"{base}/admin/v2/namespaces/ta/ns/permissions/{role}"
    assert call(grant, "POST", ["consume"], token=secured.su)[0] == 204

    def watch(raw: RawClient, request_id: int) -> pb.BaseCommand:
        raw.send(pb.BaseCommand(type=T.WATCH_TOPIC_LIST, watchTopicList=pb.CommandWatchTopicList(
            request_id=request_id, watcher_id=7, namespace="ta/ns", topics_pattern="persistent://ta/ns/.*")))
        return raw.next_command()

    def new_topic() -> str:
        topic = f"persistent://ta/ns/{unique('listed')}"
        assert call(f"{base}/admin/v2/persistent/ta/ns/{topic.rsplit('/', 1)[1]}", "PUT", token=secured.su)[0] == 204
        return topic

    with raw_session(secured, role) as raw:
        assert watch(raw, 1).type == T.WATCH_TOPIC_LIST_SUCCESS
        topic = new_topic()
        assert list(raw.next_command().watchTopicUpdate.new_topics) == [topic]
        revoked_at = time.monotonic()
        assert call(grant, "DELETE", token=secured.su)[0] == 204
        while next_command_within(raw, 0.5) is not None or (new_topic() and next_command_within(raw, 0.5)):
            assert time.monotonic() - revoked_at < REVOKE_CLOSES_S_MAX, "the watcher still gets updates"
        new_topic()
        assert next_command_within(raw, 1.0) is None                      # dropped: no more topic names
        refusal = watch(raw, 2)                                           # asking again for the same id
        assert (refusal.type, refusal.error.error) == (T.ERROR, pb.AuthorizationError), refusal
        assert call(grant, "POST", ["consume"], token=secured.su)[0] == 204
        assert watch(raw, 3).type == T.WATCH_TOPIC_LIST_SUCCESS           # a re-grant lets it back


def test_a_role_kept_out_of_a_subscription_cannot_expire_it_through_all_subscriptions(secured) -> None:
    base, su = secured.sa.admin_url, secured.su
    role, ns, sub = unique("app"), unique("ns"), unique("restricted")
    topic = f"persistent://ta/{ns}/t"
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}", "PUT", token=su)[0] == 204
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}/permissions/{role}", "POST", ["consume"], token=su)[0] == 204
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}/permissions/subscription/{sub}", "POST", ["someone-else"],
                token=su)[0] == 204
    secured.superuser.subscribe(topic, sub).close()
    secured.superuser.create_producer(topic).send(b"kept for someone-else")
    expire = f"{base}/admin/v2/persistent/ta/{ns}/t/all_subscription/expireMessages/0"
    status, body = call(expire, "POST", token=secured.kit.token(role))
    assert status == 403 and "EXPIRE_MESSAGES" in body["reason"], body
    assert stats(secured, topic)["subscriptions"][sub]["msgBacklog"] == 1
    assert call(f"{base}/admin/v2/namespaces/ta/{ns}/permissions/subscription/{sub}", "POST",
                ["someone-else", role], token=su)[0] == 204
    assert call(expire, "POST", token=secured.kit.token(role))[0] == 204          # now one of its roles
