"""`strata standalone --secure`: key material made once under D/security/, and the settings that use it.

    material = ensure_material(data_dir / "security", hosts=("localhost", "127.0.0.1"))
    config = config.replace(**secure_settings(config, material, tls_port=6651, admin_tls_port=8443))

What `ensure_material` keeps in the directory (mode 0700), each made only when missing or no longer
valid, so a restart reuses the same CA, certificates and tokens:

    ca.cert.pem / ca.key.pem           the CA every other certificate is signed by (clients trust ca.cert.pem)
    server.cert.pem / server.key.pem   the brokers' and bookies' certificate: localhost, 127.0.0.1 and the
                                       advertised hosts as subjectAltNames (re-issued if a host is missing)
    admin.cert.pem / admin.key.pem     a client certificate with CN `admin` (mTLS as the superuser)
    token-secret.key                   the HS256 key tokens are signed with (32 random bytes, as Pulsar's
                                       `tokens create-secret-key`)
    admin.token / broker.token         JWTs (no expiry) for the superuser `admin` and the broker's own role
                                       `strata-broker` (re-made if the key changed)
    bookie.secret                      the cluster secret brokers present to bookies

Private keys, the secret key, the tokens and the bookie secret are written with mode 0600 (written to a
temporary file first, then renamed). `secure_settings` turns on: the TLS ports, token and TLS
authentication (plus any provider already configured), authorization with superusers `admin` and
`strata-broker` (plus any configured), the broker's token for broker-to-broker calls, the bookie
secret and TLS on the bookies' ports (the broker checks their certificate, the bookies its secret).
Plain ports are off unless asked for (`--port` / `--admin-port`): a token sent over a plain port
travels in clear, and on a shared machine loopback traffic is not private to its user either.

What must hold: existing material is never overwritten while it is valid; nothing secret is printed
(the connection help names files, never their contents).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shlex
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from auth import certs
from common.config import Config, auth_providers, csv_setting

SUPERUSER_ROLE = "admin"
BROKER_ROLE = "strata-broker"
SECRET_KEY_BYTES = 32            # HS256, as Pulsar's `tokens create-secret-key`
BOOKIE_SECRET_BYTES = 32
CERT_RENEW_BEFORE = datetime.timedelta(days=30)   # a certificate this close to expiry is re-issued


@dataclass(frozen=True)
class Material:
    """The files of D/security/ (see the module docstring); `created` names those made by this call."""

    dir: Path
    created: tuple[str, ...]

    def path(self, name: str) -> Path:
        return self.dir / name

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.cert.pem"

    @property
    def admin_token_file(self) -> Path:
        return self.dir / "admin.token"

    @property
    def admin_cert_file(self) -> Path:
        return self.dir / "admin.cert.pem"

    @property
    def admin_key_file(self) -> Path:
        return self.dir / "admin.key.pem"


def ensure_material(directory: Path, hosts: Sequence[str]) -> Material:
    """Make what is missing (or invalid) under `directory`; reuse the rest."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    created: list[str] = []
    ca = _ensure_ca(directory, created)
    fresh_ca = "ca.cert.pem" in created
    _ensure_leaf(directory, ca, "server", "localhost", hosts, created, force=fresh_ca)
    _ensure_leaf(directory, ca, "admin", SUPERUSER_ROLE, (), created, force=fresh_ca)
    key = _ensure_secret(directory / "token-secret.key", SECRET_KEY_BYTES, created)
    for name, role in (("admin.token", SUPERUSER_ROLE), ("broker.token", BROKER_ROLE)):
        _ensure_token(directory / name, role, key, created)
    _ensure_secret(directory / "bookie.secret", BOOKIE_SECRET_BYTES, created, text=True)
    return Material(directory, tuple(created))


def _ensure_ca(directory: Path, created: list[str]) -> certs.Issued:
    cert_path, key_path = directory / "ca.cert.pem", directory / "ca.key.pem"
    if cert_path.exists() and key_path.exists():
        ca = certs.Issued(cert_path.read_bytes(), key_path.read_bytes())
        if _valid_for_a_while(ca.certificate()):
            return ca
    ca = certs.make_ca("Strata standalone CA")
    _write(key_path, ca.key_pem, private=True)
    _write(cert_path, ca.cert_pem, private=False)
    created += ["ca.cert.pem", "ca.key.pem"]
    return ca


def _ensure_leaf(directory: Path, ca: certs.Issued, stem: str, common_name: str, hosts: Sequence[str],
                 created: list[str], *, force: bool) -> None:
    cert_path, key_path = directory / f"{stem}.cert.pem", directory / f"{stem}.key.pem"
    if not force and cert_path.exists() and key_path.exists():
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        except ValueError:
            cert = None
        if cert is not None and _signed_by(cert, ca) and _valid_for_a_while(cert) and _covers(cert, hosts):
            return
    issued = certs.issue(ca, common_name, hosts=tuple(hosts), client=not hosts)
    _write(key_path, issued.key_pem, private=True)
    _write(cert_path, issued.cert_pem, private=False)
    created += [cert_path.name, key_path.name]


