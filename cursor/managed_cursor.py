"""The managed cursor: one per subscription, where a subscription's acks live.

How it works. `mark_delete_position` (md) says everything at or before it is acked. Acks after
it are kept in an `AckState`: a roaring bitmap of fully acked entry ids per ledger, plus the
remaining-unacked words of partially acked batches. Whenever the entry right after md becomes
acked, md runs forward over the whole contiguous acked run (crossing ledgers with
`LedgerView.next_position`), and everything it passes is dropped from the bitmaps, so memory and
persisted size follow the number of ack holes, not the backlog span. `read_position` is the next
entry to dispatch; it never lags behind md.

What must hold (checked with `invariant()` after every change):
- md never moves back, except through an explicit `seek` / `reset_to_publish_time`;
- every individually acked entry and every partial batch lies in (md, last_confirmed];
- read_position > md.

Acks below md, beyond the last confirmed entry, or past the end of a closed ledger are ignored
silently (docs/protocol.md §8.4). A durable cursor persists through a `CursorStore`: changes mark it
dirty and a write is scheduled at most once per `cursor_persist_interval_ms` (coalesced: many acks,
one write; see `cursor.cursor_persistence`); `flush()` writes now and `close()` flushes a last
time. Non-durable cursors (readers) never persist and have no size limit.

State limit (`cursor.state_limit`): there is no silent memory-only fallback. A persist that finds
the encoded state over `cursor_state_bytes_max` fails with `CursorStateTooLarge` (counted in
`cursor.metrics.CURSOR_STATE_TOO_LARGE_TOTAL`, shown in the subscription's stats as
`state_error`), and from then on, or as soon as the estimate between persists says so, a durable
cursor refuses every ack that would add an ack hole (`CursorStateTooLarge`, counted in
`CURSOR_ACKS_REFUSED_TOTAL`; the other acks of the same call are taken). Acks that close or extend
runs, cumulative acks and moves are always taken, so the consumer can get back under the limit.

Fencing: a durable cursor writes with the writer token it was opened with (`CursorStore`). When a
save finds another owner's token, the cursor turns FENCED: it never persists again and refuses
every change with `CursorFenced` (counted in `CURSOR_FENCED_TOTAL`).

Persistence is a part the cursor owns (`self.persistence`, a `CursorPersistence`), given
`snapshot()` to read the state; the store restores a cursor through the constructor's `snapshot`
argument and writes it through `flush(force=True)` / `close(flush=False)`, never through fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from common.clock import SYSTEM_CLOCK, Clock
from common.errors import CursorStateTooLarge, InvalidArgument, StrataError
from common.invariant import invariant, present
from cursor.ack_state import ENTRY_ID_END, AckState, BatchAck, full_words, run_end, to_signed, to_unsigned
from cursor.codec import CursorSnapshot
from cursor.cursor_persistence import CursorPersistence, CursorState
from cursor.state_limit import HOLE_BYTES, StateLimit, admit, batch_record_bytes, run_delta
from ledger.position import EARLIEST, LATEST, Position
from ledger.types import LedgerView

if TYPE_CHECKING:
    from cursor.cursor_store import CursorStore
    from cursor.stats import SubscriptionStats

__all__ = ["BATCH_SIZE_MAX", "CursorState", "ManagedCursor", "before"]

BATCH_SIZE_MAX = 1 << 20  # members in one batch entry; Pulsar's clients send at most a few 1000


def before(position: Position) -> Position:
    """The mark-delete that leaves `position` as the first unacked entry."""
    return Position(position[0], position[1] - 1)


class ManagedCursor:
    def __init__(self, name: str, view: LedgerView, *, mark_delete_position: Position,
                 durable: bool = True, store: CursorStore | None = None,
                 clock: Clock = SYSTEM_CLOCK, persist_interval_ms: int | None = None,
                 state_bytes_max: int | None = None, snapshot: CursorSnapshot | None = None,
                 writer_token: str | None = None, state_bytes: int = 0) -> None:
        if durable and store is None:
            raise InvalidArgument("a durable cursor needs a CursorStore", cursor=name)
        self.name = name
        self.view = view
        self.durable = durable
        self.clock = clock
        self.mark_delete_position = Position(*mark_delete_position)
        self.read_position = view.next_position(self.mark_delete_position)
        self._acks = AckState()
        self._redelivery: dict[Position, int] = {}  # entry -> times redelivered; only entries > md
        self._properties: dict[str, str] = {}
        self.persistence = CursorPersistence(name, self.snapshot, durable=durable, clock=clock,
                                             store=store, persist_interval_ms=persist_interval_ms,
                                             state_bytes_max=state_bytes_max,
                                             writer_token=writer_token, state_bytes=state_bytes)
        self._guard = self.state_limit if durable else None  # None: acks are never refused
        self._refused = 0                       # acks refused by the ack call under way
        self._entries_cache: dict[int, int] = {}  # ledger id -> entries, for closed ledgers
        self._entries_cache_lac_ledger: int | None = None
        if snapshot is not None:
            self._acks = snapshot.acks
            self._redelivery = dict(snapshot.redelivery_counts)
            self._properties = dict(snapshot.properties)
            lac = view.last_confirmed
            self._acks.drop_from(view.next_position(lac))  # cannot be: it was written; be safe
            self._acks.drop_through(self.mark_delete_position)
        self._advance()
        self.rewind()
        self._check_invariants()

    # ---- construction helpers -------------------------------------------------------------

    @classmethod
    def starting_at(cls, name: str, view: LedgerView, start: Position, **kwargs: object) -> ManagedCursor:
        """A new cursor whose first entry to read is `start` (EARLIEST, LATEST or a position)."""
        first = _resolve_start(view, start)
        return cls(name, view, mark_delete_position=before(first), **kwargs)  # type: ignore[arg-type]

    def snapshot(self) -> CursorSnapshot:
        """The state to persist (what `CursorStore` restores through the constructor)."""
        return CursorSnapshot(self.mark_delete_position, self._acks, dict(self._redelivery),
                              dict(self._properties), self.persistence.writer_token)

    # ---- persistence (delegated to the part the cursor owns) ----------------------------------

    @property
    def state(self) -> CursorState:
        return self.persistence.state

    @property
    def writer_token(self) -> str | None:
        return self.persistence.writer_token

    @property
    def state_limit(self) -> StateLimit:
        return self.persistence.state_limit

    @property
    def state_bytes_max(self) -> int:
        return self.persistence.state_limit.bytes_max

    @state_bytes_max.setter
    def state_bytes_max(self, value: int) -> None:
        self.persistence.state_limit.bytes_max = value

    @property
    def state_error(self) -> CursorStateTooLarge | None:
        """Why acks that add holes are refused now (state over the limit); None when it fits."""
        return self.persistence.state_error

    @property
    def persist_error(self) -> StrataError | None:
        """The last failed persist; None after a success."""
        return self.persistence.persist_error

    @property
    def persisted_bytes(self) -> int:
        return self.persistence.persisted_bytes

    def encode_state(self) -> bytes:
        return self.persistence.encode_state()

    async def flush(self, *, force: bool = False) -> None:
        """Persist now if changed (always with `force`); see `CursorPersistence.flush`."""
        await self.persistence.flush(force=force)

    async def close(self, *, flush: bool = True) -> None:
        """Flush a last time (unless `flush` is False) and refuse further changes."""
        await self.persistence.close(flush=flush)

    # ---- acks ------------------------------------------------------------------------------

    def ack(self, positions: Iterable[Position]) -> None:
        """Individual acks. Positions may come in any order; duplicates are harmless. Acks that
        would add ack holes to a state at its limit are refused (`CursorStateTooLarge`, raised
        after the others were taken)."""
        self.persistence.check_active()
        self._refused = 0
        lac = self.view.last_confirmed
        if type(positions) in (tuple, list) and len(positions) == 1:  # type: ignore[arg-type]
            ledger_id, entry_id = positions[0]  # type: ignore[index]
            md_ledger, md_entry = self.mark_delete_position
            changed = (md_ledger <= ledger_id <= lac[0]
                       and self._ack_one(ledger_id, entry_id, md_ledger, md_entry, lac))
        else:
            groups: dict[int, list[int]] = {}
            for ledger_id, entry_id in positions:
                group = groups.get(ledger_id)
                if group is None:
                    groups[ledger_id] = [entry_id]
                else:
                    group.append(entry_id)
            changed = self._ack_groups(groups, lac)
        if changed:
            self._advance(lac)
            self.persistence.changed()
            self._check_invariants(lac)
        self._raise_if_refused()

    def _ack_groups(self, groups: Mapping[int, list[int]], lac: Position | None = None,
                    guarded: bool = True) -> bool:
        md_ledger, md_entry = self.mark_delete_position
        lac = self.view.last_confirmed if lac is None else lac
        changed = False
        for ledger_id, entry_ids in groups.items():
            if ledger_id < md_ledger or ledger_id > lac[0]:
                continue
            if len(entry_ids) == 1:  # the common single ack: no temporary bitmap
                changed |= self._ack_one(ledger_id, entry_ids[0], md_ledger, md_entry, lac, guarded)
                continue
            try:
                bitmap = BitMap64(entry_ids)
            except OverflowError:  # a negative entry id: not an entry
                bitmap = BitMap64([e for e in entry_ids if e >= 0])
            if ledger_id == md_ledger and md_entry >= 0:
                bitmap.remove_range(0, md_entry + 1)
            bitmap.remove_range(self._entry_limit(ledger_id, lac), ENTRY_ID_END)
            if guarded and self._guard is not None:
                bitmap = self._admit_group(ledger_id, bitmap)
            if not bitmap:
                continue
            if self._redelivery:
                for entry_id in bitmap:
                    self._redelivery.pop(Position(ledger_id, entry_id), None)
            self._acks.add(ledger_id, bitmap)
            changed = True
        return changed

    def _ack_one(self, ledger_id: int, entry_id: int, md_ledger: int, md_entry: int,
                 lac: Position, guarded: bool = True) -> bool:
        if (ledger_id == md_ledger and entry_id <= md_entry) or entry_id < 0:
            return False
        if entry_id >= self._entry_limit(ledger_id, lac):
            return False
        bitmap = self._acks.acked.get(ledger_id)
        if bitmap is not None and entry_id in bitmap:
            return False
        if guarded and self._guard is not None and not self._admit_one(ledger_id, entry_id, bitmap):
            return False
        if bitmap is None:
            self._acks.acked[ledger_id] = BitMap64((entry_id,))
        else:
            bitmap.add(entry_id)
        if self._acks.batches:
            self._acks.batches.pop(Position(ledger_id, entry_id), None)
        if self._redelivery:
            self._redelivery.pop(Position(ledger_id, entry_id), None)
        return True

    # ---- the state limit (see cursor.state_limit) ------------------------------------------------

    def _front(self, ledger_id: int) -> int | None:
        """The entry id of the first entry after md if it is in `ledger_id`, else None."""
        md_ledger, md_entry = self.mark_delete_position
        if ledger_id == md_ledger:
            return md_entry + 1
        following = self.view.next_position(self.mark_delete_position)
        return following[1] if following[0] == ledger_id else None

    def _admit_one(self, ledger_id: int, entry_id: int, bitmap: BitMap64 | None) -> bool:
        """Whether one new ack may be taken: it does not add a run, or the estimate has room."""
        md_ledger, md_entry = self.mark_delete_position
        left = ((ledger_id == md_ledger and entry_id == md_entry + 1)
                or (bitmap is not None and entry_id > 0 and entry_id - 1 in bitmap)
                or (entry_id == 0 and ledger_id != md_ledger and self._front(ledger_id) == 0))
        if left or (bitmap is not None and entry_id + 1 in bitmap):
            return True  # extends or joins a run: no new hole
        guard = present(self._guard, "only a guarded (durable) cursor admits acks")
        if guard.room_for(HOLE_BYTES) or Position(ledger_id, entry_id) in self._acks.batches:
            guard.grow(HOLE_BYTES)
            return True
        self._refused += 1
        return False

    def _admit_group(self, ledger_id: int, bitmap: BitMap64) -> BitMap64:
        """The part of `bitmap` (acks of one ledger, all after md) that may be taken."""
        existing = self._acks.acked.get(ledger_id)
        if existing:
            bitmap -= existing
        if not bitmap:
            return bitmap
        guard = present(self._guard, "only a guarded (durable) cursor admits acks")
        front = self._front(ledger_id)
        delta = run_delta(existing, bitmap, front)
        if delta <= 0 or guard.room_for(delta * HOLE_BYTES):
            guard.grow(delta * HOLE_BYTES)
            return bitmap
        protected = {p[1] for p in self._acks.batches if p[0] == ledger_id}
        taken, runs, refused = admit(existing, list(bitmap), front, protected, guard.free_runs())
        guard.grow(runs * HOLE_BYTES)
        self._refused += refused
        return BitMap64(taken)

    def _raise_if_refused(self) -> None:
        if self._refused:
            refused, self._refused = self._refused, 0
            raise self.state_limit.refuse(refused)

    def ack_cumulative(self, position: Position) -> None:
        """Everything at or before `position` is acked."""
        self.persistence.check_active()
        position = Position(*position)
        if not self._is_ackable(position, allow_before_first=True):
            return
        self._move_mark_delete(position)
        self._advance()
        self.persistence.changed()
        self._check_invariants()

    def ack_batch_indexes(self, position: Position, ack_set: Sequence[int], batch_size: int) -> bool:
        """Merge a batch-index ack (`ack_set`: Pulsar words, a set bit = member still unacked) by
        AND into what is known of the entry. True if the entry became fully acked by this call."""
        self.persistence.check_active()
        self._refused = 0
        if not 1 <= batch_size <= BATCH_SIZE_MAX:
            raise InvalidArgument("batch_size out of range", batch_size=batch_size, max=BATCH_SIZE_MAX)
        position = Position(*position)
        if not self._is_ackable(position) or self._acks.contains(position):
            return False
        limit = full_words(batch_size)
        given = to_unsigned(ack_set)[:len(limit)]
        given += [0] * (len(limit) - len(given))  # missing words: those members are acked
        known = self._acks.batches.get(position)
        base = known.remaining if known is not None else limit
        remaining = [g & b & m for g, b, m in zip(given, base, limit)]
        if not any(remaining):
            taken = self._ack_groups({position[0]: [position[1]]})
            if taken:
                self._advance()
                self.persistence.changed()
                self._check_invariants()
            self._raise_if_refused()
            return taken
        if known is None and self._guard is not None and position[1] != self._front(position[0]):
            if not self._guard.room_for(batch_record_bytes(len(remaining))):
                raise self.state_limit.refuse(1)
            self._guard.grow(batch_record_bytes(len(remaining)))
        if known is None or remaining != known.remaining:
            self._acks.batches[position] = BatchAck(batch_size, remaining)
            self.persistence.changed()
        self._check_invariants()
        return False

    def is_acked(self, position: Position) -> bool:
        return Position(*position) <= self.mark_delete_position or self._acks.contains(position)

    def batch_ack_set(self, position: Position) -> list[int] | None:
        """The remaining-unacked words (signed int64, for MESSAGE.ack_set) of a partially acked
        batch; None when no member of the entry has been acked on its own."""
        known = self._acks.batches.get(Position(*position))
        return None if known is None else to_signed(known.remaining)

    # ---- moves -------------------------------------------------------------------------------

    def seek(self, position: Position) -> None:
        """Reset: `position` (EARLIEST / LATEST allowed) becomes the next entry to read, every
        entry before it counts as acked, acks at or after it are forgotten. May move md back."""
        self.persistence.check_active()
        target = _resolve_start(self.view, Position(*position))
        self._acks = AckState()
        self._move_mark_delete(before(target), allow_back=True)
        self.read_position = target
        self.persistence.changed()
        self._check_invariants()

    def reset_to_publish_time(self, publish_time_ms: int) -> None:
        """Seek to the first entry published at or after `publish_time_ms`."""
        self.seek(self.view.position_for_publish_time(publish_time_ms))

    def skip(self, entries: int) -> int:
        """Ack the next `entries` unacked entries after md; returns how many were skipped."""
        self.persistence.check_active()
        if entries < 0:
            raise InvalidArgument("cannot skip a negative number of entries", entries=entries)
        lac = self.view.last_confirmed
        left = entries
        position = self.next_unacked_from(self.view.next_position(self.mark_delete_position))
        while left > 0 and position <= lac:
            ledger_id, first = position
            end = self._entry_limit(ledger_id, lac)
            if end <= first:
                break
            chosen = BitMap64()
            chosen.add_range(first, end)
            acked = self._acks.acked.get(ledger_id)
            if acked is not None:
                chosen -= acked
            if len(chosen) > left:
                chosen.remove_range(chosen[left], ENTRY_ID_END)
            left -= len(chosen)
            self._ack_groups({ledger_id: list(chosen)}, guarded=False)  # a move: never refused
            position = self.view.next_position(Position(ledger_id, end - 1))
        self._advance()
        self.persistence.changed()
        self._check_invariants()
        return entries - left

    def nth_unacked(self, n: int) -> Position | None:
        """The `n`-th (1-based) entry after md that is not acked (what a peek shows), or None
        when fewer than `n` unacked entries exist. Costs one bitmap per ledger crossed."""
        if n < 1:
            raise InvalidArgument("the first unacked entry is number 1", n=n)
        lac = self.view.last_confirmed
        left = n
        position = self.next_unacked_from(self.view.next_position(self.mark_delete_position))
        while position <= lac:
            ledger_id, first = position
            end = self._entry_limit(ledger_id, lac)
            if end <= first:
                break
            unacked = BitMap64()
            unacked.add_range(first, end)
            acked = self._acks.acked.get(ledger_id)
            if acked is not None:
                unacked -= acked
            if len(unacked) >= left:
                return Position(ledger_id, unacked[left - 1])
            left -= len(unacked)
            position = self.view.next_position(Position(ledger_id, end - 1))
        return None

    def clear_backlog(self) -> None:
        """Ack everything written so far."""
        self.persistence.check_active()
        lac = self.view.last_confirmed
        if lac > self.mark_delete_position:
            self._move_mark_delete(lac)
        self.persistence.changed()
        self._check_invariants()

    def expire(self, ttl_seconds: int, now_ms: int | None = None) -> bool:
        """TTL: ack every entry published before now - TTL, holes included. Deletes nothing.
        `ttl_seconds <= 0` means no TTL. True if md moved."""
        self.persistence.check_active()
        if ttl_seconds <= 0:
            return False
        now_ms = self.clock.wall_ms() if now_ms is None else now_ms
        return self.expire_before(now_ms - ttl_seconds * 1000)

    def expire_before(self, publish_time_ms: int) -> bool:
        """Ack every entry published before `publish_time_ms`, holes included (the admin
        API's expireMessages). Deletes nothing. True if md moved."""
        self.persistence.check_active()
        first_kept = self.view.position_for_publish_time(publish_time_ms)
        target = before(first_kept)
        if target <= self.mark_delete_position:
            return False
        self._move_mark_delete(target)
        self._advance()
        self.persistence.changed()
        self._check_invariants()
        return True

    def rewind(self) -> None:
        """Dispatch again from the first unacked entry after md (skipping acked ones)."""
        self.read_position = self.next_unacked_from(self.view.next_position(self.mark_delete_position))

    def next_unacked_from(self, position: Position) -> Position:
        """The first position at or after `position` that is not acked (possibly one past the
        last confirmed entry)."""
        position = Position(*position)
        if position <= self.mark_delete_position:
            position = self.view.next_position(self.mark_delete_position)
        lac = self.view.last_confirmed
        while position <= lac:
            bitmap = self._acks.acked.get(position[0])
            if bitmap is None or position[1] not in bitmap:
                return position
            position = self.view.next_position(Position(position[0], run_end(bitmap, position[1])))
        return position

    # ---- redelivery counts and properties ----------------------------------------------------

    def increment_redelivery(self, positions: Iterable[Position]) -> None:
        """Count one more redelivery of each (unacked) entry; persisted with the cursor."""
        self.persistence.check_active()
        changed = False
        for position in positions:
            position = Position(*position)
            if self.is_acked(position):
                continue
            self._redelivery[position] = self._redelivery.get(position, 0) + 1
            changed = True
        if changed:
            self.persistence.changed()

    def redelivery_count(self, position: Position) -> int:
        return self._redelivery.get(Position(*position), 0)

    @property
    def properties(self) -> Mapping[str, str]:
        return MappingProxyType(self._properties)

    def set_properties(self, properties: Mapping[object, object]) -> None:
        """Replace the opaque properties the broker persists with the cursor (keys and values
        stored as their str(); typed as objects, since compiled code checks the declared types)."""
        self.persistence.check_active()
        self._properties = {str(k): str(v) for k, v in properties.items()}
        self.persistence.changed()

    # ---- reading the state --------------------------------------------------------------------

    @property
    def acked_ledgers(self) -> Mapping[int, BitMap64]:
        """Fully acked entry ids after md, per ledger (read only: do not mutate)."""
        return MappingProxyType(self._acks.acked)

    @property
    def partial_batches(self) -> Mapping[Position, BatchAck]:
        return MappingProxyType(self._acks.batches)

    def individually_acked_count(self) -> int:
        return self._acks.count()

    @property
    def stats(self) -> SubscriptionStats:
        from cursor.stats import subscription_stats
        return subscription_stats(self, self.view)

    # ---- internals -------------------------------------------------------------------------------

    def _entry_limit(self, ledger_id: int, lac: Position) -> int:
        """One past the last entry id of `ledger_id` that can be acked (0 if unknown)."""
        if ledger_id == lac[0]:
            return lac[1] + 1
        if self._entries_cache_lac_ledger != lac[0] or ledger_id not in self._entries_cache:
            self._entries_cache = {info.ledger_id: info.entries for info in self.view.ledgers()}
            self._entries_cache_lac_ledger = lac[0]
        return self._entries_cache.get(ledger_id, 0)

    def _is_ackable(self, position: Position, allow_before_first: bool = False) -> bool:
        lac = self.view.last_confirmed
        if position <= self.mark_delete_position or position > lac:
            return False
        if allow_before_first and position[1] == -1:
            return True
        return 0 <= position[1] < self._entry_limit(position[0], lac)

    def _move_mark_delete(self, position: Position, allow_back: bool = False) -> None:
        invariant(allow_back or position >= self.mark_delete_position,
                  "mark-delete never moves back", old=self.mark_delete_position, new=position)
        self.mark_delete_position = position
        self._acks.drop_through(position)
        if self._redelivery:
            for key in [p for p in self._redelivery if p <= position]:
                del self._redelivery[key]
        if self.read_position <= position:
            self.read_position = self.view.next_position(position)

    def _advance(self, lac: Position | None = None) -> None:
        """Move md over the contiguous acked run after it (and past trimmed ledgers)."""
        md = self.mark_delete_position
        first = self.view.first_position
        if md[0] < first[0] or (md[0] == first[0] and md[1] < first[1] - 1):
            md = before(first)  # the entries it points into were trimmed away
        lac = self.view.last_confirmed if lac is None else lac
        acked = self._acks.acked
        while True:
            ledger_id, entry_id = md
            bitmap = acked.get(ledger_id)
            if bitmap is not None and entry_id + 1 in bitmap:  # the run goes on in this ledger
                md = Position(ledger_id, run_end(bitmap, entry_id + 1))
                continue
            if entry_id + 1 < self._entry_limit(ledger_id, lac):
                break  # the next entry is in this ledger and not acked
            following = self.view.next_position(md)
            if following > lac or following[0] == ledger_id:
                break
            bitmap = acked.get(following[0])
            if bitmap is None or following[1] not in bitmap:
                break
            md = Position(following[0], run_end(bitmap, following[1]))
        if md != self.mark_delete_position:
            self._move_mark_delete(md)

    def _check_invariants(self, lac: Position | None = None) -> None:
        """Checked after every change; written so the passing case builds no context."""
        md = self.mark_delete_position
        lac = self.view.last_confirmed if lac is None else lac
        acked, batches = self._acks.acked, self._acks.batches
        if acked:
            lo, hi = min(acked), max(acked)
            lowest, highest = (lo, acked[lo].min()), (hi, acked[hi].max())
            if not (md < lowest and highest <= lac):
                invariant(False, "acked entries lie within (mark-delete, last confirmed]",
                          cursor=self.name, md=md, lac=lac, lowest=lowest, highest=highest)
        if batches:
            lowest, highest = min(batches), max(batches)
            if not (md < lowest and highest <= lac):
                invariant(False, "partial batches lie within (mark-delete, last confirmed]",
                          cursor=self.name, md=md, lac=lac, lowest=lowest, highest=highest)
        if not self.read_position > md:
            invariant(False, "read position is after mark-delete", cursor=self.name, md=md,
                      read=self.read_position)


def _resolve_start(view: LedgerView, start: Position) -> Position:
    """EARLIEST / LATEST / a position, clamped to [first kept entry, one past the last]."""
    end = view.next_position(view.last_confirmed)
    if start == EARLIEST or start[0] < 0:
        return view.first_position
    if start == LATEST or start >= end:
        return end
    return max(start, view.first_position)
