"""offload.rows: a plain batch (members of one size, sequence ids in a row) is split without a
Python step per member, and gives exactly what the member-by-member walk gives; anything that
is not plain falls back to the walk."""

from __future__ import annotations

import random

import pytest

from common.errors import MalformedPayload
from entries import batch as eb
from offload import rows

SLOTS = rows.Members.__slots__


def plain_batch(count: int, size: int, sequence_id: int, rnd: random.Random) -> bytes:
    messages = [eb.BatchMessage(payload=rnd.randbytes(size)) for _ in range(count)]
    return eb.serialize_batch([eb.BatchMessage(m.payload, sequence_id=sequence_id + i) for i, m in enumerate(messages)])


def walked(raw: bytes, count: int, first_sequence_id: int, monkeypatch: pytest.MonkeyPatch) -> rows.Members:
    with monkeypatch.context() as patched:
        patched.setattr(rows, "split_plain_batch", lambda raw, count: None)
        return rows.split_batch(raw, count, first_sequence_id)


def assert_same(a: rows.Members, b: rows.Members) -> None:
    for name in SLOTS:
        assert getattr(a, name) == getattr(b, name), name


@pytest.mark.parametrize(("count", "size", "sequence_id"), [
    (1, 0, 0), (128, 1024, 0), (200, 1, 120), (50, 127, 16_380), (300, 128, 2_097_100),
    (3, 5, 2**62), (2, 3, 2**63 - 2)])
def test_plain_batches_split_as_the_walk_does(count: int, size: int, sequence_id: int, seed: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    raw = plain_batch(count, size, sequence_id, random.Random(seed))
    fast = rows.split_plain_batch(raw, count)
    assert fast is not None
    assert_same(fast, walked(raw, count, sequence_id, monkeypatch))
    members = [b"".join((len(m).to_bytes(4, "big"), m, p or b"")) for m, p in zip(fast.metadata, fast.payload)]
    assert b"".join(members) == raw


def test_sequence_ids_past_the_signed_range_take_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = plain_batch(4, 8, 2**63 - 2, random.Random(1))
    assert rows.split_plain_batch(raw, 4) is None
    assert rows.split_batch(raw, 4, 2**63 - 2).sequence_id[-1] == 2**63 + 1 - 2**64


def test_batches_that_are_not_plain_fall_back_to_the_walk(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    varied = [
        [eb.BatchMessage(b"x" * 10, sequence_id=i) for i in range(5)] + [eb.BatchMessage(b"y" * 11, sequence_id=5)],
        [eb.BatchMessage(b"x" * 10, sequence_id=i) for i in (0, 1, 3)],                 # a gap in the ids
        [eb.BatchMessage(b"x" * 10, sequence_id=0), eb.BatchMessage(b"x" * 10, partition_key="k", sequence_id=1)],
        [eb.BatchMessage(b"x" * 10, sequence_id=0), eb.BatchMessage(b"", null_value=True, sequence_id=1)],
        [eb.BatchMessage(b"x" * 10, sequence_id=7, event_time_ms=5)],
        [eb.BatchMessage(rnd.randbytes(20)) for _ in range(3)],                          # no sequence ids
    ]
    for messages in varied:
        raw = eb.serialize_batch(messages)
        assert rows.split_plain_batch(raw, len(messages)) is None
        assert_same(rows.split_batch(raw, len(messages), 0), walked(raw, len(messages), 0, monkeypatch))


@pytest.mark.parametrize("damage", ["trailing", "truncated", "count_low", "count_high", "size_prefix"])
def test_a_damaged_plain_batch_is_refused_as_the_walk_refuses_it(damage: str, seed: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    raw = plain_batch(20, 30, 100, random.Random(seed))
    count = 20
    if damage == "trailing":
        raw += b"\0"
    elif damage == "truncated":
        raw = raw[:-1]
    elif damage == "count_low":
        count = 19
    elif damage == "count_high":
        count = 21
    else:  # the 5th member's size prefix one too large
        at = 4 * (4 + int.from_bytes(raw[:4], "big") + 30)
        raw = raw[:at] + (int.from_bytes(raw[at:at + 4], "big") + 1).to_bytes(4, "big") + raw[at + 4:]
    assert rows.split_plain_batch(raw, count) is None
    with pytest.raises(MalformedPayload):
        walked(raw, count, 100, monkeypatch)
    with pytest.raises(MalformedPayload):
        rows.split_batch(raw, count, 100)
