"""Fixtures for the admin client's tests: one secured standalone for the whole package, and a real
redirecting HTTP(S) server to put in front of it.

- `secured`: a `strata standalone` with the token, tls and basic providers and authorization on
  (tests/support/security.py's kit: superuser `admin`, basic user `basic-user`), its admin API on
  plain http (`sa.admin_url`) and on https (`tls_url`, the kit's CA). Started once per package.
- `redirector(target, tls=False)`: a loopback server that answers every request with a 307 to
  `target` + the same path (what a broker answers for a topic another broker owns), recording
  what it received; `tls=True` serves https with the kit's `localhost` certificate.

Nothing here stands in for the broker: every call the client makes ends at the real standalone,
the redirector only adds the hop a cluster would add.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.security import SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port


@dataclass
class Secured:
    sa: StandaloneProcess
    kit: SecurityKit
    tls_url: str          # https://localhost:<admin TLS port>


@dataclass
class Redirector:
    """A server that 307s everything to `target`; `hits` holds (method, path, Authorization or None)."""

    server: ThreadingHTTPServer
    url: str
    hits: list[tuple[str, str, str | None]] = field(default_factory=list)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="package")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("admin-client")
    kit = SecurityKit.create(root / "security")
    admin_tls_port = free_port()
    env = kit.standalone_env(tls_port=free_port(), admin_tls_port=admin_tls_port)
    with StandaloneProcess.start(root / "data", env=env) as sa:
        yield Secured(sa=sa, kit=kit, tls_url=f"https://localhost:{admin_tls_port}")


@pytest.fixture
def redirector(secured: Secured) -> Iterator[Callable[..., Redirector]]:
    started: list[Redirector] = []

    def start(target: str, *, tls: bool = False) -> Redirector:
        hits: list[tuple[str, str, str | None]] = []

        class Handler(BaseHTTPRequestHandler):
            def _redirect(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                hits.append((self.command, self.path, self.headers.get("Authorization")))
                self.send_response(307)
                self.send_header("Location", target.rstrip("/") + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_POST = do_DELETE = _redirect

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(secured.kit.server_cert, secured.kit.server_key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        scheme = "https" if tls else "http"
        host = "localhost" if tls else "127.0.0.1"        # the kit's certificate names localhost
        made = Redirector(server, f"{scheme}://{host}:{server.server_port}", hits)
        started.append(made)
        return made

    yield start
    for made in started:
        made.close()
