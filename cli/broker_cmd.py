"""`strata broker --metadata-url URL [--port P] [--admin-port A] [--config F]`: one broker.

Runs the broker on uvloop until SIGINT/SIGTERM, then stops it cleanly (cursors flushed, ledgers
closed, ownership released). Prints `service URL ...`, its Kafka listeners and `admin URL ...` once
the ports listen.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING, Unpack

import uvloop

from common.config import Config, load_config
from common.errors import StrataError

if TYPE_CHECKING:
    from common.settings_fields import SettingValues


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata broker", description="run one Strata broker")
    parser.add_argument("--metadata-url", required=True, help="sqlite:///abs/path or postgresql://...")
    parser.add_argument("--port", type=int, default=None, help="binary protocol port (default 6650)")
    parser.add_argument("--admin-port", type=int, default=None, help="admin HTTP port (default 8080)")
    parser.add_argument("--kafka-port", type=int, default=None, help="Kafka protocol port (default: not served)")
    parser.add_argument("--advertised-host", default=None, help="host clients are told to use")
    parser.add_argument("--config", default=None,
                        help="settings file: TOML, or Pulsar's broker.conf format when its name ends in .conf")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace, **extra: Unpack[SettingValues]) -> Config:
    overrides: SettingValues = extra   # setting values (names checked by mypy, values by load_config)
    if args.port is not None:
        overrides["broker_port"] = args.port
    if args.admin_port is not None:
        overrides["broker_admin_port"] = args.admin_port
    if args.kafka_port is not None:
        overrides["kafka_port"] = args.kafka_port
    if getattr(args, "advertised_host", None):
        overrides["broker_advertised_host"] = args.advertised_host
    return load_config(args.config, **overrides)


async def serve_until_signal(broker, on_started=None) -> None:
    """Start `broker`, announce its URLs, run until SIGINT/SIGTERM, stop it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()
        raise
    print(f"service URL {broker.service_url}", flush=True)
    if broker.service_url_tls and broker.service_url_tls != broker.service_url:
        print(f"TLS service URL {broker.service_url_tls}", flush=True)
    for listener in broker.kafka.listeners.all():
        print(f"kafka listener {listener.name}://{listener.host}:{listener.port}", flush=True)
    print(f"admin URL {broker.admin_url}", flush=True)
    if broker.admin_url_tls and broker.admin_url_tls != broker.admin_url:
        print(f"admin TLS URL {broker.admin_url_tls}", flush=True)
    if on_started is not None:
        on_started()
    try:
        await stop.wait()
    finally:
        await broker.stop()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(args)
    except StrataError as exc:
        print(f"strata broker: {exc}", file=sys.stderr)
        return 2
    from broker.server import Broker
    from common.gc_tuning import tune_for_server
    tune_for_server()
    try:
        uvloop.run(serve_until_signal(Broker(config, args.metadata_url)))
    except StrataError as exc:   # e.g. BrokerAddressInUse: another live broker has our address
        print(f"strata broker: {exc}", file=sys.stderr)
        return 3
    return 0