def _ensure_secret(path: Path, size_bytes: int, created: list[str], *, text: bool = False) -> bytes:
    if path.exists() and path.stat().st_size > 0:
        return path.read_bytes()
    value = secrets.token_hex(size_bytes).encode() if text else secrets.token_bytes(size_bytes)
    _write(path, value, private=True)
    created.append(path.name)
    return value


def _ensure_token(path: Path, role: str, key: bytes, created: list[str]) -> None:
    if path.exists():
        try:
            claims = jwt.decode(path.read_text().strip(), key, algorithms=["HS256"])
            if claims.get("sub") == role:
                return
        except jwt.PyJWTError:
            pass                                   # signed with another key (the key was re-made)
    _write(path, jwt.encode({"sub": role}, key, algorithm="HS256").encode(), private=True)
    created.append(path.name)


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Write via a temporary file in the same directory, mode 0600 (private) or 0644, then rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _signed_by(cert: x509.Certificate, ca: certs.Issued) -> bool:
    try:
        cert.verify_directly_issued_by(ca.certificate())
        return True
    except (InvalidSignature, ValueError, TypeError):     # another CA's, or another key type
        return False


def _valid_for_a_while(cert: x509.Certificate) -> bool:
    return cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > CERT_RENEW_BEFORE


def _covers(cert: x509.Certificate, hosts: Sequence[str]) -> bool:
    if not hosts:
        return True
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    have |= {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    return all(_normal(h) in have for h in hosts)


def _normal(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def certificate_hosts(config: Config) -> tuple[str, ...]:
    """The names the server certificate must carry: loopback, and every advertised or bound host."""
    wanted = ["localhost", "127.0.0.1", config.broker_advertised_host, config.bookie_advertised_host,
              config.bookie_bind_host, config.broker_bind_host, config.broker_admin_bind_host]
    return tuple(dict.fromkeys(h for h in wanted if h and h not in ("0.0.0.0", "::")))


def _union(first: Iterable[str], then: Iterable[str]) -> str:
    return ",".join(dict.fromkeys([*first, *then]))


def secure_settings(config: Config, material: Material, *, tls_port: int, admin_tls_port: int,
                    port: int | None, admin_port: int | None, kafka_tls_port: int = -1,
                    kafka_port: int | None = None) -> dict[str, Any]:
    """The settings `--secure` sets over `config` (plain ports -1 unless given; Kafka: SASL_SSL on
    `kafka_tls_port`, SASL_PLAINTEXT only when `kafka_port` is given)."""
    d = material.dir
    return {
        "kafka_tls_port": kafka_tls_port,
        "kafka_port": -1 if kafka_port is None else kafka_port,
        "broker_tls_port": tls_port,
        "broker_admin_tls_port": admin_tls_port,
        "broker_port": -1 if port is None else port,
        "broker_admin_port": -1 if admin_port is None else admin_port,
        "tls_cert_file": str(d / "server.cert.pem"),
        "tls_key_file": str(d / "server.key.pem"),
        "tls_trust_certs_file": str(d / "ca.cert.pem"),
        "authentication_enabled": True,
        "authentication_providers": _union(("token", "tls"), auth_providers(config)),
        "token_secret_key": f"file://{d / 'token-secret.key'}",
        "token_public_key": "",
        "authorization_enabled": True,
        "super_user_roles": _union((SUPERUSER_ROLE, BROKER_ROLE), csv_setting(config.super_user_roles)),
        "broker_client_auth_token": f"file://{d / 'broker.token'}",
        "bookie_auth_secret": f"file://{d / 'bookie.secret'}",
        "bookie_tls_enabled": True,
    }


def settings_env(settings: dict[str, Any]) -> dict[str, str]:
    """The same settings as STRATA_* environment variables (what the bookie subprocesses read)."""
    return {f"STRATA_{name.upper()}": (str(value).lower() if isinstance(value, bool) else str(value))
            for name, value in settings.items()}


def connect_help(material: Material, service_url_tls: str, admin_url_tls: str) -> str:
    """How to connect: the URLs, the files, a Python snippet and the `strata admin` form (shell lines
    quoted: a data dir may hold a space)."""
    ca, token = material.ca_file, material.admin_token_file
    q_ca, q_token, q_token_url = shlex.quote(str(ca)), shlex.quote(str(token)), shlex.quote(f"file://{token}")
    return "\n".join([
        f"security: TLS and authentication on; key material in {material.dir}"
        + (f" (made now: {', '.join(material.created)})" if material.created else " (reused)"),
        f"  CA certificate     {ca}",
        f"  superuser token    {token}  (role {SUPERUSER_ROLE})",
        f"  superuser mTLS     {material.admin_cert_file} {material.admin_key_file}",
        "connect with the official Python client:",
        "    import pulsar",
        f"    client = pulsar.Client({service_url_tls!r}, tls_trust_certs_file_path={str(ca)!r},",
        f"                           authentication=pulsar.AuthenticationToken(open({str(token)!r}).read().strip()))",
        "admin API:",
        f"    strata admin --admin-url {admin_url_tls} --auth-token {q_token_url} --tls-trust-cert {q_ca} tenants list",
        f"    curl --cacert {q_ca} -H \"Authorization: Bearer $(cat {q_token})\" {admin_url_tls}/admin/v2/tenants",
    ])
