"""Answering adds and reads against `Storage` for the framed TCP data path (bookie/data_server.py).

The checks (fencing, writer token, CRC, LAC) are `Storage`'s; this builds the `AddResponse` /
`ReadResponse` messages that travel as frame bodies.

What must hold: an add response has one result per entry, in entry order, and says success only
once `adds.durable` resolved without error; the responses to one read are entries in order in
chunks of at most `bookie_read_response_bytes_max` payload bytes (one larger entry goes alone), or one
error response, and a stream read's last response has `last` set.
"""

from __future__ import annotations

from bookie.storage import PendingAdds, Storage
from common.errors import BookieError, StrataError
from common.invariant import present
from proto import bookie_pb2 as pb


def add_response(request_id: int, entries, adds: PendingAdds) -> pb.AddResponse:
    """The response to a request whose adds are durable or failed (`adds.durable` is done)."""
    error = adds.durable.exception()
    failure: StrataError | None = None
    if error is not None:   # the journal's typed error (ReadOnly, DiskFull, ShuttingDown), else a bug's
        failure = error if isinstance(error, StrataError) else BookieError(f"add failed: {error!r}")
    response = pb.AddResponse(request_id=request_id)
    results = response.results
    codes, messages = adds.codes, adds.messages
    for i, entry in enumerate(entries):
        code = codes[i]
        if code:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id, error_code=code,
                        error_message=messages.get(i, ""))
        elif failure is not None:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id,
                        error_code=failure.code, error_message=failure.message)
        else:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id)
    return response


def _lac(storage: Storage, ledger_id: int) -> int:
    state = storage.index.ledgers.get(ledger_id)
    return -1 if state is None else state.lac


async def read_responses(storage: Storage, request: pb.ReadRequest):
    """The responses to one ReadRequest: entries in chunks, or one error response."""
    try:
        entries, error = await storage.read(request.ledger_id, request.first_entry,
                                            request.last_entry, request.allow_past_lac)
    except StrataError as exc:
        yield pb.ReadResponse(error_code=exc.code, error_message=exc.message,
                              last_add_confirmed=_lac(storage, request.ledger_id))
        return
    lac = _lac(storage, request.ledger_id)
    response = pb.ReadResponse(last_add_confirmed=lac)
    response_bytes = 0
    response_bytes_max = storage.config.bookie_read_response_bytes_max  # one larger entry goes alone
    for entry_id, payload, crc in entries:
        if response_bytes and response_bytes + len(payload) > response_bytes_max:
            yield response
            response, response_bytes = pb.ReadResponse(last_add_confirmed=lac), 0
        response.entries.add(entry_id=entry_id, payload=payload, crc32c=crc)
        response_bytes += len(payload)
    if error is not None:
        response.error_code, response.error_message = error.code, error.message
    yield response


async def stream_read_responses(storage: Storage, request: pb.ReadRequest):
    """`read_responses` for a stream of reads: each echoes `request_id`, the last has `last`."""
    previous = None
    async for response in read_responses(storage, request):
        if previous is not None:
            yield previous
        response.request_id = request.request_id
        previous = response
    last = present(previous, "read_responses always yields at least one response")
    last.last = True
    yield last
