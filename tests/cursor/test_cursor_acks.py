"""ManagedCursor acks and moves, case by case (docs/protocol.md §7, §8.4, §8.5, §8.8)."""

from __future__ import annotations

import pytest

from common.errors import InvalidArgument, InvariantViolation
from cursor.managed_cursor import ManagedCursor
from ledger.position import EARLIEST, LATEST, Position
from tests.support.ledger_view import MemoryLedgerView

P = Position


def make(ledgers=((5, 1), (5, 1), (0, 1)), start=EARLIEST) -> tuple[MemoryLedgerView, ManagedCursor]:
    """Ledgers of (entries, messages per entry); publish time = global entry index."""
    spec, t = [], 0
    for entries, messages in ledgers:
        spec.append([(10 * messages, messages, (t := t + 1)) for _ in range(entries)])
    view = MemoryLedgerView(spec)
    return view, ManagedCursor.starting_at("s", view, start, durable=False)


def test_new_cursor_positions():
    view, c = make()
    assert (c.mark_delete_position, c.read_position) == (P(1, -1), P(1, 0))
    latest = ManagedCursor.starting_at("l", view, LATEST, durable=False)
    assert latest.mark_delete_position == P(3, -1) and latest.read_position == P(3, 0)
    assert latest.stats.backlog_entries == 0
    mid = ManagedCursor.starting_at("m", view, P(2, 2), durable=False)
    assert mid.mark_delete_position == P(2, 1) and mid.stats.backlog_entries == 3


def test_mark_delete_runs_over_contiguous_acks_across_ledgers():
    _, c = make()
    c.ack([P(1, 1), P(1, 2), P(1, 3), P(1, 4), P(2, 0), P(2, 2)])
    assert c.mark_delete_position == P(1, -1)
    c.ack([P(1, 0)])
    assert c.mark_delete_position == P(2, 0)
    assert c.is_acked(P(2, 2)) and not c.is_acked(P(2, 1))
    assert c.individually_acked_count() == 1
    assert c.next_unacked_from(P(1, 0)) == P(2, 1)


def test_acks_out_of_range_are_ignored_silently():
    _, c = make()
    c.ack_cumulative(P(1, 2))
    c.ack([P(1, 1), P(1, 7), P(9, 0), P(0, 0), P(3, 0), P(1, -1)])
    assert c.individually_acked_count() == 0 and c.mark_delete_position == P(1, 2)
    c.ack_cumulative(P(9, 9))
    c.ack_cumulative(P(1, 0))
    assert c.mark_delete_position == P(1, 2)


def test_cumulative_ack_swallows_individual_acks_and_advances_past_them():
    _, c = make()
    c.ack([P(1, 3), P(2, 0), P(2, 1)])
    c.ack_cumulative(P(1, 2))
    assert c.mark_delete_position == P(1, 3)
    c.ack_cumulative(P(1, 4))
    assert c.mark_delete_position == P(2, 1) and c.individually_acked_count() == 0


def test_batch_index_acks_merge_by_and_like_the_client_sends_them():
    _, c = make(((3, 3), (1, 1)))
    assert c.ack_batch_indexes(P(1, 0), [0b110], 3) is False  # member 0 acked (observed trace)
    assert c.batch_ack_set(P(1, 0)) == [0b110]
    assert c.ack_batch_indexes(P(1, 0), [0b011], 3) is False  # member 2: remaining = 0b010
    assert c.batch_ack_set(P(1, 0)) == [0b010]
    assert c.stats.backlog_messages == 3 * 3 + 1 - 2 and c.stats.backlog_entries == 4
    assert c.ack_batch_indexes(P(1, 0), [0b101], 3) is True
    assert c.mark_delete_position == P(1, 0) and c.batch_ack_set(P(1, 0)) is None
    assert c.ack_batch_indexes(P(1, 0), [0], 3) is False  # already acked


def test_batch_words_beyond_64_members_and_signed_words():
    _, c = make(((1, 130), (1, 1)))
    words = [-1, -1, 0b11]  # all 130 members unacked, as signed int64 on the wire
    words[0] &= ~1  # member 0 acked
    assert c.ack_batch_indexes(P(1, 0), words, 130) is False
    assert c.batch_ack_set(P(1, 0)) == [-2, -1, 0b11]
    assert c.stats.backlog_messages == 130 + 1 - 1
    with pytest.raises(InvalidArgument):
        c.ack_batch_indexes(P(1, 0), [1], 0)


