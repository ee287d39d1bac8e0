"""Bookies refuse anyone but brokers (bookie/link_auth.py): the cluster secret on gRPC and as the data
link's first frame, mTLS by certificate CN, TLS on both ports; a broker's ledgers go through it.

One real `strata bookie` process per mode (module fixtures): a secret-only bookie, and a TLS bookie
that takes a client certificate of role `strata-broker` or the secret. The refusals are checked on
the typed client (every control call, adds, reads) and with raw frames on the data port, and
nothing refused reaches storage (an authenticated client then finds no trace of the ledger).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import ssl
import struct
import time
from pathlib import Path

import pulsar
import pytest

from auth import certs, tls
from bookie.client import BookieClient
from bookie.client_core import crc32c
from bookie.frames import HEADER_BYTES, FrameKind, encode_frame
from bookie.server import BookieServer
from common.config import Config, default_config
from common.errors import AuthenticationFailed, BookieUnavailable, NoSuchLedger
from launch.bookie import BookieProcess
from ledger import placement
from ledger.client import LedgerClient
from metadata import open_store
from metadata.aio import AsyncMetadataStore
from proto import bookie_pb2 as pb
from tests.support.security import BROKER_ROLE, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

SECRET = "bookie-test-secret-Zq81"
AUTH_TIMEOUT_MS = 1500
REFUSAL_S_MAX = 5.0      # a refused call fails at once: no retry loop


def _add(client: BookieClient, ledger_id: int, entry_id: int) -> asyncio.Future:
    return client.submit_add(ledger_id, entry_id, b"p%d" % entry_id, entry_id - 1, writer_token=b"w")


# --- a secret-only bookie -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secret_bookie(tmp_path_factory):
    d = tmp_path_factory.mktemp("secret-bookie")
    bookie = BookieProcess.start(d / "b", env={"STRATA_BOOKIE_AUTH_SECRET": SECRET,
                                               "STRATA_AUTHENTICATION_CONNECT_TIMEOUT_MS": str(AUTH_TIMEOUT_MS)})
    yield bookie
    bookie.close()


def _secret_config(secret: str = SECRET) -> Config:
    return default_config(bookie_auth_secret=secret)


async def _data_port(address: str, config: Config) -> int:
    client = BookieClient(address, config=config)
    try:
        return (await client.info()).data_port
    finally:
        await client.close()


async def _assert_every_call_refused(address: str, config: Config) -> None:
    client = BookieClient(address, config=config)
    try:
        started = time.monotonic()
        calls = {"info": client.info(), "lac": client.read_lac(5), "fence": client.fence(5),
                 "delete": client.delete_ledger(5), "list": client.list_ledgers(),
                 "add": _add(client, 5, 0), "read": client.read(5, 0, 0, allow_past_lac=True)}
        for name, call in calls.items():
            with pytest.raises(AuthenticationFailed) as caught:
                await asyncio.wait_for(call, REFUSAL_S_MAX)
            assert not caught.value.retriable, name
            assert SECRET not in str(caught.value)
        assert time.monotonic() - started < REFUSAL_S_MAX
    finally:
        await client.close()


@pytest.mark.parametrize("secret", ["", "wrong-secret"])
def test_no_or_wrong_secret_is_refused_on_every_call(secret_bookie, secret):
    asyncio.run(_assert_every_call_refused(secret_bookie.address, _secret_config(secret)))


def test_right_secret_adds_reads_fences_lists_deletes(secret_bookie):
    async def go():
        client = BookieClient(secret_bookie.address, config=_secret_config())
        try:
            await asyncio.gather(*(_add(client, 11, i) for i in range(20)))
            assert await client.read(11, 0, 19, allow_past_lac=True) == [(i, b"p%d" % i) for i in range(20)]
            assert 11 in [s.ledger_id for s in await client.list_ledgers()]
            assert await client.fence(11) == (18, 19)
            await client.delete_ledger(11)
            assert (await client.info()).data_port > 0
        finally:
            await client.close()
    asyncio.run(go())


def test_a_broker_with_the_wrong_secret_fails_its_start_check(secret_bookie, tmp_path):
    """LedgerClient.check_credentials (run at the broker's start): a registered bookie that refuses
    the secret is AuthenticationFailed naming it (the broker used to start, then retry every append
    against the refusal forever, logging that the bookie 'does not answer'); the right secret passes."""
    async def go(secret: str) -> None:
        astore = AsyncMetadataStore(open_store(f"sqlite:///{tmp_path}/meta-{len(secret)}.db"))
        await astore.create(f"{placement.AVAILABLE_PATH}/{secret_bookie.address}",
                            json.dumps({"address": secret_bookie.address}).encode())
        client = LedgerClient(astore, _secret_config(secret))
        try:
            await client.check_credentials()
        finally:
            await client.close()
            await astore.close()
    asyncio.run(go(SECRET))
    started = time.monotonic()
    with pytest.raises(AuthenticationFailed, match=f"bookie {secret_bookie.address} refused"):
        asyncio.run(go("a-wrong-secret"))
    assert time.monotonic() - started < REFUSAL_S_MAX


def _raw_exchange(port: int, data: bytes, *, wrap: ssl.SSLContext | None = None) -> bytes:
    """Send `data` on a fresh connection; everything the bookie sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
        sock = wrap.wrap_socket(plain, server_hostname="localhost") if wrap else plain
        sock.sendall(data)
        received = b""
        with contextlib.suppress(ConnectionResetError, ssl.SSLError):
            while chunk := sock.recv(65536):
                received += chunk
    return received


def _frames(data: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    while pos + HEADER_BYTES <= len(data):
        length, kind = struct.unpack_from(">IB", data, pos)
        out.append((kind, data[pos + HEADER_BYTES:pos + 4 + length]))
        pos += 4 + length
    return out


def _error_code(data: bytes) -> int:
    frames = _frames(data)
    assert [kind for kind, _ in frames] == [FrameKind.ERROR], frames
    return pb.DataLinkError.FromString(frames[0][1]).error_code


def _add_frame(ledger_id: int) -> bytes:
    request = pb.AddRequest(request_id=1, writer_token=b"w",
                            entries=[pb.AddEntry(ledger_id=ledger_id, entry_id=0, payload=b"x",
                                                 crc32c=crc32c(b"x"), last_add_confirmed=-1)])
    return encode_frame(FrameKind.ADD_REQUEST, request.SerializeToString())


def _read_frame(ledger_id: int) -> bytes:
    request = pb.ReadRequest(request_id=2, ledger_id=ledger_id, first_entry=0, last_entry=0, allow_past_lac=True)
    return encode_frame(FrameKind.READ_REQUEST, request.SerializeToString())


def test_data_port_refuses_raw_frames_without_the_secret(secret_bookie):
    port = asyncio.run(_data_port(secret_bookie.address, _secret_config()))
    hello = encode_frame(FrameKind.HELLO, SECRET.encode())
    refused = {
        "add first": _add_frame(21),
        "read first": _read_frame(21),
        "empty hello": encode_frame(FrameKind.HELLO, b"") + _add_frame(22),
        "wrong hello": encode_frame(FrameKind.HELLO, b"not-it") + _add_frame(23),
        "hello second": _add_frame(24) + hello,
    }
    for name, data in refused.items():
        assert _error_code(_raw_exchange(port, data)) == AuthenticationFailed.code, name
    # a huge first frame is refused from its header: nothing of it is buffered
    huge = struct.pack(">IB", 50 * 1024 * 1024, FrameKind.HELLO)
    assert _error_code(_raw_exchange(port, huge)) != 0
    # the right HELLO, then an add: answered like any add
    answer = _frames(_raw_exchange_until(port, hello + _add_frame(25), FrameKind.ADD_RESPONSE))
    assert [k for k, _ in answer] == [FrameKind.ADD_RESPONSE]
    assert pb.AddResponse.FromString(answer[0][1]).results[0].error_code == 0

    async def nothing_stored():
        client = BookieClient(secret_bookie.address, config=_secret_config())
        try:
            for ledger_id in (21, 22, 23, 24):
                with pytest.raises(NoSuchLedger):
                    await client.read_lac(ledger_id)
            assert (await client.read_lac(25))[1] == 0
        finally:
            await client.close()
    asyncio.run(nothing_stored())


def _raw_exchange_until(port: int, data: bytes, kind: FrameKind) -> bytes:
    """Send `data`; what the bookie answered up to its first frame of `kind` (bounded wait)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while not any(k == kind for k, _ in _frames(received)):
            chunk = sock.recv(65536)
            assert chunk, f"closed after {received!r}"
            received += chunk
    return received


def test_silent_connection_is_closed_after_the_auth_timeout(secret_bookie):
    port = asyncio.run(_data_port(secret_bookie.address, _secret_config()))
    started = time.monotonic()
    assert _error_code(_raw_exchange(port, b"")) == AuthenticationFailed.code
    assert AUTH_TIMEOUT_MS / 1000 * 0.8 <= time.monotonic() - started < AUTH_TIMEOUT_MS / 1000 + 5


def test_the_secret_is_never_logged(secret_bookie):
    asyncio.run(_assert_every_call_refused(secret_bookie.address, _secret_config("wrong-secret")))
    text = secret_bookie.log_path.read_text(errors="replace")
    assert "refused" in text
    assert SECRET not in text and base64.b64encode(SECRET.encode()).decode() not in text


# --- a TLS bookie: mTLS by role, or the secret --------------------------------------------------------

@pytest.fixture(scope="module")
def tls_bookie(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls-bookie")
    kit = SecurityKit.create(d / "security")
    env = {"STRATA_BOOKIE_TLS_ENABLED": "true", "STRATA_BOOKIE_TLS_CLIENT_ROLES": BROKER_ROLE,
           "STRATA_BOOKIE_AUTH_SECRET": SECRET, "STRATA_TLS_CERT_FILE": str(kit.server_cert),
           "STRATA_TLS_KEY_FILE": str(kit.server_key), "STRATA_TLS_TRUST_CERTS_FILE": str(kit.ca_file)}
    bookie = BookieProcess.start(d / "b", env=env)
    yield bookie, kit
    bookie.close()


def _tls_config(kit: SecurityKit, role: str | None, secret: str = "", cert: tuple[str, str] | None = None) -> Config:
    cert_file, key_file = cert or (kit.client_cert(role) if role else ("", ""))
    return default_config(bookie_tls_enabled=True, tls_cert_file=str(kit.server_cert),
                          tls_key_file=str(kit.server_key), tls_trust_certs_file=str(kit.ca_file),
                          bookie_client_tls_cert_file=cert_file, bookie_client_tls_key_file=key_file,
                          bookie_auth_secret=secret)


async def _round_trip(address: str, config: Config, ledger_id: int) -> None:
    client = BookieClient(address, config=config)
    try:
        await asyncio.gather(*(_add(client, ledger_id, i) for i in range(5)))
        assert await client.read(ledger_id, 0, 4, allow_past_lac=True) == [(i, b"p%d" % i) for i in range(5)]
        assert await client.fence(ledger_id) == (3, 4)
        assert ledger_id in [s.ledger_id for s in await client.list_ledgers()]
        await client.delete_ledger(ledger_id)
    finally:
        await client.close()


def test_mtls_by_role_works_and_other_roles_are_refused(tls_bookie):
    bookie, kit = tls_bookie
    asyncio.run(_round_trip(bookie.address, _tls_config(kit, BROKER_ROLE), 31))
    # a trusted certificate of another role proves nothing; with the secret it is let in
    asyncio.run(_assert_every_call_refused(bookie.address, _tls_config(kit, "someone-else")))
    asyncio.run(_round_trip(bookie.address, _tls_config(kit, "someone-else", secret=SECRET), 32))
    # the data port too: a verified certificate of another role, HELLO without the secret
    port = asyncio.run(_data_port(bookie.address, _tls_config(kit, BROKER_ROLE)))
    cert, key = kit.client_cert("someone-else")
    context = tls.client_context(str(kit.ca_file), cert_file=cert, key_file=key)
    assert _error_code(_raw_exchange(port, encode_frame(FrameKind.HELLO, b"") + _add_frame(33),
                                     wrap=context)) == AuthenticationFailed.code


def test_untrusted_or_missing_certificate_and_plaintext_are_refused(tls_bookie, tmp_path):
    bookie, kit = tls_bookie
    rogue_ca = certs.make_ca("rogue CA")
    rogue = certs.issue(rogue_ca, BROKER_ROLE, client=True)
    rogue_cert, rogue_key = tmp_path / "rogue.cert.pem", tmp_path / "rogue.key.pem"
    certs.write_pem(rogue, rogue_cert, rogue_key)
    untrusted = _tls_config(kit, None, secret=SECRET, cert=(str(rogue_cert), str(rogue_key)))
    no_cert = _tls_config(kit, None, secret=SECRET)
    plaintext = default_config(bookie_auth_secret=SECRET)

    async def go():
        for config in (untrusted, no_cert, plaintext):
            client = BookieClient(bookie.address, config=config)
            try:
                with pytest.raises((BookieUnavailable, AuthenticationFailed)):
                    await asyncio.wait_for(client.list_ledgers(), REFUSAL_S_MAX)
                with pytest.raises((BookieUnavailable, AuthenticationFailed)):
                    await asyncio.wait_for(_add(client, 34, 0), REFUSAL_S_MAX)
            finally:
                await client.close()
        await _round_trip(bookie.address, _tls_config(kit, BROKER_ROLE), 35)
    asyncio.run(go())
    port = asyncio.run(_data_port(bookie.address, _tls_config(kit, BROKER_ROLE)))
    context = tls.client_context(str(kit.ca_file), cert_file=str(rogue_cert), key_file=str(rogue_key))
    try:   # TLS 1.3: the server's refusal of the certificate may only show after the client's first write
        received = _raw_exchange(port, encode_frame(FrameKind.HELLO, SECRET.encode()) + _add_frame(36),
                                 wrap=context)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        received = b""
    assert received == b""


# --- a broker through authenticated links -------------------------------------------------------------

def test_standalone_broker_produces_and_consumes_through_authenticated_tls_bookies(tmp_path):
    kit = SecurityKit.create(tmp_path / "security")
    env = kit.standalone_env(tls_port=free_port(), providers="", authorization=False,
                             extra={"STRATA_BOOKIE_TLS_ENABLED": "true"})
    with StandaloneProcess.start(tmp_path / "data", env=env) as sa:
        client = pulsar.Client(sa.service_url, operation_timeout_seconds=30)
        try:
            topic = "persistent://public/default/bookie-auth"
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic)
            for i in range(20):
                producer.send(b"m%d" % i)
            got = [consumer.receive(timeout_millis=10_000).data() for _ in range(20)]
            assert got == [b"m%d" % i for i in range(20)]
        finally:
            client.close()
        bookie_log = tmp_path / "data" / "bookie-0" / "bookie.log"
        assert bookie_log.exists()   # where a bookie open to anyone would have said so
        logs = "".join(p.read_text(errors="replace") for p in Path(tmp_path).rglob("*.log"))
        assert "bookie refused" not in logs and "accepts any client" not in logs
        assert kit.bookie_secret not in logs


def test_tls_with_the_secret_alone_needs_no_client_certificate(tmp_path):
    """An in-process bookie with TLS and the secret, no roles: a client with the secret and the trust file only."""
    kit = SecurityKit.create(tmp_path / "security")
    tls_only = {"bookie_tls_enabled": True, "tls_cert_file": str(kit.server_cert), "tls_key_file": str(kit.server_key),
                "tls_trust_certs_file": str(kit.ca_file)}

    async def go():
        server = BookieServer(str(tmp_path / "b"), default_config(**tls_only, bookie_auth_secret=SECRET))
        await server.start()
        try:
            await _round_trip(server.address, default_config(**tls_only, bookie_auth_secret=SECRET), 41)
            await _assert_every_call_refused(server.address, default_config(**tls_only))
        finally:
            await server.stop(0)
    asyncio.run(go())
