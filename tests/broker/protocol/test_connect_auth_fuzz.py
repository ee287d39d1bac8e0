"""Fuzzing the CONNECT/AUTH path of a real broker with authentication on: no crash, no bypass.

Hypothesis (fixed seed FUZZ_SEED, printed on failure) draws short sequences of raw frames:
CONNECT with random auth_method_name / auth_data (malformed JWTs, alg "none", a wrong key, a valid
signature over a tampered payload, expired, basic with wrong passwords, the tls method without a
certificate), AUTH_RESPONSE before or after CONNECT, commands before CONNECTED (PRODUCER, SUBSCRIBE,
LOOKUP, PARTITIONED_METADATA, SEND, PING) and frames of random bytes. None of them carries valid
credentials, so whatever the broker answers must be a refusal:
- never CONNECTED, except to a client calling itself "Pulsar-CPP-..." (broker.protocol.auth's REFUSED
  state), and then only failures carrying AuthenticationError follow;
- never PRODUCER_SUCCESS, SUCCESS, SEND_RECEIPT, a LOOKUP/PARTITIONED_METADATA answer that succeeds,
  PONG or AUTH_CHALLENGE.
Afterwards the broker process is alive and a client with a valid token connects and produces (and
the same raw checks with valid credentials do see CONNECTED and PRODUCER_SUCCESS: the invariant is
not vacuous).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from collections.abc import Iterator

import jwt
import pulsar
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from common.errors import PulsarServerError, StrataError
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command

FUZZ_SEED = 20261117
EXAMPLES = 250
READ_WINDOW_S = 0.2          # how long one example waits for the broker's answers (it usually closes first)
FRAME_BYTES_MAX = 1024 * 1024
CPP_VERSION = "Pulsar-CPP-v4.2.0"
AUTH_ERROR = PulsarServerError.AuthenticationError
TOPIC = "persistent://public/default/fuzz-auth"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneProcess, SecurityKit]]:
    root = tmp_path_factory.mktemp("connect-fuzz")
    kit = SecurityKit.create(root / "security")
    env = kit.standalone_env(tls_port=free_port(), extra={"STRATA_AUTHENTICATION_CONNECT_TIMEOUT_MS": "1000"})
    with StandaloneProcess.start(root / "data", env=env) as sa:
        yield sa, kit


# --- credentials that must all be refused -----------------------------------------------------------

def _b64(data: dict | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def bad_tokens(kit: SecurityKit) -> list[bytes]:
    valid = kit.token("alice")
    head, _, signature = valid.split(".")
    return [t.encode() for t in (
        f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64({'sub': SUPERUSER})}.",              # alg none
        f"{_b64({'alg': 'none'})}.{_b64({'sub': SUPERUSER})}",
        jwt.encode({"sub": SUPERUSER}, b"k" * 32, algorithm="HS256"),                      # another key
        f"{head}.{_b64({'sub': SUPERUSER})}.{signature}",                                  # tampered payload
        kit.token(SUPERUSER, expires_in_s=-120),                                           # expired
        kit.token(SUPERUSER, nbf=int(time.time()) + 3600),                                 # not yet valid
        valid[:-3] + ("AAA" if not valid.endswith("AAA") else "BBB"),                      # bad signature
        "a.b.c", "..", "", "Bearer " + valid, valid + ".", " " + valid)]


def _mostly(likely: st.SearchStrategy, rarely: st.SearchStrategy, percent: int) -> st.SearchStrategy:
    """`likely` about `percent` % of the time, else `rarely` (one_of would weigh by branch count)."""
    return st.integers(0, 99).flatmap(lambda i: likely if i < percent else rarely)


def credentials(kit: SecurityKit) -> st.SearchStrategy[tuple[str, bytes]]:
    """(auth_method_name, auth_data) pairs none of which is valid: mostly a known method with data made
    to look almost right for it, sometimes anything."""
    wrong_basic = [b"basic-user:wrong", b"basic-user", b":", b"basic-user:", b"\0" * 8, b"admin:basic-pass",
                   b"basic-user:basic-pass\0", b"basic-user:basic-pass:", b" basic-user:basic-pass"]
    known = {"token": st.sampled_from(bad_tokens(kit)), "basic": st.sampled_from(wrong_basic),
             "tls": st.sampled_from([b"", b"none", b"CN=admin", SUPERUSER.encode()]),
             "none": st.sampled_from([b"", kit.token(SUPERUSER).encode()]),   # no method: data ignored
             "": st.sampled_from([b"", b"basic-user:basic-pass"])}
    method = _mostly(st.sampled_from([*known, "Token", "TOKEN", "bogus", "http:bearer"]), st.text(max_size=24), 85)
    return method.flatmap(lambda m: st.tuples(st.just(m), _mostly(known.get(m, st.nothing()), st.binary(max_size=256),
                                                                  80 if m in known else 0)))


def frames(kit: SecurityKit) -> st.SearchStrategy[list[bytes]]:
    """A sequence of whole frames, most often starting with CONNECT."""
    creds = credentials(kit)
    connect = st.builds(
        lambda c, version, protocol, refresh: _cmd(T.CONNECT, connect=pb.CommandConnect(
            client_version=version, protocol_version=protocol, auth_method_name=c[0], auth_data=c[1],
            feature_flags=pb.FeatureFlags(supports_auth_refresh=refresh))),
        creds, st.sampled_from(["raw-fuzz", CPP_VERSION, "", "Pulsar-CPP"]), st.integers(-5, 30), st.booleans())
    auth_response = st.builds(lambda c: _cmd(T.AUTH_RESPONSE, authResponse=pb.CommandAuthResponse(
        response=pb.AuthData(auth_method_name=c[0], auth_data=c[1]))), creds)
    request_id = st.integers(0, 2**64 - 1)
    commands = st.one_of(
        st.builds(lambda r: _cmd(T.PRODUCER, producer=pb.CommandProducer(topic=TOPIC, producer_id=1, request_id=r)),
                  request_id),
        st.builds(lambda r: _cmd(T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=TOPIC, subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=r)),
            request_id),
        st.builds(lambda r: _cmd(T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=TOPIC, request_id=r)), request_id),
        st.builds(lambda r: _cmd(T.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(
            topic=TOPIC, request_id=r)), request_id),
        st.just(_cmd(T.PING, ping=pb.CommandPing())),
        st.just(_cmd(T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=1))),
    )
    garbage = st.binary(min_size=1, max_size=64).map(lambda body: struct.pack(">II", len(body) + 4, len(body)) + body)
    anything = st.one_of(connect, auth_response, commands, garbage)
    first = _mostly(connect, anything, 75)
    rest = st.lists(_mostly(commands, anything, 60), max_size=3)
    return st.tuples(first, rest).map(lambda fr: [fr[0], *fr[1]])


def _cmd(kind: int, **body: object) -> bytes:
    cmd = pb.BaseCommand(type=kind)   # type: ignore[arg-type]
    for field, value in body.items():
        getattr(cmd, field).CopyFrom(value)
    return encode_command(cmd) if cmd.IsInitialized() else _raw_frame(cmd)


def _raw_frame(cmd: pb.BaseCommand) -> bytes:
    """A frame of a command missing required fields (the codec refuses to encode those)."""
    body = cmd.SerializePartialToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


# --- one exchange -------------------------------------------------------------------------------------

def exchange(port: int, data: list[bytes]) -> list[pb.BaseCommand]:
    """Send `data` (after a CONNECT, waiting for its answer as clients do, so what follows meets the
    refused connection rather than one still authenticating), then collect the broker's frames
    until it closes or READ_WINDOW_S passes."""
    replies: list[pb.BaseCommand] = []
    decoder = FrameDecoder(FRAME_BYTES_MAX)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for chunk in data:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break                             # closed by the broker mid-sequence: read what it said
            if _is_connect(chunk) and not _read(sock, decoder, replies, until_frames=len(replies) + 1):
                return replies
        _read(sock, decoder, replies, until_frames=None)
    return replies


def _read(sock: socket.socket, decoder: FrameDecoder, into: list[pb.BaseCommand], until_frames: int | None) -> bool:
    """Read frames into `into` until it holds `until_frames` (None: any number) or READ_WINDOW_S
    passes; False once the broker closed the connection."""
    deadline = time.monotonic() + READ_WINDOW_S
    while (until_frames is None or len(into) < until_frames) and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            received = sock.recv(65536)
        except TimeoutError:
            return True
        except ConnectionResetError:
            return False
        if not received:
            return False
        into.extend(frame.command for frame in decoder.feed(received))
    return True


def _is_connect(chunk: bytes) -> bool:
    first = _first_command([chunk])
    return first is not None and first.type == T.CONNECT


def is_refusal(reply: pb.BaseCommand) -> bool:
    if reply.type == T.ERROR:
        return reply.error.error in (AUTH_ERROR, PulsarServerError.ServiceNotReady)   # busy: ServiceNotReady
    if reply.type == T.LOOKUP_RESPONSE:
        r = reply.lookupTopicResponse
        return r.response == pb.CommandLookupTopicResponse.Failed and r.error == AUTH_ERROR
    if reply.type == T.PARTITIONED_METADATA_RESPONSE:
        r = reply.partitionMetadataResponse
        return r.response == pb.CommandPartitionedTopicMetadataResponse.Failed and r.error == AUTH_ERROR
    return False


def check_no_bypass(data: list[bytes], replies: list[pb.BaseCommand]) -> None:
    first = _first_command(data)
    cpp_connect = (first is not None and first.type == T.CONNECT
                   and first.connect.client_version.startswith("Pulsar-CPP"))
    for reply in replies:
        if reply.type == T.CONNECTED:
            assert cpp_connect, f"CONNECTED without valid credentials (seed {FUZZ_SEED}): {replies}"
            continue
        assert is_refusal(reply), f"not a refusal (seed {FUZZ_SEED}): {pb.BaseCommand.Type.Name(reply.type)} {reply}"


def _first_command(data: list[bytes]) -> pb.BaseCommand | None:
    """The command of the first frame sent (each element of `data` is one whole frame)."""
    try:
        decoded = FrameDecoder(FRAME_BYTES_MAX).feed(data[0])
    except StrataError:
        return None
    return decoded[0].command if decoded else None


# --- the tests ----------------------------------------------------------------------------------------

def test_random_connect_and_auth_frames_never_authenticate(broker: tuple[StandaloneProcess, SecurityKit]) -> None:
    sa, kit = broker

    @hypothesis_seed(FUZZ_SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(frames(kit))
    def run(data: list[bytes]) -> None:
        replies = exchange(sa.port, data)
        check_no_bypass(data, replies)
        for reply in replies:
            seen[pb.BaseCommand.Type.Name(reply.type)] = seen.get(pb.BaseCommand.Type.Name(reply.type), 0) + 1

    seen: dict[str, int] = {}
    started = time.monotonic()
    run()
    print(f"fuzzed {EXAMPLES} sequences in {time.monotonic() - started:.1f} s (seed {FUZZ_SEED}); replies {seen}")
    assert seen.get("ERROR") and seen.get("CONNECTED"), f"the refusals were never reached: {seen}"
    assert sa.proc is not None and sa.proc.poll() is None, "the standalone died"


def test_after_the_fuzz_valid_credentials_still_work(broker: tuple[StandaloneProcess, SecurityKit]) -> None:
    sa, kit = broker
    token = kit.token(SUPERUSER).encode()
    connect = _cmd(T.CONNECT, connect=pb.CommandConnect(client_version="raw-fuzz", protocol_version=20,
                                                          auth_method_name="token", auth_data=token))
    producer = _cmd(T.PRODUCER, producer=pb.CommandProducer(topic=TOPIC, producer_id=1, request_id=7))
    replies = _session(sa.port, [connect, producer])
    assert [r.type for r in replies] == [T.CONNECTED, T.PRODUCER_SUCCESS]
    with pytest.raises(AssertionError, match="CONNECTED without valid credentials"):
        check_no_bypass([connect, producer], replies)        # the fuzz's oracle does see a real session
    client = make_client(sa.service_url, authentication=pulsar.AuthenticationToken(token.decode()),
                         operation_timeout_seconds=10)
    try:
        client.create_producer(TOPIC).send(b"still serving")
    finally:
        client.close()


def _session(port: int, data: list[bytes], within_s: float = 10.0) -> list[pb.BaseCommand]:
    """Send each frame once the broker answered the previous one (as clients do); the answers."""
    replies: list[pb.BaseCommand] = []
    decoder = FrameDecoder(FRAME_BYTES_MAX)
    with socket.create_connection(("127.0.0.1", port), timeout=within_s) as sock:
        for chunk in data:
            sock.sendall(chunk)
            answered = len(replies)
            while len(replies) == answered:
                received = sock.recv(65536)
                if not received:
                    return replies
                replies.extend(frame.command for frame in decoder.feed(received))
    return replies
