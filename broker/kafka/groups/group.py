"""One Kafka consumer group on its coordinator: the classic protocol's state machine.

States (Kafka's ClassicGroupState): Empty -> PreparingRebalance -> CompletingRebalance -> Stable,
and back to PreparingRebalance when a member joins, leaves, fails or changes its subscription;
Dead once deleted. A JoinGroup parks until every known member has rejoined (or the rebalance
timeout, the longest any member asked, has passed; a group starting from Empty also waits the
initial rebalance delay for more members); then the generation is bumped, the protocol every
member supports with the most first-choice votes is chosen, and each parked join is answered
(the member list to the leader only). The leader's SyncGroup carries every member's assignment
and makes the group Stable; followers' SyncGroups park until then.

Members (KIP-394): a dynamic member joining without an id at JoinGroup v4+ gets one with
MEMBER_ID_REQUIRED and is pending until it joins again with it (or its session passes). Static
members (KIP-345, `group.instance.id`) rejoining without an id take over their old id's place; a
Stable group hands a static follower that comes back with unchanged metadata its old assignment
without a rebalance, and fences the old id (FENCED_INSTANCE_ID).

Time: there are no timers per member. `expire(now)` is called by the coordinator's sweep: it
drops pending and members whose session passed (a member parked in a join or sync is alive),
completes a join whose deadline passed, and returns whether the group changed in a way worth
storing. Every method takes `now` (monotonic seconds) so tests drive time.

What must hold: a parked future is answered exactly once (or cancelled when its connection goes);
the generation only grows; only members of the current generation sync, heartbeat or commit with
it; `members` is empty in Empty and Dead.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field

from broker.records.groups import StoredGroup, StoredMember
from wire.kafka.errors import ErrorCode

Reply = dict


class State(enum.StrEnum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    deadline_s: float                       # the session ends then without a heartbeat
    assignment: bytes = b""
    join: asyncio.Future | None = None      # a parked JoinGroup
    sync: asyncio.Future | None = None      # a parked SyncGroup
    join_version: int = 0

    def names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def touch(self, now: float) -> None:
        self.deadline_s = now + self.session_timeout_ms / 1000

    @property
    def parked(self) -> bool:
        return (self.join is not None and not self.join.done()) or (self.sync is not None and not self.sync.done())


@dataclass
class Limits:
    session_min_ms: int
    session_max_ms: int
    initial_delay_ms: int
    members_max: int


def _answer(future: asyncio.Future | None, reply: Reply) -> None:
    if future is not None and not future.done():
        future.set_result(reply)


def _error(code: int, **extra: object) -> Reply:
    return {"error_code": int(code), **extra}


@dataclass
class Group:
    group_id: str
    limits: Limits
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)      # member id -> deadline (KIP-394)
    static: dict[str, str] = field(default_factory=dict)         # instance id -> member id
    partitions: list[str] = field(default_factory=list)          # where its subscriptions are
    version: int | None = None                                   # of the stored record
    join_deadline_s: float = 0.0         # PreparingRebalance completes by then at the latest
    join_not_before_s: float = 0.0       # ... and not before (the initial rebalance delay)
    dirty: bool = False                  # changed since stored

    # --- stored form ------------------------------------------------------------------------------

    @classmethod
    def restore(cls, stored: StoredGroup, version: int, limits: Limits, now: float) -> Group:
        """A group read back by a new coordinator: Stable with its last members, each given a full
        session to find us, or Empty."""
        g = cls(stored.group_id, limits, generation=stored.generation, protocol_type=stored.protocol_type,
                protocol=stored.protocol, leader=stored.leader, partitions=list(stored.partitions), version=version)
        stable = stored.state == "Stable"
        for m in stored.members:
            # mid-rebalance, a member's protocols are unknown until it rejoins (none stored)
            member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                            m.rebalance_timeout_ms, stored.protocol_type,
                            [(stored.protocol, m.metadata)] if stable else [],
                            now + m.session_timeout_ms / 1000, assignment=m.assignment)
            g.members[m.member_id] = member
            if m.instance_id:
                g.static[m.instance_id] = m.member_id
        if not g.members:
            g.state = State.EMPTY
        elif stable:
            g.state = State.STABLE
        else:                                   # stored mid-rebalance: everyone rejoins
            g.state = State.PREPARING
            g.join_deadline_s = now + max(m.session_timeout_ms for m in g.members.values()) / 1000
        return g

    def stored(self, now_ms: int) -> StoredGroup:
        """What a new coordinator resumes from: a Stable group with its assignments, a group in a
        rebalance with its members (live, without assignments: they rejoin), or an Empty one."""
        stable = self.state is State.STABLE
        members = [StoredMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                m.rebalance_timeout_ms, m.metadata_for(self.protocol) if stable else b"",
                                m.assignment if stable else b"")
                   for m in self.members.values()] if self.state is not State.DEAD else []
        state = "Stable" if stable else (State.PREPARING.value if members else "Empty")
        return StoredGroup(self.group_id, state, self.generation, self.protocol_type, self.protocol,
                           self.leader, members, sorted(self.partitions), now_ms)

    # --- JoinGroup ----------------------------------------------------------------------------------

    def join(self, *, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], version: int, now: float,
             loop: asyncio.AbstractEventLoop) -> Reply | asyncio.Future:
        """A JoinGroup: an immediate reply (an error, MEMBER_ID_REQUIRED, a static member's old
        place) or a future answered when the join completes."""
        reply_base = {"generation_id": -1, "protocol_name": "", "leader": "", "member_id": member_id, "members": []}
        if self.state is State.DEAD:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, **reply_base)
        if not self.limits.session_min_ms <= session_timeout_ms <= self.limits.session_max_ms:
            return _error(ErrorCode.INVALID_SESSION_TIMEOUT, **reply_base)
        if not protocol_type or not protocols or not self._compatible(protocol_type, protocols, member_id):
            return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, **reply_base)
        rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
        if not member_id:
            if instance_id and instance_id in self.static:
                return self._rejoin_static(instance_id, client_id, client_host, session_timeout_ms,
                                           rebalance_timeout_ms, protocol_type, protocols, version, now, loop)
            if len(self.members) + len(self.pending) >= self.limits.members_max:
                return _error(ErrorCode.GROUP_MAX_SIZE_REACHED, **reply_base)
            new_id = f"{instance_id or client_id or 'member'}-{uuid.uuid4()}"
            if instance_id is None and version >= 4:
                self.pending[new_id] = now + session_timeout_ms / 1000
                return _error(ErrorCode.MEMBER_ID_REQUIRED, **{**reply_base, "member_id": new_id})
            member_id = new_id
        elif member_id in self.pending:
            del self.pending[member_id]
        elif instance_id and self.static.get(instance_id, member_id) != member_id:
            return _error(ErrorCode.FENCED_INSTANCE_ID, **reply_base)    # its instance has a newer id
        elif member_id not in self.members or (instance_id and instance_id not in self.static):
            return _error(ErrorCode.UNKNOWN_MEMBER_ID, **reply_base)
        member = self.members.get(member_id)
        if member is None:
            member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                            protocol_type, list(protocols), now + session_timeout_ms / 1000)
            self.members[member_id] = member
            if instance_id:
                self.static[instance_id] = member_id
            changed = True
        else:
            changed = member.protocols != list(protocols)
            member.protocols, member.protocol_type = list(protocols), protocol_type
            member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            member.client_id, member.client_host = client_id, client_host
            member.touch(now)
        member.join_version = version
        if (self.state is State.STABLE and not changed and member_id != self.leader):
            # a follower rejoining a stable group with what it had: nothing to rebalance
            return self._join_reply(member)
        future = loop.create_future()
        _answer(member.join, _error(ErrorCode.REBALANCE_IN_PROGRESS, **reply_base))   # a duplicate join
        member.join = future
        self._prepare(now)
        self.try_complete(now)
        return future

    def _compatible(self, protocol_type: str, protocols: list[tuple[str, bytes]], member_id: str) -> bool:
        others = [m for mid, m in self.members.items() if mid != member_id and m.protocols]
        if not others:
            return True
        if any(m.protocol_type != protocol_type for m in others):
            return False
        names = {n for n, _ in protocols}
        return bool(names & self._candidates(others))

    @staticmethod
    def _candidates(members: list[Member]) -> set[str]:
        common: set[str] | None = None
        for m in members:
            common = set(m.names()) if common is None else common & set(m.names())
        return common or set()

    def _rejoin_static(self, instance_id: str, client_id: str, client_host: str, session_timeout_ms: int,
                       rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                       version: int, now: float, loop: asyncio.AbstractEventLoop) -> Reply | asyncio.Future:
        old_id = self.static[instance_id]
        old = self.members.pop(old_id)
        new_id = f"{instance_id}-{uuid.uuid4()}"
        fenced = _error(ErrorCode.FENCED_INSTANCE_ID, generation_id=-1, protocol_name="", leader="",
                        member_id=old_id, members=[])
        _answer(old.join, fenced)
        _answer(old.sync, {"error_code": int(ErrorCode.FENCED_INSTANCE_ID), "assignment": b""})
        unchanged = old.protocols == list(protocols)
        member = Member(new_id, instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                        protocol_type, list(protocols), now + session_timeout_ms / 1000, assignment=old.assignment,
                        join_version=version)
        self.members[new_id] = member
        self.static[instance_id] = new_id
        was_leader = self.leader == old_id
        if was_leader:
            self.leader = new_id
        self.dirty = True
        if self.state is State.STABLE and unchanged and not was_leader:
            return self._join_reply(member)
        future = loop.create_future()
        member.join = future
        self._prepare(now)
        self.try_complete(now)
        return future

    def _join_reply(self, member: Member) -> Reply:
        members = []
        if member.member_id == self.leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                        "metadata": m.metadata_for(self.protocol)} for m in self.members.values()]
        return {"error_code": 0, "generation_id": self.generation, "protocol_type": self.protocol_type,
                "protocol_name": self.protocol, "leader": self.leader, "skip_assignment": False,
                "member_id": member.member_id, "members": members}

    def _prepare(self, now: float) -> None:
        """Enter (or stay in) PreparingRebalance."""
        if self.state is State.PREPARING:
            if now < self.join_not_before_s:      # the initial delay grows with each new member
                delay = self.limits.initial_delay_ms / 1000
                self.join_not_before_s = min(now + delay, self.join_deadline_s)
            return
        for m in self.members.values():       # followers waiting for an assignment must rejoin
            _answer(m.sync, {"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS), "assignment": b""})
            m.sync = None
        timeout_s = max((m.rebalance_timeout_ms for m in self.members.values()), default=0) / 1000
        self.join_deadline_s = now + timeout_s
        initial = self.state is State.EMPTY
        delay_s = self.limits.initial_delay_ms / 1000 if initial else 0.0
        self.join_not_before_s = min(now + delay_s, self.join_deadline_s)
        self.state = State.PREPARING

    def try_complete(self, now: float) -> None:
        """Complete the join once every member has rejoined (after the initial delay), or at the
        deadline with those that did."""
        if self.state is not State.PREPARING:
            return
        joined = [m for m in self.members.values() if m.join is not None and not m.join.done()]
        everyone = len(joined) == len(self.members) and not self.pending
        if now < self.join_deadline_s and not (everyone and now >= self.join_not_before_s):
            return
        for mid in [mid for mid, m in self.members.items() if m.join is None or m.join.done()]:
            self._remove(mid)
        self.generation += 1
        self.dirty = True
        if not self.members:
            self._become_empty()
            return
        self.protocol_type = next(iter(self.members.values())).protocol_type
        self.protocol = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = State.COMPLETING
        for m in self.members.values():
            m.assignment = b""
            m.touch(now)
            future, m.join = m.join, None
            _answer(future, self._join_reply(m))

    def _select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = self._candidates(members)
        votes = Counter(next(n for n in m.names() if n in candidates) for m in members)
        return max(votes, key=lambda name: (votes[name], -members[0].names().index(name)))

    def _become_empty(self) -> None:
        self.state = State.EMPTY
        self.protocol, self.leader = "", ""
        self.static.clear()
        self.dirty = True

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.instance_id and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        reply = {"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID), "generation_id": -1, "protocol_name": "",
                 "leader": "", "member_id": member_id, "members": []}
        _answer(member.join, reply)
        _answer(member.sync, {"error_code": int(ErrorCode.UNKNOWN_MEMBER_ID), "assignment": b""})
        self.dirty = True

    def _member_left(self, now: float) -> None:
        """A member is gone (left or expired): the others rebalance."""
        if not self.members and self.state is not State.PREPARING:
            self.generation += 1
            self._become_empty()
            return
        if self.state in (State.STABLE, State.COMPLETING):
            self._prepare(now)
        self.try_complete(now)

    # --- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------------

    def _check_member(self, member_id: str, instance_id: str | None, generation: int) -> int:
        member = self.members.get(member_id)
        if instance_id and self.static.get(instance_id) not in (None, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member is None or self.state in (State.EMPTY, State.DEAD):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def sync(self, *, member_id: str, instance_id: str | None, generation: int, protocol_type: str | None,
             protocol_name: str | None, assignments: dict[str, bytes], now: float,
             loop: asyncio.AbstractEventLoop) -> Reply | asyncio.Future:
        code = self._check_member(member_id, instance_id, generation)
        if code == ErrorCode.NONE and self.state is State.PREPARING:
            code = ErrorCode.REBALANCE_IN_PROGRESS
        if code == ErrorCode.NONE and ((protocol_type and protocol_type != self.protocol_type)
                                       or (protocol_name and protocol_name != self.protocol)):
            code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if code != ErrorCode.NONE:
            return {"error_code": int(code), "assignment": b""}
        member = self.members[member_id]
        member.touch(now)
        if self.state is State.STABLE:
            return self._sync_reply(member)
        future = loop.create_future()
        _answer(member.sync, {"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS), "assignment": b""})
        member.sync = future
        if member_id == self.leader:
            for mid, m in self.members.items():
                m.assignment = assignments.get(mid, b"")
            self.state = State.STABLE
            self.dirty = True
            for m in self.members.values():
                pending, m.sync = m.sync, None
                _answer(pending, self._sync_reply(m))
        return future

    def _sync_reply(self, member: Member) -> Reply:
        return {"error_code": 0, "protocol_type": self.protocol_type, "protocol_name": self.protocol,
                "assignment": member.assignment}

    def heartbeat(self, *, member_id: str, instance_id: str | None, generation: int, now: float) -> int:
        code = self._check_member(member_id, instance_id, generation)
        if code == ErrorCode.ILLEGAL_GENERATION and self.state is State.PREPARING and member_id in self.members:
            code = ErrorCode.REBALANCE_IN_PROGRESS        # rejoin (Kafka answers so in Preparing)
        if code != ErrorCode.NONE:
            return int(code)
        self.members[member_id].touch(now)
        if self.state is State.PREPARING:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return int(ErrorCode.NONE)

    def leave(self, leaving: list[tuple[str, str | None]], now: float) -> list[int]:
        """Members leave ((member id, instance id) each; a static member may name only its
        instance); one error code each."""
        codes = []
        left = False
        for member_id, instance_id in leaving:
            if instance_id:
                known = self.static.get(instance_id)
                if known is None:
                    codes.append(int(ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                if member_id and member_id != known:
                    codes.append(int(ErrorCode.FENCED_INSTANCE_ID))
                    continue
                member_id = known
            if member_id in self.pending:
                del self.pending[member_id]
                codes.append(0)
                continue
            if member_id not in self.members:
                codes.append(int(ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            self._remove(member_id)
            left = True
            codes.append(0)
        if left:
            self._member_left(now)
        else:
            self.try_complete(now)              # a pending member gone may be all a join waited for
        return codes

    # --- offsets, time, deletion --------------------------------------------------------------------

    def commit_check(self, member_id: str, instance_id: str | None, generation: int, now: float) -> int:
        """May this OffsetCommit proceed? (ClassicGroup.validateOffsetCommit)"""
        if self.state is State.DEAD:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and not member_id and self.state is State.EMPTY:
            return 0                          # a standalone commit (no membership: admin tools)
        code = self._check_member(member_id, instance_id, generation)
        if code == ErrorCode.NONE and self.state is State.COMPLETING:
            code = ErrorCode.REBALANCE_IN_PROGRESS
        if code == ErrorCode.NONE:
            self.members[member_id].touch(now)
        return int(code)

    def expire(self, now: float) -> None:
        for mid, deadline in list(self.pending.items()):
            if deadline <= now:
                del self.pending[mid]
        gone = [mid for mid, m in self.members.items() if m.deadline_s <= now and not m.parked]
        for mid in gone:
            self._remove(mid)
        if gone:
            self._member_left(now)
        else:
            self.try_complete(now)

    def kill(self, code: int) -> None:
        """The group is deleted or no longer ours: answer everything parked with `code`."""
        for m in self.members.values():
            _answer(m.join, {"error_code": int(code), "generation_id": -1, "protocol_name": "", "leader": "",
                             "member_id": m.member_id, "members": []})
            _answer(m.sync, {"error_code": int(code), "assignment": b""})
        self.members.clear()
        self.pending.clear()
        self.static.clear()
        self.state = State.DEAD

    def describe(self) -> dict:
        stable = self.state is State.STABLE
        return {"error_code": 0, "group_id": self.group_id, "group_state": self.state.value,
                "protocol_type": self.protocol_type, "protocol_data": self.protocol if stable else "",
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                             "client_host": m.client_host,
                             "member_metadata": m.metadata_for(self.protocol) if self.state is not State.DEAD else b"",
                             "member_assignment": m.assignment if stable else b""}
                            for m in self.members.values()],
                "authorized_operations": -2147483648}