def test_individual_ack_of_a_partial_batch_drops_its_batch_record():
    _, c = make(((2, 4),))
    c.ack_batch_indexes(P(1, 1), [0b1110], 4)
    c.ack([P(1, 1)])
    assert c.batch_ack_set(P(1, 1)) is None and c.is_acked(P(1, 1))


def test_seek_resets_and_may_move_mark_delete_back():
    view, c = make()
    c.ack_cumulative(P(2, 3))
    c.ack([P(1, 0)])
    c.seek(P(1, 3))
    assert (c.mark_delete_position, c.read_position) == (P(1, 2), P(1, 3))
    assert not c.is_acked(P(2, 0)) and c.stats.backlog_entries == 7
    c.seek(EARLIEST)
    assert c.mark_delete_position == P(1, -1)
    c.seek(LATEST)
    assert c.read_position == view.next_position(view.last_confirmed) and c.stats.backlog_entries == 0
    c.reset_to_publish_time(4)  # publish time 4 is entry (1, 3)
    assert c.read_position == P(1, 3)


def test_skip_clear_and_rewind():
    _, c = make()
    c.ack([P(1, 1), P(1, 3)])
    assert c.skip(3) == 3  # skips (1,0), (1,2), (1,4)
    assert c.mark_delete_position == P(1, 4)
    assert c.skip(100) == 5 and c.stats.backlog_entries == 0
    _, c = make()
    c.ack([P(1, 1), P(2, 0)])
    c.read_position = P(2, 3)
    assert c.stats.unacked_entries == 8 - 2 + 0 - 0  # (1,0..4) and (2,0..2) minus 2 acked
    c.rewind()
    assert c.read_position == P(1, 0)
    c.clear_backlog()
    assert c.mark_delete_position == P(2, 4) and c.stats.backlog_entries == 0


def test_expire_acks_old_messages_holes_included():
    _, c = make()
    c.ack([P(1, 4), P(2, 3)])
    assert c.expire(1, 1000 + 7) is True  # entries published before 7: (1,0)..(2,0)
    assert c.mark_delete_position == P(2, 0)
    assert c.is_acked(P(2, 3)) and not c.is_acked(P(2, 1))
    assert c.expire(0, 10**9) is False and c.mark_delete_position == P(2, 0)


def test_redelivery_counts_follow_acks():
    _, c = make()
    c.increment_redelivery([P(1, 2), P(1, 2), P(2, 0)])
    assert c.redelivery_count(P(1, 2)) == 2 and c.redelivery_count(P(1, 3)) == 0
    c.ack([P(2, 0)])
    assert c.redelivery_count(P(2, 0)) == 0
    c.ack_cumulative(P(1, 2))
    assert c.redelivery_count(P(1, 2)) == 0
    c.increment_redelivery([P(1, 0)])  # already acked: not counted
    assert c.redelivery_count(P(1, 0)) == 0


def test_properties_are_copied_strings():
    _, c = make()
    c.set_properties({"a": 1})
    assert dict(c.properties) == {"a": "1"}
    with pytest.raises(TypeError):
        c.properties["b"] = "2"  # type: ignore[index]


def test_cursor_survives_trimmed_ledgers_and_new_entries():
    view, c = make()
    c.ack_cumulative(P(1, 4))
    view.trim(P(2, 0))
    c.ack([P(2, 0)])
    assert c.mark_delete_position == P(2, 0)
    view.append(10, 1, 99)
    c.ack_cumulative(P(3, 0))
    assert c.mark_delete_position == P(3, 0) and c.stats.backlog_entries == 0


def test_mark_delete_never_moves_back_without_seek():
    _, c = make()
    c.ack_cumulative(P(1, 3))
    with pytest.raises(InvariantViolation):
        c._move_mark_delete(P(1, 1))


def test_durable_cursor_needs_a_store():
    view, _ = make()
    with pytest.raises(InvalidArgument):
        ManagedCursor("d", view, mark_delete_position=P(1, -1))
