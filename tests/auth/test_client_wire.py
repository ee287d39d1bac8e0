"""What the official client (pulsar-client 3.13) puts on the wire for each authentication: the facts
auth/service.py and the providers' docstrings state, measured, not assumed.

A listener in a thread accepts the client's connection, decodes its first frame with the broker's
own codec (CommandConnect's auth_method_name and auth_data), or reads the HTTP request an http://
service URL's lookup sends (its Authorization header), then drops the connection. The client is
closed as soon as its first connection has been seen; only what it sent matters.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pulsar
import pytest

from auth.tls import peer_common_name
from wire.pulsar import FrameDecoder

FRAME_BYTES_MAX = 5 * 1024 * 1024
WAIT_S = 10.0


@dataclass
class Seen:
    """The first thing each connection sent: ("connect", method, data, peer CN) or ("http", header)."""

    items: list[tuple] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)


async def _read_connect(reader: asyncio.StreamReader) -> tuple[str | None, bytes | None]:
    decoder = FrameDecoder(FRAME_BYTES_MAX)
    while True:
        data = await reader.read(65536)
        if not data:
            return None, None
        frames = decoder.feed(data)
        if frames:
            connect = frames[0].command.connect
            return (connect.auth_method_name if connect.HasField("auth_method_name") else None,
                    connect.auth_data if connect.HasField("auth_data") else None)


async def _read_http(reader: asyncio.StreamReader) -> str | None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "authorization":
            return value.strip()
    return None


@contextmanager
def listener(kind: str, ssl_context: ssl.SSLContext | None = None) -> Iterator[tuple[int, Seen]]:
    """A server on a free loopback port recording what clients send first (kind "connect" or "http")."""
    seen = Seen()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port_box: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if kind == "connect":
                method, data = await _read_connect(reader)
                seen.items.append(("connect", method, data, peer_common_name(writer.transport)))
            else:
                seen.items.append(("http", await _read_http(reader), peer_common_name(writer.transport)))

        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            seen.event.set()
            writer.close()

    async def serve() -> asyncio.Server:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
        port_box.append(server.sockets[0].getsockname()[1])
        ready.set()
        return server

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(serve())
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(WAIT_S)
    try:
        yield port_box[0], seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT_S)


def _first(url: str, seen: Seen, **client_kwargs) -> tuple:
    """What the client's first connection to `url` sent; the client is closed as soon as it is seen."""
    client = pulsar.Client(url, operation_timeout_seconds=30, connection_timeout_ms=5000, **client_kwargs)
    attempt = threading.Thread(target=_create_producer, args=(client,), daemon=True)
    attempt.start()
    try:
        assert seen.event.wait(WAIT_S) and seen.items
    finally:
        client.close()          # fails the pending lookup at once
        attempt.join(WAIT_S)
    return seen.items[0]


def _create_producer(client: pulsar.Client) -> None:
    try:
        client.create_producer("persistent://public/default/wire-probe")
    except Exception:   # nothing answers and the client is closed under it: only what it sent matters
        pass


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    from tests.support.security import SecurityKit
    return SecurityKit.create(tmp_path_factory.mktemp("wire-kit"))


def test_token_basic_and_none_connect(kit) -> None:
    token = kit.token("alice")
    cases = [(pulsar.AuthenticationToken(token), ("token", token.encode())),
             (pulsar.AuthenticationBasic("bob", "pa:ss"), ("basic", b"bob:pa:ss")),
             (None, ("none", None))]    # no authentication: method "none", no auth_data field
    for auth, want in cases:
        with listener("connect") as (port, seen):
            kwargs = {"authentication": auth} if auth is not None else {}
            _kind, method, data, _cn = _first(f"pulsar://127.0.0.1:{port}", seen, **kwargs)
        assert (method, data) == want


def test_tls_connect_sends_method_and_certificate(kit) -> None:
    cert, key = kit.client_cert("carol")
    with listener("connect", _server_context(kit)) as (port, seen):
        _kind, method, data, cn = _first(f"pulsar+ssl://localhost:{port}", seen,
                                        authentication=pulsar.AuthenticationTLS(cert, key),
                                        tls_trust_certs_file_path=str(kit.ca_file))
    assert (method, data or b"", cn) == ("tls", b"", "carol")


def test_http_lookup_authorization_header(kit) -> None:
    token = kit.token("alice")
    cases = [(pulsar.AuthenticationToken(token), f"Bearer {token}"),
             (pulsar.AuthenticationBasic("bob", "pa:ss"), "Basic " + base64.b64encode(b"bob:pa:ss").decode()),
             (None, None)]
    for auth, want in cases:
        with listener("http") as (port, seen):
            kwargs = {"authentication": auth} if auth is not None else {}
            assert _first(f"http://127.0.0.1:{port}", seen, **kwargs) == ("http", want, None)


def test_https_lookup_with_tls_authentication_sends_only_the_certificate(kit) -> None:
    cert, key = kit.client_cert("carol")
    with listener("http", _server_context(kit)) as (port, seen):
        first = _first(f"https://localhost:{port}", seen, authentication=pulsar.AuthenticationTLS(cert, key),
                       tls_trust_certs_file_path=str(kit.ca_file))
    assert first == ("http", None, "carol")


def _server_context(kit) -> ssl.SSLContext:
    from auth.tls import server_context
    from common.config import load_config
    config = load_config(env={}, broker_tls_port=0, tls_cert_file=str(kit.server_cert),
                         tls_key_file=str(kit.server_key), tls_trust_certs_file=str(kit.ca_file))
    return server_context(config)


