"""chaos/proxy.py against real sockets: bytes flow unaltered; a `reset` partition closes and
refuses; a `blackhole` holds both ways and, healed, delivers everything it held in order; the
S3 slowdown answers 503 SlowDown; a shared link tells its source by the connecting pid."""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from chaos.cluster import socket_inode
from chaos.proxy import Link, ProxyHub
from common.net import free_port

HOST = "127.0.0.1"
PROXY_IP = "127.0.9.1"
TIMEOUT_S = 10.0


class EchoServer:
    """A TCP echo server on loopback, one thread per connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server((HOST, 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def echo():
    server = EchoServer()
    yield server
    server.close()


def _hub(echo: EchoServer, *, source: str | None = None, identify=lambda ip, port: None, http=False):
    port = free_port(PROXY_IP)
    hub = ProxyHub(identify)
    hub.add(Link("node", (PROXY_IP, port), (HOST, echo.port), source=source, http=http))
    hub.start()
    return hub, port


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _closed(sock: socket.socket) -> bool:
    """The proxy closed this connection (an orderly close, or the reset an abort sends)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_bytes_flow_unaltered(echo):
    hub, port = _hub(echo)
    try:
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as s:
            payload = os.urandom(1 << 20)
            threading.Thread(target=s.sendall, args=(payload,), daemon=True).start()
            assert _recv_exactly(s, len(payload)) == payload
    finally:
        hub.stop()


def test_reset_partition_closes_and_refuses_then_heals(echo):
    hub, port = _hub(echo, source="a")
    try:
        s = socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S)
        s.sendall(b"x")
        assert _recv_exactly(s, 1) == b"x"
        fault = hub.partition({"a"}, {"node"}, mode="reset")
        assert _closed(s)                            # closed by the proxy
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as refused:
            refused.sendall(b"y")
            assert _closed(refused)
        hub.heal(fault)
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as again:
            again.sendall(b"z")
            assert _recv_exactly(again, 1) == b"z"
    finally:
        hub.stop()


def test_blackhole_holds_then_delivers_in_order(echo):
    hub, port = _hub(echo, source="a")
    try:
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as s:
            fault = hub.partition({"node"}, {"a"}, mode="blackhole")   # either side names the cut
            s.sendall(b"held-1")
            s.settimeout(0.3)
            with pytest.raises(TimeoutError):
                s.recv(1)
            s.sendall(b"held-2")
            hub.heal(fault)
            s.settimeout(TIMEOUT_S)
            assert _recv_exactly(s, 12) == b"held-1held-2"
    finally:
        hub.stop()


def test_partition_spares_other_sources(echo):
    """A shared link tells its source by the connecting socket: this process's sockets are node
    "me" (found in /proc as chaos/cluster.py does)."""
    mine = os.getpid()

    def identify(ip: str, port: int) -> str | None:
        inode = socket_inode(ip, port)
        fds = os.listdir(f"/proc/{mine}/fd")
        owned = {os.readlink(f"/proc/{mine}/fd/{fd}") for fd in fds if os.path.exists(f"/proc/{mine}/fd/{fd}")}
        return "me" if f"socket:[{inode}]" in owned else None

    hub, port = _hub(echo, identify=identify)
    try:
        fault = hub.partition({"someone-else"}, {"node"}, mode="reset")
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as s:
            s.sendall(b"ok")
            assert _recv_exactly(s, 2) == b"ok"
        hub.heal(fault)
        hub.partition({"me"}, {"node"}, mode="reset")
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as s:
            s.sendall(b"no")
            assert _closed(s)
    finally:
        hub.stop()


def test_slowdown_answers_503(echo):
    hub, port = _hub(echo, http=True)
    try:
        hub.slowdown("node", True)
        request = urllib.request.Request(f"http://{PROXY_IP}:{port}/bucket/key", data=b"body", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=TIMEOUT_S)
        assert err.value.code == 503
        assert b"<Code>SlowDown</Code>" in err.value.read()
        hub.slowdown("node", False)
        with socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S) as s:
            s.sendall(b"GET")
            assert _recv_exactly(s, 3) == b"GET"      # the echo again, not a 503
    finally:
        hub.stop()


def test_stop_is_bounded(echo):
    hub, port = _hub(echo, source="a")
    hub.partition({"a"}, {"node"}, mode="blackhole")
    held = socket.create_connection((PROXY_IP, port), timeout=TIMEOUT_S)
    started = time.monotonic()
    hub.stop()
    assert time.monotonic() - started < TIMEOUT_S
    held.close()
