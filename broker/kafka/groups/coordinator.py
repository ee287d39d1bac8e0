"""The groups this broker coordinates: which ones, their state, storing it, and time.

Which broker coordinates group G: the owner of the bundle holding the name
`persistent://<kafka_default_namespace>/__kafka_group_<hash of G>` (nothing is stored under that
name; it only places G, the way a topic is placed). FindCoordinator looks it up (assigning the
bundle if nobody owns it), every group request checks that this broker still holds it, and when
a broker dies or the bundle is unloaded, the next lookup gives G to another broker, which reads
G's record from the metadata store (`broker.records.groups`) and resumes: a Stable group's members
keep their ids and assignments and go on heartbeating without a rebalance.

State is kept in memory and stored when it changes in a way a successor needs (a rebalance
completed, the group emptied, a partition first committed): `changed(g)` schedules one coalesced
write per group, made with the version read, so a broker that lost the group without noticing
cannot overwrite its successor (it drops the group instead).

Time: one sweep every SWEEP_INTERVAL_S expires sessions and completes joins in every group, and
drops groups whose bundle left this broker (their parked requests get NOT_COORDINATOR).

What must hold: at most one broker serves a group at a time (bundle ownership, and the versioned
write); no request waits on a group that is not ours; at most `kafka_groups_max` groups in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
from typing import TYPE_CHECKING

from broker.kafka.groups.group import Group, Limits, State
from broker.kafka.groups.offsets import GroupOffsets
from broker.records import groups as records
from common import errors as e
from common.topic_names import PERSISTENT, TopicName
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S = 0.25
FLUSH_BOUND_S = 5.0            # a request waiting for its group to be stored
PLACEMENT_PREFIX = "__kafka_group_"


class NotCoordinator(Exception):
    """This broker does not coordinate the group (now): `code` says which Kafka error to answer."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class GroupCoordinator:
    def __init__(self, service: BrokerService) -> None:
        self._service = service
        self._config = service.config
        self._clock = service.ctx.clock
        self.groups: dict[str, Group] = {}
        self.offsets = GroupOffsets(service)
        self._loading: dict[str, asyncio.Task] = {}
        self._writing: dict[str, asyncio.Task] = {}
        self._sweeper: asyncio.Task | None = None
        c = service.config
        self.limits = Limits(c.kafka_group_min_session_timeout_ms, c.kafka_group_max_session_timeout_ms,
                             c.kafka_group_initial_rebalance_delay_ms, c.kafka_group_members_max)

    # --- placement ---------------------------------------------------------------------------------

    def placement(self, group_id: str) -> TopicName:
        tenant, namespace = self._config.kafka_default_namespace.split("/", 1)
        digest = hashlib.sha256(group_id.encode()).hexdigest()[:16]
        return TopicName(PERSISTENT, tenant, namespace, f"{PLACEMENT_PREFIX}{digest}")

    async def group(self, group_id: str, *, create: bool) -> Group | None:
        """The group if this broker coordinates it (loaded from the store at first use; created
        with `create`); NotCoordinator otherwise."""
        name = self.placement(group_id)
        try:
            await self._service.check_owned(name)
        except (e.OwnedElsewhere, e.NoOwner):
            raise NotCoordinator(ErrorCode.NOT_COORDINATOR) from None
        except e.StrataError:
            raise NotCoordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None
        self._start_sweeper()
        found = self.groups.get(group_id)
        if found is None:
            task = self._loading.get(group_id)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._load(group_id))
                self._loading[group_id] = task
                task.add_done_callback(functools.partial(self._forget_task, self._loading, group_id))
            try:
                found = await asyncio.shield(task)
            except e.StrataError as exc:
                log.info("kafka group %s: cannot load: %s", group_id, exc)
                raise NotCoordinator(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None
        if found is None and create:
            if len(self.groups) >= self._config.kafka_groups_max:
                raise NotCoordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            found = self.groups.setdefault(group_id, Group(group_id, self.limits))
        return found

    async def _load(self, group_id: str) -> Group | None:
        stored, version = await records.load(self._service.astore, group_id)
        if group_id in self.groups:
            return self.groups[group_id]
        if stored is None or version is None:
            return None
        g = Group.restore(stored, version, self.limits, self._clock.monotonic_s())
        self.groups[group_id] = g
        log.info("kafka group %s: resumed here as %s, generation %d, %d members",
                 group_id, g.state.value, g.generation, len(g.members))
        return g

    async def stored_group(self, group_id: str) -> records.StoredGroup | None:
        stored, _ = await records.load(self._service.astore, group_id)
        return stored

    async def all_ids(self) -> list[str]:
        return await records.all_ids(self._service.astore)

    async def coordinated_here(self, group_id: str) -> bool:
        """For ListGroups: this broker holds the group's placement bundle (never acquires it)."""
        return await self._service.ownership.owns(self.placement(group_id))

    # --- storing ---------------------------------------------------------------------------------------

    def changed(self, g: Group) -> None:
        """Store `g` soon (one write in flight per group; the latest state wins)."""
        if not g.dirty or g.group_id in self._writing or self.groups.get(g.group_id) is not g:
            return
        task = asyncio.get_running_loop().create_task(self._write(g))
        self._writing[g.group_id] = task
        task.add_done_callback(functools.partial(self._forget_task, self._writing, g.group_id))

    @staticmethod
    def _forget_task(tasks: dict[str, asyncio.Task], group_id: str, task: asyncio.Task) -> None:
        if tasks.get(group_id) is task:
            del tasks[group_id]
        if not task.cancelled():
            task.exception()

    async def flush(self, g: Group) -> None:
        """Store `g` now if it changed, waiting at most FLUSH_BOUND_S (the write goes on after that:
        the metadata store may be away, and a request must not wait on it without a bound)."""
        self.changed(g)
        running = self._writing.get(g.group_id)
        if running is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(running), FLUSH_BOUND_S)

    async def _write(self, g: Group) -> None:
        while g.dirty and self.groups.get(g.group_id) is g:
            g.dirty = False
            record = g.stored(self._clock.wall_ms())
            try:
                g.version = await records.save(self._service.astore, record, g.version)
            except (e.BadVersion, e.AlreadyExists):
                log.warning("kafka group %s: stored by another broker meanwhile: no longer coordinated here",
                            g.group_id)
                self.drop(g.group_id, ErrorCode.NOT_COORDINATOR)
                return
            except e.StrataError as exc:
                log.warning("kafka group %s: storing failed (retried): %s", g.group_id, exc)
                g.dirty = True
                await asyncio.sleep(0.5)

    def drop(self, group_id: str, code: int) -> None:
        g = self.groups.pop(group_id, None)
        if g is not None:
            g.kill(code)

    async def delete(self, g: Group) -> None:
        """DeleteGroups: the record goes, the group is Dead here."""
        await records.delete(self._service.astore, g.group_id)
        self.drop(g.group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    # --- time ----------------------------------------------------------------------------------------

    def _start_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            try:
                await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("kafka group sweep failed")

    async def sweep_once(self) -> None:
        now = self._clock.monotonic_s()
        for group_id, g in list(self.groups.items()):
            if not await self._service.ownership.owns(self.placement(group_id)):
                log.info("kafka group %s: its bundle left this broker: no longer coordinated here", group_id)
                self.drop(group_id, ErrorCode.NOT_COORDINATOR)
                continue
            before = (g.state, len(g.members))
            g.expire(now)
            if (g.state, len(g.members)) != before:
                log.info("kafka group %s: %s -> %s, %d members, generation %d", group_id, before[0].value,
                         g.state.value, len(g.members), g.generation)
            if (g.state is State.EMPTY and not g.partitions and not g.pending and not g.dirty
                    and g.version is None):
                self.groups.pop(group_id, None)     # never stored, nothing kept: forget it
                continue
            self.changed(g)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for task in list(self._writing.values()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), 2.0)
        for group_id in list(self.groups):
            self.drop(group_id, ErrorCode.NOT_COORDINATOR)
