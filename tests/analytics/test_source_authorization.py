"""The Spark source honours a secured cluster's authorization (issue 17 item 3: no cross-tenant read
through the Spark source): a real secured standalone (tests/support/security.py's kit: token
authentication, authorization on) and the session's SparkSession.

Tenants `ta` (admin role `alice`) and `tb` (admin role `bob`), each with namespace `ns` and topic
`t1` holding a few messages, written by the superuser.

What must hold:
- the broker wrote its security record (`/admin/security`) at start, and it says authorization is on;
- alice's token reads ta's topic, every message (the `token` option or pulsar-spark's
  authPluginClassName/authParams), and the token shows in no query plan;
- alice is refused tb's topic on the driver (SourceAccessDenied, before any partition runs), with
  the same message as for a topic of tb that does not exist; the schema lookup is refused alike;
- the broker is asked over https:// with the query's trust file (and refuses to be trusted without);
- no credentials → refused, even for a topic she could read;
- a topicsPattern over both tenants gives alice only ta's rows;
- the sink writes with the role's token through pulsar+ssl:// (trust file) into its own tenant,
  and cannot write into the other's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pulsar
import pytest

from analytics.source import StrataReader
from common import security_records
from common.errors import SourceAccessDenied
from metadata import open_store
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

MESSAGES = 5
TOPIC_A = "persistent://ta/ns/t1"
TOPIC_B = "persistent://tb/ns/t1"
MISSING_B = "persistent://tb/ns/nope"
pytestmark = pytest.mark.timeout(300)   # the first query's Spark start-up falls in this module on a loaded box


@dataclass
class World:
    sa: StandaloneProcess
    kit: SecurityKit
    admin_tls_url: str
    service_tls_url: str

    def options(self, role: str | None = "alice", **extra: str) -> dict[str, str]:
        base = {"metadataUrl": self.sa.metadata_url, "admin.url": self.sa.admin_url}
        if role is not None:
            base["token"] = self.kit.token(role)
        return {**base, **extra}


def _admin(sa: StandaloneProcess, token: str, method: str, path: str, body: str | None = None) -> int:
    from tests.support.admin_http import exchange

    return exchange(method, sa.admin_url + path, raw=None if body is None else body.encode(), token=token).status


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("spark-authz")
    kit = SecurityKit.create(root / "security")
    # no bookie secret: the executors' bookie reads are not what this module is about
    admin_tls_port, tls_port = free_port(), free_port()
    env = kit.standalone_env(tls_port=tls_port, admin_tls_port=admin_tls_port, providers="token",
                             bookie_secret=False)
    with StandaloneProcess.start(root / "data", env=env) as sa:
        su = kit.token(SUPERUSER)
        for tenant, admin in (("ta", "alice"), ("tb", "bob")):
            assert _admin(sa, su, "PUT", f"/admin/v2/tenants/{tenant}",
                          f'{{"adminRoles": ["{admin}"], "allowedClusters": ["standalone"]}}') == 204
            assert _admin(sa, su, "PUT", f"/admin/v2/namespaces/{tenant}/ns") == 204
            assert _admin(sa, su, "POST", f"/admin/v2/namespaces/{tenant}/ns/deduplication", "true") == 204
        client = pulsar.Client(sa.service_url, authentication=pulsar.AuthenticationToken(su),
                               operation_timeout_seconds=20)
        try:
            for topic in (TOPIC_A, TOPIC_B):
                producer = client.create_producer(topic, batching_enabled=False)
                for i in range(MESSAGES):
                    producer.send(f"{topic}#{i}".encode())
                producer.close()
        finally:
            client.close()
        yield World(sa, kit, f"https://localhost:{admin_tls_port}", f"pulsar+ssl://localhost:{tls_port}")


def payloads(df) -> list[str]:
    return sorted(bytes(row.payload).decode() for row in df.select("payload").collect())


def denied_text(world: World, topic: str, role: str | None = "alice") -> str:
    with pytest.raises(SourceAccessDenied) as caught:
        StrataReader(world.options(role, topic=topic)).partitions()
    return str(caught.value)


def test_the_broker_records_that_it_enforces_authorization(world: World) -> None:
    store = open_store(world.sa.metadata_url)
    try:
        record = security_records.read(store)
    finally:
        store.close()
    assert record.authentication_enabled and record.authorization_enabled
    assert record.admin_tls_url == world.admin_tls_url.replace("localhost", "127.0.0.1")


def test_a_tenant_reads_its_own_topic(spark, world: World) -> None:
    df = spark.read.format("strata").options(**world.options(topic=TOPIC_A)).load()
    assert payloads(df) == sorted(f"{TOPIC_A}#{i}" for i in range(MESSAGES))
    params = spark.read.format("strata").options(**world.options(None, topic=TOPIC_A, **{
        "pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "pulsar.client.authParams": f"token:{world.kit.token('alice')}"})).load()
    assert payloads(params) == payloads(df)
    for plan in (df, params):                    # Spark redacts the secret in the plans it shows
        assert world.kit.token("alice") not in plan._jdf.queryExecution().toString()


def test_another_tenants_topic_is_refused_on_the_driver_whether_it_exists(spark, world: World) -> None:
    existing = denied_text(world, TOPIC_B)
    missing = denied_text(world, MISSING_B)
    assert existing.replace(TOPIC_B, "T") == missing.replace(MISSING_B, "T")
    assert "not authorized to consume" in existing
    with pytest.raises(Exception, match="not authorized to consume"):      # schema lookup, then planning
        spark.read.format("strata").options(**world.options(topic=TOPIC_B)).load().count()


def test_the_broker_is_asked_over_https_with_the_trust_file(world: World) -> None:
    over_https = {"admin.url": world.admin_tls_url, "tls.trustCertsFilePath": str(world.kit.ca_file)}
    assert StrataReader(world.options(topic=TOPIC_A, **over_https)).partitions()
    with pytest.raises(SourceAccessDenied):
        StrataReader(world.options(topic=TOPIC_B, **over_https)).partitions()
    with pytest.raises(SourceAccessDenied):        # the system's trust store does not know the kit's CA
        StrataReader(world.options(topic=TOPIC_A, **{"admin.url": world.admin_tls_url})).partitions()


def test_no_credentials_are_refused(world: World) -> None:
    assert "enforces authorization" in denied_text(world, TOPIC_A, role=None)
    assert "enforces authorization" in denied_text(world, TOPIC_B, role=None)


def test_a_pattern_over_both_tenants_yields_only_the_readable_rows(spark, world: World) -> None:
    df = spark.read.format("strata").options(**world.options(topicsPattern=r"persistent://t[ab]/ns/.*")).load()
    assert payloads(df) == sorted(f"{TOPIC_A}#{i}" for i in range(MESSAGES))
    as_admin = spark.read.format("strata").options(**world.options(SUPERUSER, topicsPattern=r"persistent://t[ab]/ns/.*"))
    assert len(payloads(as_admin.load())) == 2 * MESSAGES


def test_the_sink_writes_with_the_roles_token_over_tls(spark, world: World) -> None:
    """Exactly-once (the deduplication check over https with the token) into alice's own tenant,
    through pulsar+ssl:// with the trust file; tenant B's topic is refused by the broker."""
    secured = {"service.url": world.service_tls_url, "admin.url": world.admin_tls_url,
               "tls.trustCertsFilePath": str(world.kit.ca_file), "token": world.kit.token("alice")}
    rows = spark.createDataFrame([(f"out#{i}",) for i in range(3)], "value string")
    rows.write.format("strata").mode("append").options(topic="persistent://ta/ns/out", **secured).save()
    back = spark.read.format("strata").options(**world.options(topic="persistent://ta/ns/out")).load()
    assert payloads(back) == ["out#0", "out#1", "out#2"]
    with pytest.raises(Exception, match="may not read the topic's deduplication policy"):
        rows.write.format("strata").mode("append").options(topic="persistent://tb/ns/out", **secured).save()
    with pytest.raises(Exception, match=r"(?i)authorization"):       # the broker refuses the producer
        rows.write.format("strata").mode("append").options(topic="persistent://tb/ns/out", exactlyOnce="false",
                                                           **secured).save()
