"""Pulsar's security set-up recipe, as a Pulsar user would follow it, against a real standalone.

1. `strata tokens create-secret-key --output secret.key`; `strata tokens create --secret-key
   file:///.../secret.key --subject admin` (and `--subject app`, `--subject stranger`).
2. A CA, the broker's certificate and client certificates (made with the product's auth.certs, as
   Pulsar's docs make them with openssl), an htpasswd file with the user `app`.
3. A standalone.conf with Pulsar's own keys (TLS-only ports, token + TLS + basic providers,
   authorization, superUserRoles, the broker client's token), started with
   `strata standalone --config standalone.conf`; the bookie secret comes from the environment.
4. Over HTTPS with the admin token, Pulsar's JSON bodies: the cluster (created only if missing),
   a tenant with adminRoles, a namespace whose `auth_policies.namespace_auth` grants `app`
   produce and consume.
5. The official client as `app`: token over pulsar+ssl:// (hostname verified), mTLS with the
   `app` certificate, and basic; each produces and consumes. A role without a grant is refused.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest

from admin_client import Credentials
from common.net import free_port
from tests.support.admin_http import exchange
from tests.support.security import SecurityKit
from tests.support.standalone_proc import REPO_ROOT
from tests.support.waiting import wait_until

TENANT, NAMESPACE = "acme", "orders"
CLUSTER = "recipe"
PROVIDERS = ",".join(f"org.apache.pulsar.broker.authentication.AuthenticationProvider{p}"
                     for p in ("Token", "Tls", "Basic"))


def _strata(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@dataclass
class Recipe:
    dir: Path
    kit: SecurityKit
    tokens: dict[str, str]
    tls_port: int
    admin_tls_port: int

    @property
    def service_url(self) -> str:
        return f"pulsar+ssl://localhost:{self.tls_port}"

    @property
    def admin_url(self) -> str:
        return f"https://localhost:{self.admin_tls_port}"

    def rest(self, method: str, path: str, body: object = None, role: str = "admin") -> tuple[int, object]:
        credentials = Credentials.build(token=self.tokens[role], trust_file=str(self.kit.ca_file))
        answer = exchange(method, self.admin_url + path, body, credentials=credentials, timeout_s=15)
        if answer.status >= 300:
            return answer.status, answer.text()
        return answer.status, answer.json()


def _standalone_conf(r: Recipe, secret_key: Path, admin_token_file: Path) -> str:
    kit = r.kit
    return f"""\
### --- Pulsar's standalone.conf keys, TLS only --- ###
clusterName={CLUSTER}
brokerServicePort=
webServicePort=
brokerServicePortTls={r.tls_port}
webServicePortTls={r.admin_tls_port}
bindAddress=127.0.0.1
advertisedAddress=localhost
tlsCertificateFilePath={kit.server_cert}
tlsKeyFilePath={kit.server_key}
tlsTrustCertsFilePath={kit.ca_file}
tlsRequireTrustedClientCertOnConnect=false
# an option of Pulsar's that Strata does not have: warned and ignored
tlsAllowInsecureConnection=false

