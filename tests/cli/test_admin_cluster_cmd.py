"""`strata admin` cluster commands: their routes (pulsar-admin's paths and bodies), and the HTTP
client, which follows a 307 to the owner for every method with the same body, a bounded number of
times. The client (admin_client, which `strata admin` calls through) is checked against two real
HTTP servers on loopback ports: one that redirects and one that answers with what it received.
(The commands against real brokers are in tests/broker/admin/test_admin_cluster.py.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from admin_client import REDIRECTS_MAX, request_json
from cli import admin
from common.errors import AdminNotFound, AdminRedirectError
from tests.support.admin_cli import run_admin


class _Servers:
    """One server: `/hop/P` answers 307 to `/P`; `/loop/N` 307 to `/loop/N+1`, forever; `/gone/...`
    404 with a reason; anything else 200 with {"method", "path", "body", "type"} as received."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []
        servers = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else None
                servers.hits.append((self.command, self.path))
                if self.path.startswith("/hop/"):
                    self._redirect(servers.echo_url + self.path[len("/hop"):])
                elif self.path.startswith("/loop/"):        # /loop/N -> /loop/N+1, forever
                    self._redirect(f"{servers.echo_url}/loop/{int(self.path.split('/')[2]) + 1}")
                elif self.path.startswith("/gone"):
                    self._send(404, {"reason": "Topic not found"})
                else:
                    self._send(200, {"method": self.command, "path": self.path,
                                     "body": json.loads(body) if body else None,
                                     "type": self.headers.get("Content-Type")})

            def _redirect(self, location: str) -> None:
                self.send_response(307)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _send(self, status: int, value: object) -> None:
                raw = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.echo = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.echo_url = f"http://127.0.0.1:{self.echo.server_port}"
        self._thread = threading.Thread(target=self.echo.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.echo.shutdown()
        self.echo.server_close()
        self._thread.join(5)


@pytest.fixture
def servers() -> Iterator[_Servers]:
    s = _Servers()
    yield s
    s.close()


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE"])
def test_a_307_is_followed_with_the_same_method_and_body(servers: _Servers, method: str) -> None:
    body = None if method == "GET" else {"bundles": {"numBundles": 8}}
    answer = request_json(method, servers.echo_url + "/hop/admin/v2/x?authoritative=true", body)
    assert answer == {"method": method, "path": "/admin/v2/x?authoritative=true", "body": body,
                      "type": "application/json"}
    assert servers.hits == [(method, "/hop/admin/v2/x?authoritative=true"), (method, "/admin/v2/x?authoritative=true")]


def test_redirects_are_bounded(servers: _Servers) -> None:
    with pytest.raises(AdminRedirectError) as raised:
        request_json("PUT", servers.echo_url + "/loop/0", 1)
    assert raised.value.status == 307
    assert len(servers.hits) == REDIRECTS_MAX + 1


def test_an_error_status_reaches_the_caller_with_its_reason(servers: _Servers) -> None:
    with pytest.raises(AdminNotFound) as raised:
        request_json("DELETE", servers.echo_url + "/gone/x")
    assert raised.value.status == 404 and raised.value.reason == "Topic not found"
    assert json.loads(raised.value.body) == {"reason": "Topic not found"}


def test_every_admin_command_goes_through_the_redirecting_client(servers: _Servers, capsys) -> None:
    # an existing command (not a cluster one): a POST with a body, redirected once
    url = servers.echo_url + "/hop"
    assert run_admin(["--admin-url", url, "topics", "set-message-ttl", "t", "--ttl", "60"]) == 0
    echoed = json.loads(capsys.readouterr().out)
    assert echoed["method"] == "POST" and echoed["body"] == 60
    assert echoed["path"] == "/admin/v2/persistent/public/default/t/messageTTL"
    assert run_admin(["--admin-url", url, "namespaces", "create", "t/ns", "-b", "8"]) == 0
    echoed = json.loads(capsys.readouterr().out)
    assert (echoed["method"], echoed["body"]) == ("PUT", {"bundles": {"numBundles": 8}})


@pytest.mark.parametrize(("argv", "expected"), [
    (["namespaces", "create", "t/ns"], ("PUT", "/admin/v2/namespaces/t/ns", None)),
    (["namespaces", "create", "t/ns", "-b", "16"],
     ("PUT", "/admin/v2/namespaces/t/ns", {"bundles": {"numBundles": 16}})),
    (["namespaces", "bundles", "t/ns"], ("GET", "/admin/v2/namespaces/t/ns/bundles", None)),
    (["namespaces", "unload", "t/ns"], ("PUT", "/admin/v2/namespaces/t/ns/unload", None)),
    (["namespaces", "unload", "t/ns", "-b", "0x00000000_0x40000000"],
     ("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/unload", None)),
    (["namespaces", "unload", "t/ns", "-b", "0x00000000_0x40000000", "-d", "h:8081"],
     ("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/unload?destinationBroker=h:8081", None)),
    (["namespaces", "split-bundle", "t/ns", "-b", "0x00000000_0x40000000"],
     ("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/split?unload=false", None)),
    (["namespaces", "split-bundle", "t/ns", "-b", "0x00000000_0x40000000", "--unload"],
     ("PUT", "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/split?unload=true", None)),
    (["topics", "lookup", "my-topic"], ("GET", "/lookup/v2/topic/persistent/public/default/my-topic", None)),
    (["topics", "bundle-range", "persistent://t/ns/x-partition-1"],
     ("GET", "/lookup/v2/topic/persistent/t/ns/x-partition-1/bundle", None)),
    (["topics", "unload", "t/ns/x"], ("PUT", "/admin/v2/persistent/t/ns/x/unload", None)),
    (["brokers", "list"], ("GET", "/admin/v2/brokers", None)),
    (["brokers", "list", "standalone"], ("GET", "/admin/v2/brokers/standalone", None)),
    (["brokers", "leader-broker"], ("GET", "/admin/v2/brokers/leaderBroker", None)),
    (["brokers", "healthcheck"], ("GET", "/admin/v2/brokers/health", None)),
    (["clusters", "list"], ("GET", "/admin/v2/clusters", None)),
    (["broker-stats", "load-report"], ("GET", "/admin/v2/broker-stats/load-report", None)),
])
def test_routes_are_pulsars(servers: _Servers, argv: list[str], expected: tuple, capsys) -> None:
    method, path, body = expected
    assert run_admin(["--admin-url", servers.echo_url, *argv]) == 0
    assert servers.hits == [(method, path)]
    if argv[:2] != ["topics", "lookup"]:      # lookup prints the brokerUrl field only
        assert json.loads(capsys.readouterr().out)["body"] == body


def test_bad_arguments_exit_2_without_a_request(capsys) -> None:
    unreachable = ["--admin-url", "http://127.0.0.1:9"]
    assert admin.main(unreachable + ["namespaces", "unload", "t/ns", "-d", "h:1"]) == 2
    assert "-b" in capsys.readouterr().err
    assert admin.main(unreachable + ["topics", "lookup", "bad//name"]) == 2
    with pytest.raises(SystemExit):
        admin.main(unreachable + ["namespaces", "split-bundle", "t/ns"])      # -b is required
