"""Key material refused at start: an expired server certificate, a trust file with no CA, a malformed
htpasswd (the line named, not shown), and `strata standalone` naming a bookie's own start error
(not only "a bookie exited").

Each is a KeyMaterialError naming the file (the process exits with that one line) instead of a
server that starts and then fails every handshake.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from auth import certs, tls
from auth.providers.basic import BasicProvider
from common.config import load_config
from common.errors import KeyMaterialError
from tests.support.standalone_proc import REPO_ROOT


def _expired(ca: certs.Issued) -> certs.Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca.certificate().subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=10)).not_valid_after(now - datetime.timedelta(days=1))
            .sign(ca.private_key(), hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return certs.Issued(cert.public_bytes(serialization.Encoding.PEM), key_pem)


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls-material")
    ca = certs.make_ca("probe CA")
    certs.write_pem(ca, d / "ca.pem")
    certs.write_pem(certs.issue(ca, "localhost", hosts=("localhost",)), d / "server.pem", d / "server.key")
    certs.write_pem(_expired(ca), d / "expired.pem", d / "expired.key")
    return d


def _config(material, **overrides):
    return load_config(None, env={}, **{"tls_cert_file": str(material / "server.pem"),
                                        "tls_key_file": str(material / "server.key"),
                                        "tls_trust_certs_file": str(material / "ca.pem"), **overrides})


def test_valid_material_builds_a_context(material):
    assert tls.server_context(_config(material)).verify_mode.name == "CERT_OPTIONAL"


def test_an_expired_server_certificate_is_refused_at_start(material):
    config = _config(material, tls_cert_file=str(material / "expired.pem"), tls_key_file=str(material / "expired.key"))
    with pytest.raises(KeyMaterialError, match="expired") as info:
        tls.server_context(config)
    assert str(material / "expired.pem") in str(info.value)


def test_a_trust_file_without_a_ca_is_refused(material):
    config = _config(material, tls_trust_certs_file=str(material / "server.pem"))   # a leaf, not a CA
    with pytest.raises(KeyMaterialError, match="no CA certificate"):
        tls.server_context(config)
    with pytest.raises(KeyMaterialError, match="no CA certificate"):
        tls.client_context(str(material / "server.pem"))


def test_a_malformed_htpasswd_names_the_line_and_not_its_text():
    with pytest.raises(KeyMaterialError, match="line=2") as info:
        BasicProvider(b"alice:$2y$05$" + b"a" * 53 + b"\nsecret-looking-line\n")
    assert "secret-looking" not in str(info.value)


def test_standalone_names_the_bookies_own_start_error(tmp_path):
    env = {**os.environ, "STRATA_BOOKIE_AUTH_SECRET": f"file://{tmp_path}/missing.secret"}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(tmp_path / "d"),
                           "--no-s3", "--port", "0", "--admin-port", "0"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "a bookie exited during start-up" in proc.stderr
    assert "bookie_auth_secret: cannot read file" in proc.stderr and "missing.secret" in proc.stderr
    assert "Traceback" not in proc.stderr
