"""The bookie client's bookkeeping apart from the socket (bookie/data_link.py owns that).

How queued adds become one `AddRequest` (coalesced, split per writer token and at
`ledger_bookie_request_payload_bytes_max`), how an `AddResponse` resolves the futures of its request, how a
stream of `ReadResponse`s is checked and collected, and how everything on a broken connection
is failed.

An add waiting to be sent is a tuple
`(ledger_id, entry_id, payload, lac, writer_token, recovery, future)` in an `unsent` deque.

What must hold: each add future is resolved exactly once (a done future is skipped, never set
again); a read completes only with every entry it asked for, in order. A payload read is not
checksummed again here: the bookie checked it against its stored CRC32C when it read it from
disk (bookie/record.py), TCP guards the hop, and the entry carries its own Pulsar CRC32C, which
the consumer checks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from crc32c import crc32c

from common.completion import Completion
from common.errors import BookieUnavailable, NoSuchEntry, StrataError, error_from_code
from common.invariant import invariant
from common.varint import encode_varint
from proto import bookie_pb2 as pb

_ENTRIES_TAG = b"\x1a"  # AddRequest.entries: field 3, length-delimited
_PAYLOAD_TAG = b"\x22"  # AddEntry.payload: field 4, length-delimited
# Payloads at least this big are spliced into a request instead of copied through protobuf
# (below it protobuf's per-entry cost is lower than splicing's).
_SPLICE_PAYLOAD_BYTES_MIN = 16 * 1024


@dataclass
class Inflight:
    """One AddRequest sent and not yet answered."""

    futures: list[asyncio.Future | Completion]   # a Completion for the write handle's adds
    deadline_s: float  # monotonic seconds after which its adds fail with TimeoutExpired


@dataclass
class PendingRead:
    """One read sent and not yet completed."""

    ledger_id: int
    expected: int                 # the next entry id its responses must carry
    last: int                     # the last entry id asked for
    out: list                     # (entry_id, payload) read so far
    future: asyncio.Future        # None once every entry arrived; a StrataError otherwise




def encode_add_request(request_id: int, writer_token: bytes, adds) -> bytes:
    """The protobuf bytes of an `AddRequest` of `adds` ((ledger_id, entry_id, payload, lac,
    recovery) each). A protobuf message may be concatenated from pieces (a repeated field's
    elements append in order), so runs of small entries are encoded by protobuf in one go, and
    each large entry is encoded without its payload, the payload field spliced in by hand:
    everything is joined once, so a large payload is copied once."""
    parts = [pb.AddRequest(request_id=request_id, writer_token=writer_token).SerializeToString()]
    run = pb.AddRequest()  # small entries not yet encoded: only its `entries` are used
    for ledger_id, entry_id, payload, lac, recovery in adds:
        if len(payload) < _SPLICE_PAYLOAD_BYTES_MIN:
            run.entries.add(ledger_id=ledger_id, entry_id=entry_id, last_add_confirmed=lac,
                            payload=payload, crc32c=crc32c(payload), recovery=recovery)
            continue
        if run.entries:
            parts.append(run.SerializeToString())
            run = pb.AddRequest()
        head = pb.AddEntry(ledger_id=ledger_id, entry_id=entry_id, last_add_confirmed=lac,
                           crc32c=crc32c(payload), recovery=recovery).SerializeToString()
        payload_len = encode_varint(len(payload))
        entry_bytes = len(head) + 1 + len(payload_len) + len(payload)
        parts += (_ENTRIES_TAG, encode_varint(entry_bytes), head, _PAYLOAD_TAG, payload_len, payload)
    if run.entries:
        parts.append(run.SerializeToString())
    return b"".join(parts)


def take_add_request(unsent: deque, inflight: dict[int, Inflight], next_request_id: Callable[[], int],
                     deadline_s: float, payload_bytes_max: int) -> bytes | None:
    """Move the oldest unsent adds (one writer token, up to `payload_bytes_max` payload bytes,
    a single larger entry alone: a burst of adds becomes several moderate messages instead of
    one huge one) into one request, registered in `inflight`; None if every one was cancelled."""
    adds: list[tuple[int, int, bytes, int, bool]] = []   # (ledger, entry, payload, lac, recovery)
    futures: list[asyncio.Future | Completion] = []
    token = b""
    request_bytes = 0
    while unsent:
        ledger_id, entry_id, payload, lac, writer_token, recovery, fut = unsent[0]
        if futures and (writer_token != token
                        or request_bytes + len(payload) > payload_bytes_max):
            break
        unsent.popleft()
        if fut.done():  # cancelled by its caller before it was sent
            continue
        token = writer_token
        adds.append((ledger_id, entry_id, payload, lac, recovery))
        futures.append(fut)
        request_bytes += len(payload)
    if not futures:
        return None
    request_id = next_request_id()
    inflight[request_id] = Inflight(futures, deadline_s)
    return encode_add_request(request_id, token, adds)


def resolve_add_response(inflight: dict[int, Inflight], response: pb.AddResponse,
                         address: str) -> None:
    """Resolve the futures of the request `response` answers. Raises BookieUnavailable for a
    response to no request in flight (the stream is then out of step and must be failed)."""
    sent = inflight.pop(response.request_id, None)
    if sent is None:
        raise BookieUnavailable("bookie answered an unknown request", address=address,
                                request_id=response.request_id)
    results = response.results
    invariant(len(results) == len(sent.futures), "one result per add",
              results=len(results), adds=len(sent.futures))
    for result, fut in zip(results, sent.futures):
        if fut.done():
            continue
        code = result.error_code
        if code == 0:
            fut.set_result(None)
        else:
            fut.set_exception(error_from_code(code, result.error_message))


def fail_adds(inflight: dict[int, Inflight], unsent: deque, exc: StrataError,
              timeout_error: StrataError | None = None, now_s: float = 0.0) -> None:
    """Fail every add in flight or unsent with `exc`; with `timeout_error`, the requests past
    their deadline at `now_s` fail with it instead."""
    for sent in inflight.values():
        error = exc
        if timeout_error is not None and now_s >= sent.deadline_s:
            error = timeout_error
        for fut in sent.futures:
            if not fut.done():
                fut.set_exception(error)
    inflight.clear()
    while unsent:
        fut = unsent.popleft()[-1]
        if not fut.done():
            fut.set_exception(exc)


def take_read_response(pending: PendingRead, response: pb.ReadResponse, address: str) -> None:
    """Check and collect one response's entries; complete the read on its last response.
    Raises the read's error (typed) if the response carries one or does not add up."""
    if response.error_code:
        raise error_from_code(response.error_code, response.error_message)
    ledger_id, out, expected = pending.ledger_id, pending.out, pending.expected
    for entry in response.entries:
        payload = entry.payload
        if entry.entry_id != expected:
            raise NoSuchEntry("bookie skipped an entry", ledger_id=ledger_id,
                              expected=expected, got=entry.entry_id)
        out.append((expected, payload))
        expected += 1
    pending.expected = expected
    if response.last:
        if expected != pending.last + 1:
            raise NoSuchEntry("bookie returned fewer entries than asked",
                              ledger_id=ledger_id, missing_entry_id=expected)
        pending.future.set_result(None)


def fail_reads(pending: dict[int, PendingRead], exc: StrataError) -> None:
    for read in pending.values():
        if not read.future.done():
            read.future.set_exception(exc)
    pending.clear()
