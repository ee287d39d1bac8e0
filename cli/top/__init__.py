"""`strata top`: a live view of the cluster's topics, like htop for topics.

    strata top [--admin-url http://127.0.0.1:8080] [--interval 2] [--sort rate|backlog|storage]
               [--limit N] [--namespace tenant/ns] [--timeout 3] [--once]

Every `--interval` seconds it asks each live broker for the stats of the topics it serves
(`GET /admin/v2/broker-stats/topics`, brokers from `/admin/v2/brokers`) and draws one row per topic:
msg/s in and out, backlog (messages), storage, consumers, and a sparkline of the backlog over the
last 30 refreshes. Keys (when stdin is a terminal): r / b / s sort by rate, backlog, storage;
↑ ↓ or k j select; Enter shows the selected topic's subscriptions (type, msg/s out, backlog,
unacked, consumers, mark-delete position, backlog sparkline); Esc or Backspace goes back; q quits.
A broker that does not answer within `--timeout` is counted as failed in the header.

A secured cluster: the credential and TLS options of `strata admin` (`--auth-token`,
`--auth-params`, `--auth-basic`, `--tls-trust-cert`, `--tls-cert/--tls-key`, and their
$STRATA_ADMIN_* fallbacks, `cli.admin.credentials`); broker-stats needs a superuser's role, as in
Pulsar. A refusal (401/403) prints the broker's reason and exits 1.

`--once` prints one frame and exits (1 if no broker answered): for scripts and tests. When stdout
is not a terminal, the live view prints a frame per interval instead of redrawing the screen.

Layout: `model` (snapshot, history, sorting, sparklines), `keys` (key decoding and the view's state
machine) and `render` (frames) are pure; `source` (HTTP) and `terminal` (cbreak keyboard) do the I/O.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor

from rich.console import Console
from rich.live import Live

from cli.admin import credentials
from cli.top.keys import ViewState, apply_key
from cli.top.model import SORT_KEYS, History, Snapshot, in_namespace, sorted_topics
from cli.top.render import frame, text_width, to_text
from cli.top.source import REFUSED, fetch
from cli.top.terminal import Keyboard
from common.errors import AdminUnreachable, StrataError
from common.topic_names import parse_namespace

CHROME_LINES = 7     # screen lines that are not table rows: header (2), table head (2), keys, margin
POLL_S = 0.05        # how often the live view looks for a snapshot while one is being fetched


def _positive(kind: type[int] | type[float]):
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse


def _namespace(text: str) -> str:
    try:
        tenant, namespace = parse_namespace(text)
    except StrataError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return f"{tenant}/{namespace}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strata top", description="A live view of the cluster's topics.")
    p.add_argument("--admin-url", default="http://127.0.0.1:8080", help="any broker's admin URL")
    p.add_argument("--interval", type=_positive(float), default=2.0, help="seconds between refreshes")
    p.add_argument("--sort", choices=SORT_KEYS, default="rate", help="the initial sort (keys r, b, s)")
    p.add_argument("--limit", type=_positive(int), default=None, help="show at most N topics")
    p.add_argument("--namespace", type=_namespace, default=None, help="only the topics of tenant/ns")
    p.add_argument("--timeout", type=_positive(float), default=3.0,
                   help="seconds a broker has to answer before it counts as failed")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    credentials.add_options(p)      # --auth-token, --tls-trust-cert, ... as `strata admin`
    return p


def _snapshot(args: argparse.Namespace) -> Snapshot:
    return in_namespace(fetch(args.admin_url, args.timeout, args.credentials), args.namespace)


def _clock_text() -> str:
    return time.strftime("%H:%M:%S")


def _print_frame(args: argparse.Namespace, snapshot: Snapshot, history: History, state: ViewState) -> None:
    view = frame(snapshot, history, state, clock_text=_clock_text(), limit=args.limit)
    if sys.stdout.isatty():
        Console().print(view)
    else:
        sys.stdout.write(to_text(view, text_width(snapshot)))
        sys.stdout.flush()


def _once(args: argparse.Namespace) -> int:
    snapshot = _snapshot(args)
    history = History()
    history.record(snapshot)
    _print_frame(args, snapshot, history, ViewState(sort=args.sort))
    if not snapshot.brokers_answered:
        print(f"strata top: no broker answered at {args.admin_url}", file=sys.stderr)
        return 1
    return 0


def _batch(args: argparse.Namespace) -> int:
    """stdout is not a terminal: a frame per interval, no screen control, no keys."""
    history, state = History(), ViewState(sort=args.sort)
    while True:
        snapshot = _snapshot(args)
        history.record(snapshot)
        _print_frame(args, snapshot, history, state)
        time.sleep(args.interval)


def _live(args: argparse.Namespace) -> int:
    """The screen view: snapshots fetched in the background every interval, so keys stay quick
    while a broker is slow to answer; redrawn on each snapshot and after each key."""
    console = Console()
    history, state = History(), ViewState(sort=args.sort)
    snapshot: Snapshot | None = None
    pending: Future[Snapshot] | None = None
    next_fetch_s = 0.0
    fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strata-top-fetch")
    try:
        with Keyboard() as keyboard, Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
            while not state.quit:
                now_s = time.monotonic()
                if pending is None and now_s >= next_fetch_s:
                    pending, next_fetch_s = fetcher.submit(_snapshot, args), now_s + args.interval
                dirty = False
                if pending is not None and pending.done():
                    snapshot, pending, dirty = pending.result(), None, True
                    history.record(snapshot)
                wait_s = POLL_S if pending is not None else max(0.0, next_fetch_s - time.monotonic())
                keys = keyboard.read(wait_s) if not dirty else []
                for key in keys:
                    shown = [t.name for t in sorted_topics(snapshot, state.sort, args.limit)] if snapshot else []
                    state = apply_key(state, key, shown)
                if (dirty or keys) and snapshot is not None and not state.quit:
                    live.update(frame(snapshot, history, state, clock_text=_clock_text(), limit=args.limit,
                                      interactive=keyboard.active,
                                      rows_max=max(1, console.size.height - CHROME_LINES)), refresh=True)
    finally:
        fetcher.shutdown(wait=False, cancel_futures=True)
    return 0


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        args.credentials = credentials.from_args(args)
        if args.once:
            return _once(args)
        return _live(args) if sys.stdout.isatty() else _batch(args)
    except KeyboardInterrupt:
        return 130
    except REFUSED as exc:        # 401/403: the broker's reason, not "no broker answered"
        print(f"strata top: HTTP {exc.status}: {exc.reason}{credentials.hint(exc.status)}", file=sys.stderr)
        return 1
    except AdminUnreachable as exc:   # the broker's certificate failed the check (cli.top.source.broker_urls)
        print(f"strata top: cannot reach {args.admin_url}: {exc.message}{credentials.tls_hint(exc)}",
              file=sys.stderr)
        return 1
    except StrataError as exc:    # a credential that cannot be read
        print(f"strata top: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"strata top: cannot reach {args.admin_url}: {exc}{credentials.tls_hint(exc)}", file=sys.stderr)
        return 1
