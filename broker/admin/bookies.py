"""The bookies of the cluster, as the admin API shows them (Pulsar's `GET /admin/v2/bookies/all`).

- `GET /admin/v2/bookies/all` (SUPERUSER) → `{"bookies": [{"bookieId": "host:port", "address":
  "host:port", "state": "available"|"read-only"|"unreachable", "freeBytes": n, "usedBytes": n|null,
  "ledgerCount": n|null}]}`, sorted by address. Pulsar answers `{"bookies": [{"bookieId"}]}`;
  the other fields are Strata's.

Each registered bookie (`/bookies/available/<addr>`, `bookie.registration`) is asked `GetInfo`
through the broker's own bookie client pool (`ledger_client.pool`, the clients the ledgers use:
same credentials, same connections), all at once, each bounded by INFO_TIMEOUT_S. A bookie that
answers shows its own disk numbers and read-only flag; one that does not (or refuses) is
"unreachable" with the registration's free bytes and no used bytes or ledger count (null).

What must hold: the answer never waits longer than INFO_TIMEOUT_S (plus one metadata read);
a bookie's failure never fails the whole answer.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from bookie.types import BookieInfo as DiskInfo
from common.errors import StrataError
from ledger import placement
from ledger.client import LedgerClient
from ledger.placement import BookieInfo as Registration

if TYPE_CHECKING:
    from broker.service import BrokerService

INFO_TIMEOUT_S = 2.0


def register(app: web.Application, service: BrokerService) -> None:
    app.router.add_get("/admin/v2/bookies/all", _BookieRoutes(service).all_bookies)


class _BookieRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def all_bookies(self, request: web.Request) -> web.Response:
        return web.json_response({"bookies": await describe_bookies(self.service)})


async def describe_bookies(service: BrokerService) -> list[dict[str, object]]:
    """Every registered bookie with its state and disk numbers (see the module docstring)."""
    registered = sorted(await placement.available_bookies(service.astore), key=lambda b: b.address)
    client = service.ctx.ledger_client
    infos = await asyncio.gather(*(_info(client, b.address) for b in registered))
    return [bookie_json(reg, info) for reg, info in zip(registered, infos)]


async def _info(client: LedgerClient, address: str) -> DiskInfo | None:
    """The bookie's GetInfo, or None when it did not answer within INFO_TIMEOUT_S or failed."""
    try:
        return await asyncio.wait_for(client.pool.get(address).info(), INFO_TIMEOUT_S)
    except (StrataError, TimeoutError):
        return None


def bookie_json(registration: Registration, info: DiskInfo | None) -> dict[str, object]:
    if info is None:
        return {"bookieId": registration.address, "address": registration.address, "state": "unreachable",
                "freeBytes": registration.free_bytes, "usedBytes": None, "ledgerCount": None}
    return {"bookieId": registration.address, "address": registration.address,
            "state": "read-only" if info.read_only else "available",
            "freeBytes": info.disk_free_bytes, "usedBytes": info.disk_used_bytes, "ledgerCount": info.ledger_count}
