"""`strata standalone [--data-dir D] [--port P] [--admin-port A] [--bookies N] [--no-s3] [--secure]`: one machine.

Starts, in order: the SQLite metadata store at `D/metadata.db`; the embedded S3 server (SeaweedFS
`weed mini`, data under `D/s3/data`, log `D/s3/weed.log`) as the cold tier; N bookie subprocesses
(`strata bookie`, data under `D/bookie-<i>`); then the broker in this process (uvloop). Prints
`S3 endpoint http://...`, `service URL pulsar://...`, `admin URL http://...` and `console:
http://.../console/` (the web console, with `console_enabled`) once everything serves.
SIGINT/SIGTERM stops the broker first (cursors flushed), then the bookies and S3.

The bookies and the embedded S3 server are launched and stopped by launch/standalone_children.py;
this module holds the flags, the settings and the broker. Bookies listen on `bookie_bind_host`
(the same settings file and environment reach them), the broker on `broker_bind_host` /
`broker_admin_bind_host`; waits on the bookies are bounded by `standalone_bookie_start_timeout_ms`
and `standalone_bookie_stop_timeout_ms`.

Quorums (`quorums()`): one bookie → E=Qw=Qa=1 (like `pulsar standalone`); two → 2/2/2; N >= 3 →
(N-1)/2/2, so three give Pulsar's 2/2/2 and survive a dead bookie (one is always spare).

Bookie ports are chosen once and kept in `D/standalone.json`: ledger metadata names bookies by
address, so a restart must bring each bookie back at the same address to read old ledgers. The
bookies and SeaweedFS get PR_SET_PDEATHSIG (Linux), so a kill -9 of the standalone takes them
down too and a restart finds their ports free.

Cold tier: the embedded SeaweedFS serves S3 on loopback only, on ports kept in
`D/standalone.json` too, with bucket `offload_s3_bucket`. Its credentials are generated once and
kept in `D/s3/credentials.json` (mode 0600; SeaweedFS itself does not persist them), so offloaded
ledgers stay readable across restarts. The broker gets offload_driver=s3, offload_s3_endpoint=its
URL, and the credentials through boto3's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
set in this process's environment). With `offload_s3_endpoint` configured (settings file or
STRATA_OFFLOAD_S3_ENDPOINT) that external S3 is used instead and nothing is embedded; `--no-s3`
embeds nothing either (offload stays as configured, by default refused).

Each bookie serves Prometheus `/metrics` (bookie/metrics.py) on a port also kept in
`D/standalone.json` (`bookie_metrics_ports`, given to it as STRATA_BOOKIE_METRICS_PORT) and printed
as `bookie metrics http://host:port/metrics`.

`--secure` (cli/secure_setup.py) makes, once, a CA, certificates, an HS256 key, a superuser token and
the bookie secret under `D/security/`, and turns on TLS (`--tls-port`, default 6651; `--admin-tls-port`,
default 8443), token and TLS authentication, authorization (superuser `admin`), the bookie secret and
TLS on the bookie links;
the plain ports are off unless `--port` / `--admin-port` ask for them. The bookies get the same
settings through STRATA_* variables. Once serving, it prints how to connect (URLs, files, a Python
snippet, the `strata admin` form). `--tls-port` / `--admin-tls-port` without `--secure` only set the
ports (the certificate settings must then come from the settings file or environment).

What must hold: a restart over the same data dir keeps every topic, message, subscription
position and offloaded ledger (all state is under D).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import uvloop

from cli.broker_cmd import serve_until_signal
from common.config import Config, load_config
from common.errors import StrataError
from common.net import free_port
from common.redact import redact_url
from launch.seaweed import EmbeddedS3
from launch.standalone_children import StandaloneChildren

log = logging.getLogger("strata.standalone")

DEFAULT_TLS_PORT = 6651          # Pulsar's brokerServicePortTls
DEFAULT_ADMIN_TLS_PORT = 8443    # Pulsar's webServicePortTls
DEFAULT_KAFKA_PORT = 9092   # Kafka's own default: a Kafka client's bootstrap.servers=localhost:9092 just works
DEFAULT_KAFKA_TLS_PORT = 9093   # the usual SSL listener port beside it


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="strata standalone",
        description="metadata + bookies + broker + an embedded S3 cold tier (SeaweedFS) on one machine",
        epilog="The embedded S3 keeps its data under DATA_DIR/s3/ and its credentials in "
               "DATA_DIR/s3/credentials.json; with offload_s3_endpoint configured that S3 is used instead.")
    parser.add_argument("--data-dir", default="./data", help="where everything is stored (default ./data)")
    parser.add_argument("--port", type=int, default=None, help="binary protocol port (default 6650)")
    parser.add_argument("--admin-port", type=int, default=None, help="admin HTTP port (default 8080)")
    parser.add_argument("--kafka-port", type=int, default=None,
                        help=f"Kafka protocol port (default {DEFAULT_KAFKA_PORT}, not served with --secure "
                             "unless given; -1: not served)")
    parser.add_argument("--kafka-tls-port", type=int, default=None,
                        help=f"Kafka over TLS, SSL or SASL_SSL (default {DEFAULT_KAFKA_TLS_PORT} with --secure, "
                             "else not served)")
    parser.add_argument("--bookies", type=int, default=1, help="bookie processes (default 1)")
    parser.add_argument("--config", default=None,
                        help="settings file: TOML, or Pulsar's broker.conf format when its name ends in .conf")
    parser.add_argument("--secure", action="store_true",
                        help="TLS, token/TLS authentication and authorization on, with key material made once "
                             "under DATA_DIR/security/; plain ports off unless --port/--admin-port are given")
    parser.add_argument("--tls-port", type=int, default=None,
                        help=f"pulsar+ssl:// port (default {DEFAULT_TLS_PORT} with --secure, else not served)")
    parser.add_argument("--admin-tls-port", type=int, default=None,
                        help=f"admin HTTPS port (default {DEFAULT_ADMIN_TLS_PORT} with --secure, else not served)")
    parser.add_argument("--no-s3", action="store_true",
                        help="do not start the embedded S3 server (offload then needs an external endpoint)")
    return parser.parse_args(argv)


def quorums(bookies: int) -> tuple[int, int, int]:
    """(E, Qw, Qa) for a standalone with this many bookies: 1 -> 1/1/1; 2 -> 2/2/2 (two copies,
    but a dead bookie stops writes: fewer than Qw are left); N >= 3 -> (N-1)/2/2, Pulsar's 2/2/2
    on three. Two copies acknowledged by both, and one bookie outside every ensemble: a dead
    bookie is replaced at once (ensemble change), the next ledger finds two live ones, and the
    auditor has somewhere to restore the lost copies."""
    if bookies == 1:
        return 1, 1, 1
    if bookies == 2:
        return 2, 2, 2
    return bookies - 1, 2, 2


def s3_config(config: Config, s3: EmbeddedS3 | None) -> Config:
    """The broker's settings for the cold tier: the embedded server's endpoint and credentials
    (through boto3's default chain, i.e. this process's environment), or the external one."""
    if s3 is None:
        return config.replace(offload_driver="s3") if config.offload_s3_endpoint else config
    os.environ.update(s3.credentials.env())
    os.environ.pop("AWS_SESSION_TOKEN", None)  # a token from the shell would not match our key
    return config.replace(offload_driver="s3", offload_s3_endpoint=s3.endpoint)


def _secured(config: Config, args: argparse.Namespace, data_dir: Path) -> tuple[Config, dict[str, str], str]:
    """`--secure`: the key material (made or reused), the settings over `config`, the bookies'
    environment, and the connection help printed once serving."""
    from cli import secure_setup  # cryptography and jwt (~8 MB): only a --secure standalone needs them here
    material = secure_setup.ensure_material(data_dir / "security", secure_setup.certificate_hosts(config))
    tls_port = _concrete(args.tls_port, config.broker_tls_port, DEFAULT_TLS_PORT)
    admin_tls_port = _concrete(args.admin_tls_port, config.broker_admin_tls_port, DEFAULT_ADMIN_TLS_PORT)
    kafka_tls_port = _concrete(args.kafka_tls_port, config.kafka_tls_port, DEFAULT_KAFKA_TLS_PORT)
    settings = secure_setup.secure_settings(config, material, tls_port=tls_port, admin_tls_port=admin_tls_port,
                                            port=args.port, admin_port=args.admin_port,
                                            kafka_tls_port=kafka_tls_port, kafka_port=args.kafka_port)
    config = config.replace(**settings)
    host = config.broker_advertised_host
    help_text = secure_setup.connect_help(material, f"pulsar+ssl://{host}:{tls_port}", f"https://{host}:{admin_tls_port}")
    return config, secure_setup.settings_env(settings), help_text


def _concrete(flag: int | None, configured: int, default: int) -> int:
    """The port a flag, else the settings, else Pulsar's default names; 0 becomes a free port now (the
    connection help must name the real one)."""
    port = flag if flag is not None else (configured if configured != -1 else default)
    return free_port() if port == 0 else port


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags give: quorums for the bookie count, ports."""
    e, qw, qa = quorums(args.bookies)
    overrides: dict[str, Any] = {"ledger_ensemble_size": e, "ledger_write_quorum": qw, "ledger_ack_quorum": qa}
    if args.port is not None:
        overrides["broker_port"] = args.port
    if args.admin_port is not None:
        overrides["broker_admin_port"] = args.admin_port
    if args.kafka_port is not None:
        overrides["kafka_port"] = args.kafka_port
    if args.kafka_tls_port is not None and not args.secure:
        overrides["kafka_tls_port"] = args.kafka_tls_port
    if args.tls_port is not None and not args.secure:
        overrides["broker_tls_port"] = args.tls_port
    if args.admin_tls_port is not None and not args.secure:
        overrides["broker_admin_tls_port"] = args.admin_tls_port
    return overrides


