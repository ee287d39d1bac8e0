"""`LedgerClient`: create, open, recover and delete ledgers.

One per process (broker). It owns the `BookiePool` (one `BookieClient` per bookie address,
shared by every ledger), a seeded `random.Random` for placement and writer tokens, and the
broker-wide `EntryCache` the managed ledgers share.

- `create_ledger(E, Qw, Qa)`: id from `store.next_id("ledger")`, ensemble from the registered
  writable bookies (`placement.choose_ensemble`: those this client saw fail lately last, and
  fewer than E, never fewer than Qw, when fewer are there: the metadata records the size
  used), metadata created OPEN at `/ledgers/<id>`. Below Qw writable bookies: NotEnoughBookies.
  When only quarantined bookies make up the count, each is asked for its info first (bounded by
  `_PROBE_TIMEOUT_S`): one that does not answer is NotEnoughBookies at once, rather than a
  ledger whose first add fails (a dead bookie stays registered for its lease: without the probe
  every retry made a new, empty ledger on it).
- `open_ledger(id, recover=True)`: fence + recover + close (see `ledger.recovery`); returns a
  handle on the closed ledger. `recover=False` opens without touching the ledger: an open
  ledger is read up to the LAC the bookies of its last fragment report.
- `rereplicate(id)`: copy the entries of every final fragment (all of a CLOSED ledger's, all but
  the last of an OPEN one's) that names a bookie no longer registered to a replacement and
  re-point the fragment (see `ledger.rereplication`). The writer token is kept in the ledger's
  properties (`writer_token`, as BookKeeper keeps the ledger password) so copies to a bookie new
  to an open ledger carry the token its writer will use there.
- `delete_ledger(id)`: delete on every bookie that ever held it, then the metadata (so a failed
  attempt can be retried: the metadata still names the bookies).
- `check_credentials()`: at the broker's start, a few registered bookies are asked for their info
  (bounded by `_PROBE_TIMEOUT_S`); one that refuses this client's link credentials (a wrong
  `bookie_auth_secret` or client certificate) is AuthenticationFailed, so the start fails with
  that line instead of every append retrying against a refusal forever. A bookie that does not
  answer is no verdict. A refusal found by the quarantine probe is AuthenticationFailed too, not
  "do not answer".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config
from common.errors import (
    AuthenticationFailed,
    InvalidArgument,
    NoSuchLedger,
    NotEnoughBookies,
    NotFound,
    ShuttingDown,
    StrataError,
)
from common.invariant import invariant
from ledger import placement, recovery, rereplication
from ledger.cache import EntryCache
from ledger.handle import ReadHandle, WriteHandle
from ledger.ledger_metadata import Fragment, LedgerMetadata, ledger_path
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.rereplication import WRITER_TOKEN_PROPERTY
from metadata.api import AsyncStore

_PROBE_TIMEOUT_S = 2.0             # a quarantined bookie must answer GetInfo this fast to be used
_CREDENTIAL_CHECK_BOOKIES = 3      # bookies asked at start whether they accept our credentials


class LedgerClient:
    def __init__(self, store: AsyncStore, config: Config, clock: Clock = SYSTEM_CLOCK, *,
                 rng: random.Random | None = None) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.pool = BookiePool(config, clock)
        self.health = placement.BookieHealth(config.ledger_bookie_quarantine_ms / 1000, clock.monotonic_s)
        self.entry_cache = EntryCache(config.managed_ledger_cache_bytes_max)
        self._closed = False
        self._close_hooks: list[Callable[[], Awaitable[None]]] = []   # run first by close()

    @property
    def config(self) -> Config:
        return self._config

    @property
    def store(self) -> AsyncStore:
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise ShuttingDown("ledger client is closed")

    async def create_ledger(self, ensemble_size: int, write_quorum: int, ack_quorum: int, *,
                            properties: dict[str, str] | None = None) -> WriteHandle:
        self._check_open()
        if not ensemble_size >= write_quorum >= ack_quorum >= 1:
            raise InvalidArgument("quorums must satisfy E >= Qw >= Qa >= 1",
                                  E=ensemble_size, Qw=write_quorum, Qa=ack_quorum)
        candidates = await placement.available_bookies(self._store)
        quarantined = self.health.quarantined()
        ensemble = placement.choose_ensemble(candidates, ensemble_size, write_quorum, self._rng,
                                             quarantined=quarantined)
        await self._probe([a for a in ensemble if a in quarantined], write_quorum)
        token = self._rng.randbytes(16)
        ledger_id = await self._store.next_id("ledger")
        meta = LedgerMetadata(ledger_id=ledger_id, ensemble_size=len(ensemble),
                              write_quorum=write_quorum, ack_quorum=ack_quorum,
                              fragments=(Fragment(0, tuple(ensemble)),), created_ms=self._clock.wall_ms(),
                              properties={**(properties or {}), WRITER_TOKEN_PROPERTY: token.hex()})
        meta = await write_metadata(self._store, meta)
        return WriteHandle(meta, self.pool, self._store, self._config, self._clock, self._rng,
                           health=self.health, writer_token=token)

    async def _probe(self, suspects: list[str], write_quorum: int) -> None:
        """Every bookie in `suspects` (quarantined, yet needed) answers GetInfo, or NotEnoughBookies."""
        if not suspects:
            return
        answers = await asyncio.gather(*(asyncio.wait_for(self.pool.get(a).info(), _PROBE_TIMEOUT_S)
                                         for a in suspects), return_exceptions=True)
        silent = []
        for address, answer in zip(suspects, answers):
            if isinstance(answer, AuthenticationFailed):
                raise answer                     # refused, not silent: retrying never fixes it
            if isinstance(answer, (StrataError, TimeoutError)):
                self.health.failed(address)
                silent.append(address)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                self.health.answered(address)
        if silent:
            raise NotEnoughBookies(f"need {write_quorum} live bookies (Qw) for a new ledger; {silent} failed "
                                   "lately and do not answer", silent=silent)

    async def check_credentials(self) -> None:
        """AuthenticationFailed when a registered bookie refuses this client's link credentials
        (see the module docstring); a bookie that does not answer in time is no verdict."""
        bookies = (await placement.available_bookies(self._store))[:_CREDENTIAL_CHECK_BOOKIES]
        answers = await asyncio.gather(*(asyncio.wait_for(self.pool.get(b.address).info(), _PROBE_TIMEOUT_S)
                                         for b in bookies), return_exceptions=True)
        refused = next((a for a in answers if isinstance(a, AuthenticationFailed)), None)
        if refused is not None:
            raise refused

    async def open_ledger(self, ledger_id: int, *, recover: bool,
                          known_prefix: tuple[int, int] | None = None) -> ReadHandle:
        """`known_prefix` = (entries, bytes) of the ledger's first entries as the caller knows
        them (an index checkpoint): recovery then measures only the rest."""
        self._check_open()
        if recover:
            recovered = await recovery.recover(self._store, self.pool, ledger_id, self._config,
                                               self._clock, self._rng, known_prefix)
            invariant(recovered.is_closed, "a recovered ledger is closed", ledger_id=ledger_id)
            return ReadHandle(recovered, self.pool, self._config, self._clock)
        meta = await read_metadata(self._store, ledger_id)
        if meta is None:
            raise NotFound("no such ledger", ledger_id=ledger_id)
        if meta.is_closed:
            return ReadHandle(meta, self.pool, self._config, self._clock)
        lac = await self._read_lac(meta)
        return ReadHandle(meta, self.pool, self._config, self._clock, last_add_confirmed=lac)

    async def _read_lac(self, meta: LedgerMetadata) -> int:
        answers = await asyncio.gather(*(self.pool.get(b).read_lac(meta.ledger_id)
                                         for b in meta.last_ensemble), return_exceptions=True)
        lacs = [a[0] for a in answers if not isinstance(a, BaseException)]
        return max(lacs, default=meta.fragments[-1].first_entry_id - 1)

    async def ledger_metadata(self, ledger_id: int) -> LedgerMetadata | None:
        return await read_metadata(self._store, ledger_id)

    async def rereplicate(self, ledger_id: int) -> rereplication.RereplicationResult:
        """Restore Qw copies of a ledger's entries (its final fragments) whose replica was on a
        bookie that is gone for good. Retriable errors (NotEnoughBookies, bookie errors): call again."""
        self._check_open()
        return await rereplication.rereplicate(self._store, self.pool, ledger_id, self._rng,
                                               quarantined=self.health.quarantined())

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger everywhere. Raises (retriable) if a bookie could not be reached;
        calling again finishes the job. Deleting a ledger that does not exist is a no-op."""
        self._check_open()
        meta = await read_metadata(self._store, ledger_id)
        if meta is None:
            return
        answers = await asyncio.gather(*(self.pool.get(b).delete_ledger(ledger_id)
                                         for b in sorted(meta.all_bookies())), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, NoSuchLedger):
                raise answer
        try:
            await self._store.delete(ledger_path(ledger_id))
        except NotFound:
            pass

    def add_close_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """`await hook()` when the client closes, before its bookie connections (the auditor)."""
        self._close_hooks.append(hook)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for hook in self._close_hooks:
            await hook()
        await self.pool.close()
