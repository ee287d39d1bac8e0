"""`strata bookie`: run one bookie storage node until SIGTERM or Ctrl-C.

    strata bookie --data-dir D [--port P] [--metadata-url URL] [--config FILE] [--host H]
                  [--advertised-host A]

Recovers the data directory, serves the gRPC Bookie service, registers
`/bookies/available/<host>:<port>` in the metadata store when `--metadata-url` is given, and
prints `bookie ready <host>:<port>` on stdout once it accepts requests (tests wait for that
line). `--port`, `--host` and `--advertised-host` override the settings `bookie_port`,
`bookie_bind_host` and `bookie_advertised_host`; `<host>` is the advertised host (by default the
bind host, 127.0.0.1). SIGTERM/SIGINT: stop accepting, finish in-flight requests, flush and seal the journal,
deregister, exit 0.

Who may use it: with `bookie_auth_secret` (STRATA_BOOKIE_AUTH_SECRET, the same on brokers) and/or
`bookie_tls_client_roles` the bookie serves only clients that prove themselves (bookie/link_auth.py);
with neither it serves anyone who reaches its ports and logs a WARNING saying so. `bookie_tls_enabled`
puts both its ports behind TLS (`tls_cert_file`/`tls_key_file`; its advertised host must be in the
certificate). A refused client is logged (rate-limited), never its secret.

`--inject-enospc-after-bytes N` is a test seam: the journal's file writer fails with ENOSPC
after N bytes (bookie/fileio.py `FailingFileSystem`), to test disk-full handling end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from common.config import Config, load_config
from common.errors import StrataError
from common.redact import redact_text

if TYPE_CHECKING:
    from common.settings_fields import SettingValues


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="strata bookie", description="Run a bookie storage node.")
    p.add_argument("--data-dir", required=True, help="directory for segments, indexes, checkpoint")
    p.add_argument("--port", type=int, default=None, help="gRPC port (default 3181; 0 = any free port)")
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument("--advertised-host", default=None, help="host other nodes connect to (default: --host)")
    p.add_argument("--metadata-url", default=None, help="register in this metadata store")
    p.add_argument("--config", default=None, help="TOML file of settings")
    p.add_argument("--inject-enospc-after-bytes", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> Config:
    """The settings: the file, the environment, then the command-line flags."""
    overrides: SettingValues = {}   # setting values (names checked by mypy, values by load_config)
    if args.port is not None:
        overrides["bookie_port"] = args.port
    if args.host is not None:
        overrides["bookie_bind_host"] = args.host
    if args.advertised_host is not None:
        overrides["bookie_advertised_host"] = args.advertised_host
    return load_config(args.config, **overrides)


async def _run(args: argparse.Namespace) -> int:
    from bookie.fileio import FailingFileSystem
    from bookie.registration import BookieRegistration
    from bookie.server import BookieServer

    config = build_config(args)
    fs = None
    if args.inject_enospc_after_bytes is not None:
        fs = FailingFileSystem(args.inject_enospc_after_bytes)
    server = BookieServer(args.data_dir, config, port=config.bookie_port, fs=fs)
    await server.start()
    registration = None
    if args.metadata_url:
        def describe() -> dict:
            info = server.storage.info()
            return {"free_bytes": info.disk_free_bytes, "read_only": info.read_only,
                    "bookie_id": info.bookie_id, "corrupt": server.storage.corrupt.report()}
        registration = BookieRegistration(args.metadata_url, server.address, describe,
                                          config=config, data_port=server.data_port)
        try:
            await registration.start()
        except StrataError:
            await server.stop()
            raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"bookie ready {server.address}", flush=True)
    await stop.wait()
    if registration is not None:
        await registration.stop()
    await server.stop()
    print(f"bookie stopped {server.address}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s bookie %(levelname)s %(name)s: %(message)s")
    runner: Callable[[Coroutine[Any, Any, Any]], Any]   # uvloop.run or asyncio.run
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # uvloop is optional: plain asyncio works, slower
        runner = asyncio.run
    from common.gc_tuning import tune_for_server
    tune_for_server()
    try:
        return runner(_run(args))
    except StrataError as exc:
        print(f"strata bookie: {redact_text(str(exc))}", file=sys.stderr)
        return 1