def _settings(args: argparse.Namespace, data_dir: Path) -> tuple[Config, dict[str, str], str]:
    """The broker's settings, the bookies' extra environment (--secure's STRATA_* settings) and the
    connection help printed once serving (--secure), or StrataError."""
    config = load_config(args.config, **_overrides(args))
    if args.kafka_port is None and config.kafka_port == -1 and not args.secure:
        config = config.replace(kafka_port=DEFAULT_KAFKA_PORT)   # the standalone serves Kafka by default
    if args.secure:
        return _secured(config, args, data_dir)
    return config, {}, ""


def _start_children(children: StandaloneChildren, config: Config, no_s3: bool) -> Config:
    """Start the bookies and the embedded S3 (bounded waits), print their addresses, and return the
    broker's settings for the cold tier."""
    children.launch()
    import broker.server  # noqa: F401  - its ~1 s of imports runs while the bookies and S3 start, not after
    children.wait_bookies()
    log.info("%d bookie(s) listening on %s", len(children.ports), children.ports)
    for metrics_port in children.metrics_ports:
        print(f"bookie metrics http://{config.bookie_bind_host}:{metrics_port}/metrics", flush=True)
    children.wait_s3()
    if no_s3:
        return config
    config = s3_config(config, children.s3)
    print(f"S3 endpoint {redact_url(config.offload_s3_endpoint)} bucket {config.offload_s3_bucket}", flush=True)
    return config


