"""Key material and settings for a perf run against a secured standalone (`strata perf produce --tls
--auth token`): a throw-away CA, a server certificate for localhost/127.0.0.1, an HS256 secret key
and a superuser token, made with the product's own `auth.certs` and PyJWT.

    setup = SecureSetup.create(directory, tls_port=free_port())
    StandaloneProcess.start(env=setup.env)               # TLS port, token authentication, authorization
    NativeClient(setup.service_url, token=setup.token, tls_trust_file=str(setup.ca_file))

The broker keeps its plain port too (the harness waits on it); clients of the measured path use only
`pulsar+ssl://`. Bookies get the cluster secret (broker↔bookie authentication at connect), not TLS:
what is measured is the client-facing TLS and token path.

What must hold: everything lives under `directory` (the caller removes it); the token never goes
to a log or the report.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from pathlib import Path

PERF_ROLE = "perf-admin"           # a superuser: authorization is on, and every check passes
BROKER_ROLE = "strata-broker"


@dataclass(frozen=True)
class SecureSetup:
    directory: Path
    tls_port: int
    token: str = field(repr=False)
    env: dict[str, str] = field(repr=False)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.cert.pem"

    @property
    def service_url(self) -> str:
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"

    @classmethod
    def create(cls, directory: Path, *, tls_port: int, auth: str = "token") -> SecureSetup:
        """Material under `directory`; auth "token" turns on token authentication and authorization
        (the token a superuser's), "" leaves both off (TLS only; `token` is then "")."""
        if auth not in ("", "token"):
            raise ValueError(f"unsupported auth {auth!r}: token or none")
        import jwt

        from auth import certs

        directory.mkdir(parents=True, exist_ok=True)
        ca = certs.make_ca("Strata perf CA")
        certs.write_pem(ca, directory / "ca.cert.pem")
        server_cert, server_key = directory / "broker.cert.pem", directory / "broker.key.pem"
        certs.write_pem(certs.issue(ca, "localhost", hosts=("localhost", "127.0.0.1")), server_cert, server_key)
        secret = secrets.token_bytes(32)
        secret_file = directory / "token-secret.key"
        secret_file.write_bytes(secret)
        secret_file.chmod(0o600)
        env = {
            "STRATA_BROKER_TLS_PORT": str(tls_port),
            "STRATA_TLS_CERT_FILE": str(server_cert),
            "STRATA_TLS_KEY_FILE": str(server_key),
            "STRATA_TLS_TRUST_CERTS_FILE": str(directory / "ca.cert.pem"),
        }
        if auth:
            env.update({
                "STRATA_AUTHENTICATION_ENABLED": "true",
                "STRATA_AUTHENTICATION_PROVIDERS": "token",
                "STRATA_TOKEN_SECRET_KEY": f"file://{secret_file}",
                "STRATA_AUTHORIZATION_ENABLED": "true",
                "STRATA_SUPER_USER_ROLES": f"{PERF_ROLE},{BROKER_ROLE}",
                "STRATA_BROKER_CLIENT_AUTH_TOKEN": jwt.encode({"sub": BROKER_ROLE}, secret, algorithm="HS256"),
                "STRATA_BOOKIE_AUTH_SECRET": "data:;base64," + base64.b64encode(secrets.token_bytes(16)).decode(),
            })
        token = jwt.encode({"sub": PERF_ROLE}, secret, algorithm="HS256") if auth else ""
        return cls(directory, tls_port, token, env)
