"""Key material and settings for tests of a secured cluster: a CA, certificates, tokens, htpasswd.

    kit = SecurityKit.create(tmp_path / "security")
    env = kit.standalone_env(tls_port=free_port(), admin_tls_port=free_port())   # STRATA_* settings
    with StandaloneProcess.start(tmp_path / "data", env=env) as sa:
        client = pulsar.Client(f"pulsar+ssl://localhost:{tls_port}", tls_trust_certs_file_path=kit.ca_file,
                               authentication=pulsar.AuthenticationToken(kit.token("alice")))

Everything is made once per kit with the product's own `auth.certs`; tokens are HS256 JWTs signed
with the kit's secret key (the same `tokenSecretKey` the broker gets). The superuser role is
`admin`; the broker's own role (broker-to-broker calls, bookies) is `strata-broker`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from passlib.apache import HtpasswdFile

from auth import certs

SUPERUSER = "admin"
BROKER_ROLE = "strata-broker"


@dataclass
class SecurityKit:
    dir: Path
    secret_key: bytes
    bookie_secret: str
    ca: certs.Issued
    users: dict[str, str] = field(default_factory=dict)   # basic: user -> password

    @classmethod
    def create(cls, directory: Path, *, basic_users: dict[str, str] | None = None) -> SecurityKit:
        directory.mkdir(parents=True, exist_ok=True)
        kit = cls(directory, secrets.token_bytes(32), secrets.token_hex(16), certs.make_ca("Strata test CA"))
        certs.write_pem(kit.ca, kit.ca_file)
        server = certs.issue(kit.ca, "localhost", hosts=("localhost", "127.0.0.1"))
        certs.write_pem(server, kit.server_cert, kit.server_key)
        kit.secret_key_file.write_bytes(kit.secret_key)
        for user, password in (basic_users or {"basic-user": "basic-pass"}).items():
            kit.add_basic_user(user, password)
        return kit

    # --- files ---

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.cert.pem"

    @property
    def server_cert(self) -> Path:
        return self.dir / "broker.cert.pem"

    @property
    def server_key(self) -> Path:
        return self.dir / "broker.key.pem"

    @property
    def secret_key_file(self) -> Path:
        return self.dir / "token-secret.key"

    @property
    def htpasswd_file(self) -> Path:
        return self.dir / "htpasswd"

    # --- credentials ---

    def token(self, role: str, *, expires_in_s: float | None = None, key: bytes | None = None, **claims) -> str:
        """An HS256 JWT with `sub` = role (signed with the kit's key unless `key` is given)."""
        payload: dict = {"sub": role, **claims}
        if expires_in_s is not None:
            payload["exp"] = int(time.time() + expires_in_s)
        return jwt.encode(payload, self.secret_key if key is None else key, algorithm="HS256")

    def client_cert(self, role: str) -> tuple[str, str]:
        """(cert path, key path) of a client certificate whose CN is `role` (made once)."""
        cert, key = self.dir / f"client-{role}.cert.pem", self.dir / f"client-{role}.key.pem"
        if not cert.exists():
            certs.write_pem(certs.issue(self.ca, role, client=True), cert, key)
        return str(cert), str(key)

    def add_basic_user(self, user: str, password: str, scheme: str = "bcrypt") -> None:
        """Add (or change) a user of the htpasswd file; bcrypt by default, "apr_md5_crypt" for apr1."""
        self.users[user] = password
        ht = HtpasswdFile(str(self.htpasswd_file), new=not self.htpasswd_file.exists(), default_scheme=scheme)
        ht.set_password(user, password)
        ht.save()

    # --- settings ---

    def standalone_env(self, *, tls_port: int, admin_tls_port: int = -1, providers: str = "token,tls,basic",
                       authorization: bool = True, superusers: tuple[str, ...] = (SUPERUSER, BROKER_ROLE),
                       anonymous_role: str = "", require_client_cert: bool = False,
                       bookie_secret: bool = True, extra: dict[str, str] | None = None) -> dict[str, str]:
        """STRATA_* settings for `StandaloneProcess.start(env=...)` (broker and bookies read the same)."""
        env = {
            "STRATA_BROKER_TLS_PORT": str(tls_port),
            "STRATA_BROKER_ADMIN_TLS_PORT": str(admin_tls_port),
            "STRATA_TLS_CERT_FILE": str(self.server_cert),
            "STRATA_TLS_KEY_FILE": str(self.server_key),
            "STRATA_TLS_TRUST_CERTS_FILE": str(self.ca_file),
            "STRATA_TLS_REQUIRE_TRUSTED_CLIENT_CERT_ON_CONNECT": str(require_client_cert).lower(),
            "STRATA_AUTHENTICATION_ENABLED": "true" if providers else "false",
            "STRATA_AUTHENTICATION_PROVIDERS": providers,
            "STRATA_TOKEN_SECRET_KEY": f"file://{self.secret_key_file}",
            "STRATA_BASIC_AUTH_CONF": str(self.htpasswd_file),
            "STRATA_AUTHORIZATION_ENABLED": str(authorization).lower(),
            "STRATA_SUPER_USER_ROLES": ",".join(superusers),
            "STRATA_ANONYMOUS_USER_ROLE": anonymous_role,
            "STRATA_BROKER_CLIENT_AUTH_TOKEN": self.token(BROKER_ROLE),
        }
        if bookie_secret:
            env["STRATA_BOOKIE_AUTH_SECRET"] = f"data:;base64,{_b64(self.bookie_secret.encode())}"
        env.update(extra or {})
        return env


def _b64(raw: bytes) -> str:
    import base64
    return base64.b64encode(raw).decode()