### --- Authentication --- ###
authenticationEnabled=true
authenticationProviders={PROVIDERS}
tokenSecretKey=file://{secret_key}
basicAuthConf=file://{kit.htpasswd_file}
authorizationEnabled=true
authorizationProvider=org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider
superUserRoles=admin
anonymousUserRole=
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=file://{admin_token_file}
"""


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipe")
    secret_key = d / "my-secret.key"
    _strata("tokens", "create-secret-key", "--output", str(secret_key))
    tokens = {role: _strata("tokens", "create", "--secret-key", f"file://{secret_key}", "--subject", role)
              for role in ("admin", "app", "stranger")}
    (d / "admin.token").write_text(tokens["admin"])
    kit = SecurityKit.create(d / "certs", basic_users={"app": "app-password"})
    r = Recipe(d, kit, tokens, free_port(), free_port())
    conf = d / "standalone.conf"
    conf.write_text(_standalone_conf(r, secret_key, d / "admin.token"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "STRATA_BOOKIE_AUTH_SECRET": "data:;base64," + base64.b64encode(kit.bookie_secret.encode()).decode()}
    log_path = d / "standalone.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(d / "data"),
                                 "--config", str(conf), "--no-s3"], cwd=REPO_ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or f"admin URL https://localhost:{r.admin_tls_port}"
                   in log_path.read_text(), 60, what="the standalone's admin URL line")
        assert proc.poll() is None, log_path.read_text()[-4000:]
        yield r
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture(scope="module")
def granted(recipe):
    """Cluster (if missing), tenant and namespace over REST with Pulsar's JSON bodies."""
    status, clusters = recipe.rest("GET", "/admin/v2/clusters")
    assert status == 200
    if CLUSTER not in clusters:
        status, _ = recipe.rest("PUT", f"/admin/v2/clusters/{CLUSTER}", {
            "serviceUrlTls": recipe.admin_url, "brokerServiceUrlTls": recipe.service_url})
        assert status in (200, 204)
    status, _ = recipe.rest("PUT", f"/admin/v2/tenants/{TENANT}",
                            {"adminRoles": ["acme-admin"], "allowedClusters": [CLUSTER]})
    assert status in (200, 204), _
    status, _ = recipe.rest("PUT", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}",
                            {"auth_policies": {"namespace_auth": {"app": ["produce", "consume"]}}})
    assert status in (200, 204), _
    return recipe


def _round_trip(client: pulsar.Client, topic: str) -> None:
    try:
        consumer = client.subscribe(topic, "recipe-sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        producer.send(b"as the recipe says")
        assert consumer.receive(timeout_millis=10_000).data() == b"as the recipe says"
    finally:
        client.close()


def _client(r: Recipe, authentication) -> pulsar.Client:
    return pulsar.Client(r.service_url, authentication=authentication, tls_trust_certs_file_path=str(r.kit.ca_file),
                         tls_validate_hostname=True, operation_timeout_seconds=10)


def test_the_conf_file_was_read_as_pulsar_reads_it(granted):
    status, policies = granted.rest("GET", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}")
    assert status == 200 and policies["auth_policies"]["namespace_auth"] == {"app": ["consume", "produce"]}
    status, cluster = granted.rest("GET", f"/admin/v2/clusters/{CLUSTER}")
    assert status == 200 and cluster["brokerServiceUrlTls"] == granted.service_url
    log = (granted.dir / "standalone.log").read_text()
    assert "tlsAllowInsecureConnection" in log                  # the ignored key was named once


def test_token_over_tls_with_hostname_verification(granted):
    _round_trip(_client(granted, pulsar.AuthenticationToken(granted.tokens["app"])),
                f"persistent://{TENANT}/{NAMESPACE}/by-token")


def test_mtls_client_certificate(granted):
    cert, key = granted.kit.client_cert("app")
    _round_trip(_client(granted, pulsar.AuthenticationTLS(cert, key)), f"persistent://{TENANT}/{NAMESPACE}/by-mtls")


def test_basic_user(granted):
    _round_trip(_client(granted, pulsar.AuthenticationBasic("app", "app-password")),
                f"persistent://{TENANT}/{NAMESPACE}/by-basic")


def test_a_role_without_a_grant_is_refused(granted):
    client = _client(granted, pulsar.AuthenticationToken(granted.tokens["stranger"]))
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(f"persistent://{TENANT}/{NAMESPACE}/by-token")
    finally:
        client.close()
    assert granted.rest("PUT", f"/admin/v2/tenants/{TENANT}-2", {"adminRoles": [], "allowedClusters": [CLUSTER]},
                        role="stranger")[0] == 403


def test_create_cluster_answers_as_pulsar(granted):
    body = {"serviceUrlTls": granted.admin_url, "brokerServiceUrlTls": granted.service_url}
    assert granted.rest("PUT", f"/admin/v2/clusters/{CLUSTER}", body)[0] == 409      # it exists: Pulsar's answer
    status, reason = granted.rest("PUT", "/admin/v2/clusters/elsewhere", body)
    assert status == 412 and "does not replicate" in str(reason)
    assert granted.rest("PUT", "/admin/v2/clusters/elsewhere", {"serviceUrl": 8080})[0] == 400
    assert granted.rest("PUT", "/admin/v2/clusters/elsewhere", body, role="app")[0] == 403   # superusers only
