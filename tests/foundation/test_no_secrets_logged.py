"""No secret is ever logged or printed: a real secured standalone started with a PostgreSQL URL password,
an S3 secret key, the bookie secret, the token signing key and the broker's token in its settings, then
used (produce/consume with a token over TLS, a refused bad token, a refused bookie client): none of
them appears in its output or any log file it wrote. Plus `common.redact` itself.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pulsar
import pytest
import sqlalchemy as sa

from bookie.client import BookieClient
from common.config import default_config
from common.errors import AuthenticationFailed, InvalidArgument
from common.redact import MASK, redact_mapping, redact_text, redact_url
from metadata.sql_schema import _normalise_url
from tests.support.security import SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

PG_PASSWORD = "pg-Pw-7c41e0"
S3_SECRET = "s3-Secret-a9b2f1e6d3"
TOKEN_KEY = b"token-signing-key-0f3e9a8b7c6d5e4f"


# --- redact ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://strata:pw@db:5432/strata?sslmode=verify-full&sslrootcert=/etc/ca.pem",
     "postgresql://strata:***@db:5432/strata?sslmode=verify-full&sslrootcert=/etc/ca.pem"),
    ("postgresql://strata@db/strata", "postgresql://strata@db/strata"),
    ("postgresql://u:p%40ss@h/db?password=zz&sslmode=require", "postgresql://u:***@h/db?password=***&sslmode=require"),
    ("https://s3.example/b?X-Amz-Signature=abc&X-Amz-Credential=k",
     "https://s3.example/b?X-Amz-Signature=***&X-Amz-Credential=***"),
    ("http://key:secret@[::1]:9000/", "http://key:***@[::1]:9000/"),
    ("sqlite:////var/lib/strata/meta.db", "sqlite:////var/lib/strata/meta.db"),
    ("http://h:9000/a@b", "http://h:9000/a@b"),
    ("not a url", "not a url"),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_redact_text_and_mapping():
    assert redact_text("cannot reach postgresql://u:pw@h/db (host=h password=pw user=u)") == \
        "cannot reach postgresql://u:***@h/db (host=h password=*** user=u)"
    env = {"STRATA_BOOKIE_AUTH_SECRET": "s3cret", "STRATA_METADATA_URL": "postgresql://u:pw@h/db",
           "STRATA_TOKEN_SECRET_KEY": "file:///etc/strata/key", "AWS_SECRET_ACCESS_KEY": "abc",
           "STRATA_BROKER_CLIENT_AUTH_TOKEN": "eyJhbGciOi", "STRATA_TLS_KEY_FILE": "/etc/strata/key.pem",
           "STRATA_AUTHENTICATION_ENABLED": "true", "STRATA_TOKEN_ALLOWED_CLOCK_SKEW_SECONDS": "60",
           "STRATA_BROKER_PORT": "6650"}
    assert redact_mapping(env) == {**env, "STRATA_BOOKIE_AUTH_SECRET": MASK, "STRATA_METADATA_URL": "postgresql://u:***@h/db",
                                   "AWS_SECRET_ACCESS_KEY": MASK, "STRATA_BROKER_CLIENT_AUTH_TOKEN": MASK}


def test_metadata_url_credentials_and_tls_reach_psycopg():
    """The password and libpq's TLS parameters of a metadata URL are psycopg's connect options."""
    url, _ = _normalise_url(f"postgresql://strata:{PG_PASSWORD}@db:5432/strata?sslmode=verify-full"
                            "&sslrootcert=/etc/ca.pem&sslcert=/etc/c.pem&sslkey=/etc/k.pem")
    _, options = sa.create_engine(url).dialect.create_connect_args(url)
    assert {k: options[k] for k in ("host", "port", "dbname", "user", "password", "sslmode", "sslrootcert",
                                    "sslcert", "sslkey")} == {
        "host": "db", "port": 5432, "dbname": "strata", "user": "strata", "password": PG_PASSWORD,
        "sslmode": "verify-full", "sslrootcert": "/etc/ca.pem", "sslcert": "/etc/c.pem", "sslkey": "/etc/k.pem"}
    with pytest.raises(InvalidArgument, match="metadata URL must be") as caught:
        _normalise_url(f"mysql://strata:{PG_PASSWORD}@db/strata")
    assert PG_PASSWORD not in str(caught.value)


# --- a secured standalone -------------------------------------------------------------------------

def _secrets(kit: SecurityKit, env: dict[str, str]) -> dict[str, str]:
    return {"postgres password": PG_PASSWORD, "S3 secret key": S3_SECRET,
            "bookie secret": kit.bookie_secret,
            "bookie secret (base64)": base64.b64encode(kit.bookie_secret.encode()).decode(),
            "token key (base64)": base64.b64encode(TOKEN_KEY).decode(), "token key": TOKEN_KEY.decode(),
            "broker token": env["STRATA_BROKER_CLIENT_AUTH_TOKEN"]}


def test_a_secured_standalone_logs_and_prints_no_secret(tmp_path):
    kit = SecurityKit.create(tmp_path / "security")
    kit.secret_key = TOKEN_KEY      # signed with the key the broker gets inline below
    tls_port = free_port()
    env = kit.standalone_env(tls_port=tls_port, authorization=False, extra={
        "STRATA_TOKEN_SECRET_KEY": "data:;base64," + base64.b64encode(TOKEN_KEY).decode(),
        "STRATA_METADATA_URL": f"postgresql://strata:{PG_PASSWORD}@127.0.0.1:1/strata?sslmode=require",
        "STRATA_OFFLOAD_ICEBERG_CATALOG_URI": f"postgresql://strata:{PG_PASSWORD}@127.0.0.1:1/catalog",
        # an external S3 nobody answers at: the broker builds its client with the key and logs the failures
        "STRATA_OFFLOAD_DRIVER": "s3", "STRATA_OFFLOAD_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "STRATA_OFFLOAD_S3_CONNECT_TIMEOUT_MS": "500",
        "AWS_ACCESS_KEY_ID": "strata-test", "AWS_SECRET_ACCESS_KEY": S3_SECRET})
    data_dir = tmp_path / "data"
    with StandaloneProcess.start(data_dir, env=env) as standalone:
        _use(standalone, kit, tls_port)
    texts = {str(p): p.read_text(errors="replace") for p in [*tmp_path.rglob("*.log")]}
    assert str(standalone.log_path) in texts and "admin URL" in texts[str(standalone.log_path)]
    assert any("bookie" in name for name in texts)
    for what, secret in _secrets(kit, env).items():
        for name, text in texts.items():
            assert secret not in text, f"{what} in {name}"


def _use(standalone: StandaloneProcess, kit: SecurityKit, tls_port: int) -> None:
    """Produce and consume with a token over TLS; a bad token and a bookie client without the secret refused."""
    url = f"pulsar+ssl://localhost:{tls_port}"
    good = pulsar.Client(url, authentication=pulsar.AuthenticationToken(kit.token("alice")),
                         tls_trust_certs_file_path=str(kit.ca_file), operation_timeout_seconds=10)
    bad = pulsar.Client(url, authentication=pulsar.AuthenticationToken(kit.token("alice", key=b"x" * 32)),
                        tls_trust_certs_file_path=str(kit.ca_file), operation_timeout_seconds=10)
    try:
        topic = "persistent://public/default/no-secrets"
        consumer = good.subscribe(topic, "s")
        producer = good.create_producer(topic)
        producer.send(b"hello")
        assert consumer.receive(timeout_millis=10_000).data() == b"hello"
        with pytest.raises(pulsar.AuthenticationError):
            bad.create_producer(topic)
    finally:
        good.close()
        bad.close()
    bookie_port = _bookie_port(standalone.data_dir)

    async def refused():
        client = BookieClient(f"127.0.0.1:{bookie_port}", config=default_config(bookie_auth_secret="wrong"))
        try:
            with pytest.raises(AuthenticationFailed):
                await client.list_ledgers()
        finally:
            await client.close()
    asyncio.run(refused())


def _bookie_port(data_dir: Path) -> int:
    import json
    return int(json.loads((data_dir / "standalone.json").read_text())["bookie_ports"][0])