def _serve(config: Config, metadata_url: str, connect_help: str | None) -> None:
    """Run the broker in this process (uvloop) until SIGINT/SIGTERM."""
    from broker.server import Broker
    broker = Broker(config, metadata_url)
    from common.gc_tuning import tune_for_server
    tune_for_server()
    def on_started() -> None:
        if config.console_enabled:
            print(f"console: {broker.admin_url}/console/", flush=True)
        if connect_help is not None:
            print(connect_help, flush=True)
    uvloop.run(serve_until_signal(broker, on_started))


def _run(args: argparse.Namespace, data_dir: Path, config: Config, bookie_env: dict[str, str],
         connect_help: str) -> int:
    """Children, then the broker; stopped in reverse (broker first, then bookies and S3)."""
    children: StandaloneChildren | None = None
    signal.signal(signal.SIGTERM, _interrupt)  # before the loop runs, SIGTERM acts like Ctrl-C
    try:
        children = StandaloneChildren(data_dir, config, bookies=args.bookies, config_path=args.config,
                                      bookie_env=bookie_env, embed_s3=not args.no_s3)
        config = _start_children(children, config, args.no_s3)
        _serve(config, children.metadata_url, connect_help if args.secure else None)
    except KeyboardInterrupt:
        pass
    except StrataError as exc:
        print(f"strata standalone: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:   # a port already bound (another standalone?): a message, not a traceback
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"strata standalone: {exc} (another process holds it; --port, --admin-port, --tls-port and "
              "--admin-tls-port choose others)", file=sys.stderr)
        return 1
    finally:
        if children is not None:
            children.stop()
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.bookies < 1:
        print("strata standalone: --bookies must be at least 1", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        config, bookie_env, connect_help = _settings(args, data_dir)
    except StrataError as exc:
        print(f"strata standalone: {exc}", file=sys.stderr)
        return 2
    return _run(args, data_dir, config, bookie_env, connect_help)
