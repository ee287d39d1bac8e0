"""`strata standalone --secure`: key material made once, TLS ports only, and the printed way to connect works.

One real secured standalone for the module (`StandaloneProcess(secure=True)`: free TLS ports given as
--tls-port/--admin-tls-port). The Python snippet and the `strata admin` line it prints are run as
printed (the official client over pulsar+ssl:// with the superuser token and the CA); the broker
process listens on the two TLS ports and nothing else; the bookie's port speaks TLS with the
generated certificate; the admin API answers 401 without credentials and 200 with the token; the
superuser's client certificate authenticates too; a restart reuses the same CA and tokens.
"""

from __future__ import annotations

import json
import shlex
import socket
import ssl
import stat
import subprocess
import sys
import textwrap

import psutil
import pulsar
import pytest

from admin_client import Credentials
from auth.keys import read_source
from cli import secure_setup
from tests.support.admin_http import exchange
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess

PRIVATE_FILES = ("ca.key.pem", "server.key.pem", "admin.key.pem", "token-secret.key", "admin.token",
                 "broker.token", "bookie.secret")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("secure") / "data", secure=True) as sa:
        yield sa


def _printed_snippet(sa) -> str:
    """The Python lines the standalone printed under 'connect with the official Python client:'."""
    lines = sa.log_path.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("connect with the official Python client:"))
    snippet = []
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        snippet.append(line)
    return textwrap.dedent("\n".join(snippet))


def _admin_get(sa, path: str, token: str | None) -> tuple[int, object]:
    trusting = Credentials(ssl_context=ssl.create_default_context(cafile=str(sa.security_dir / "ca.cert.pem")))
    answer = exchange("GET", sa.admin_url + path, token=token or None, credentials=trusting, timeout_s=10)
    return answer.status, answer.json() if answer.status < 300 else None


def _produce_consume(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"secured")
    assert consumer.receive(timeout_millis=10_000).data() == b"secured"


def test_key_material_is_private(secured):
    d = secured.security_dir
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for name in PRIVATE_FILES:
        assert stat.S_IMODE((d / name).stat().st_mode) == 0o600, name
    token = (d / "admin.token").read_text()
    assert token not in secured.log_path.read_text()        # the help names the file, never the token


def test_printed_snippet_connects_over_tls_with_the_token(secured):
    snippet = _printed_snippet(secured)
    assert "pulsar+ssl://" in snippet and "AuthenticationToken" in snippet
    scope: dict = {}
    exec(snippet, scope)                                      # the lines as a user would paste them
    client = scope["client"]
    try:
        _produce_consume(client, "persistent://public/default/secure-snippet")
    finally:
        client.close()


def test_printed_admin_command_works(secured):
    line = next(line.strip() for line in secured.log_path.read_text().splitlines()
                if line.startswith("    strata admin "))
    words = shlex.split(line)
    assert words[:2] == ["strata", "admin"]
    done = subprocess.run([sys.executable, "-m", "cli.main", *words[1:], "-o", "json"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "public" in json.loads(done.stdout), done.stderr


def test_only_the_tls_ports_listen(secured):
    listening = {c.laddr.port for c in psutil.Process(secured.pid).net_connections(kind="tcp")
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {secured.port, secured.admin_port, secured.kafka_port}   # Kafka: SASL_SSL only


def test_the_bookie_port_speaks_tls_with_the_generated_certificate(secured):
    bookie_port = json.loads((secured.data_dir / "standalone.json").read_text())["bookie_ports"][0]
    context = ssl.create_default_context(cafile=str(secured.security_dir / "ca.cert.pem"))
    context.set_alpn_protocols(["h2"])                       # the bookie's gRPC port
    with socket.create_connection(("127.0.0.1", bookie_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_admin_needs_credentials_and_the_admin_certificate_is_the_superuser(secured):
    token = (secured.security_dir / "admin.token").read_text().strip()
    assert _admin_get(secured, "/admin/v2/tenants", None)[0] == 401
    status, tenants = _admin_get(secured, "/admin/v2/tenants", token)
    assert status == 200 and "public" in tenants
    d = secured.security_dir
    client = pulsar.Client(secured.service_url, tls_trust_certs_file_path=str(d / "ca.cert.pem"),
                           authentication=pulsar.AuthenticationTLS(str(d / "admin.cert.pem"), str(d / "admin.key.pem")),
                           operation_timeout_seconds=10)
    try:
        _produce_consume(client, "persistent://public/default/secure-mtls")
    finally:
        client.close()


def test_restart_reuses_the_ca_and_tokens(secured):
    d = secured.security_dir
    before = {name: (d / name).read_bytes() for name in ("ca.cert.pem", "server.cert.pem", "admin.token")}
    secured.restart()
    assert {name: (d / name).read_bytes() for name in before} == before
    log = secured.log_path.read_text()
    assert log.count("(made now: ") == 1 and log.count("(reused)") == 1    # first start made, the restart reused
    client = pulsar.Client(secured.service_url, tls_trust_certs_file_path=str(d / "ca.cert.pem"),
                           authentication=pulsar.AuthenticationToken(before["admin.token"].decode().strip()),
                           operation_timeout_seconds=10)
    try:
        _produce_consume(client, "persistent://public/default/secure-restart")
    finally:
        client.close()


def test_printed_shell_lines_survive_a_space_in_the_data_dir(tmp_path):
    material = secure_setup.ensure_material(tmp_path / "my data" / "security", ["localhost"])
    lines = secure_setup.connect_help(material, "pulsar+ssl://localhost:6651", "https://localhost:8443").splitlines()
    admin = shlex.split(next(line for line in lines if line.startswith("    strata admin ")))
    assert admin[admin.index("--tls-trust-cert") + 1] == str(material.ca_file)
    assert read_source(admin[admin.index("--auth-token") + 1], what="token") == material.admin_token_file.read_bytes()
    curl = next(line.strip() for line in lines if line.startswith("    curl "))
    done = subprocess.run(["bash", "-c", "printf '%s\\n' " + curl.removeprefix("curl ")], capture_output=True,
                          text=True, timeout=10)   # the words curl would get, $(cat ...) expanded
    words = done.stdout.splitlines()
    assert words[:2] == ["--cacert", str(material.ca_file)]
    assert words[3] == f"Authorization: Bearer {material.admin_token_file.read_text().strip()}"
