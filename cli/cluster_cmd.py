"""`strata cluster up|down|status`: a local cluster of separate processes on this machine.

    strata cluster up [--data-dir ./cluster] [--brokers 2] [--bookies 3] [--metadata-url URL]
                      [--lease-ms MS] [--ensemble E --write-quorum QW --ack-quorum QA] [--no-s3]
    strata cluster status [--data-dir ./cluster] [-o table|json]
    strata cluster down [--data-dir ./cluster] [--timeout-s 30]

`up` starts PostgreSQL from the machine's binaries (unless `--metadata-url` names a store),
SeaweedFS as the S3 cold tier (unless `--no-s3`), N bookies (default 3 at E/Qw/Qa 3/2/2) and M
brokers (default 2) on free loopback ports, detached: they keep running after `up` returns.
It prints the multi-host service URL and each broker's admin URL, and records every pid and
port in `<data dir>/cluster.json`, where `status` and `down` find them. Logs are in each
node's directory (`broker-1/broker.log`, `bookie-1/bookie.log`, `s3/weed.log`).

`status` reads the metadata store: live brokers (`/loadbalance/brokers`), bundle owners
(`/namespace/...`) and bookies (`/bookies/available`), beside each process's pid and state.
`down` sends SIGTERM to brokers, then bookies, then SeaweedFS, SIGKILLs whatever is still
running after `--timeout-s`, and stops PostgreSQL (`pg_ctl stop`); the data stays.

The processes are launched by launch/cluster.py (`LocalCluster`, detached) and, for `down`,
stopped by pid with launch/process.py's helpers.

`up` on a dir whose cluster was stopped starts that cluster again (`LocalCluster.resume`: the
same ports, data and PostgreSQL server, its recorded settings), so topics and messages are back.

What must hold: `up` refuses a data dir whose cluster still runs (any of its processes or its
PostgreSQL); every wait is bounded; exit codes are 0 (done), 1 (failed), 2 (bad usage).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from common.errors import StrataError
from common.redact import redact_text, redact_url
from launch.postgres import PostgresServerError, stop_recorded
from launch.process import pid_alive, signal_group, stop_pid

DEFAULT_DATA_DIR = "./cluster"
STOP_TIMEOUT_S = 30.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata cluster",
                                     description="a local cluster: PostgreSQL, SeaweedFS, bookies, brokers")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start a cluster (detached)")
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="state, data and logs (default ./cluster)")
    up.add_argument("--brokers", type=int, default=2, help="broker processes (default 2)")
    up.add_argument("--bookies", type=int, default=3, help="bookie processes (default 3)")
    up.add_argument("--ensemble", type=int, default=None, help="E (default min(bookies, 3))")
    up.add_argument("--write-quorum", type=int, default=None, help="Qw (default min(E, 2))")
    up.add_argument("--ack-quorum", type=int, default=None, help="Qa (default Qw)")
    up.add_argument("--metadata-url", default=None,
                    help="an existing metadata store (postgresql://...); default: start PostgreSQL")
    up.add_argument("--lease-ms", type=int, default=None,
                    help="metadata session lease (metadata_session_lease_ms; default: the setting)")
    up.add_argument("--no-s3", action="store_true", help="do not start SeaweedFS (no cold tier)")
    for name, text in (("status", "show brokers, bundle owners and bookies"), ("down", "stop the cluster")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the cluster's dir (default ./cluster)")
        if name == "status":
            cmd.add_argument("-o", "--output", choices=("table", "json"), default="table")
        else:
            cmd.add_argument("--timeout-s", type=float, default=STOP_TIMEOUT_S,
                             help="wait this long after SIGTERM, then SIGKILL (default 30)")
    return parser.parse_args(argv)


def quorums(args: argparse.Namespace) -> tuple[int, int, int]:
    """E/Qw/Qa: the flags, else 3/2/2 shrunk to the bookie count."""
    e = args.ensemble or min(args.bookies, 3)
    qw = args.write_quorum or min(e, 2)
    qa = args.ack_quorum or qw
    return e, qw, qa


def read_state(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir / "cluster.json"
    return json.loads(path.read_text()) if path.exists() else None


def running_pids(state: dict[str, Any]) -> list[int]:
    pids = [n["pid"] for n in state["brokers"] + state["bookies"] if n.get("pid")]
    if state.get("s3"):
        pids.append(state["s3"]["pid"])
    return [pid for pid in pids if pid_alive(pid)]


def cmd_up(args: argparse.Namespace) -> int:
    from launch.cluster import LocalCluster

    if args.brokers < 1 or args.bookies < 1:
        print("strata cluster: --brokers and --bookies must be at least 1", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is not None and (running_pids(state) or _postgres_running(state)):
        print(f"strata cluster: a cluster is running in {data_dir}; `strata cluster down` first",
              file=sys.stderr)
        return 1
    if state is not None:
        print(f"starting the stopped cluster in {data_dir} again (its own settings; other flags ignored)")
        cluster = LocalCluster.resume(data_dir, detached=True)
    else:
        e, qw, qa = quorums(args)
        cluster = LocalCluster.start(data_dir, brokers=args.brokers, bookies=args.bookies, e=e, qw=qw,
                                     qa=qa, lease_ms=args.lease_ms, metadata_url=args.metadata_url,
                                     s3=not args.no_s3, detached=True)
    print_started(cluster, args.data_dir)
    return 0


def print_started(cluster: Any, data_dir_arg: str) -> None:
    """The URLs a user needs, one per line (`service URL ...`, `admin URL ...`)."""
    data_dir = cluster.data_dir
    print(f"service URL {cluster.service_url}")
    for broker in cluster.brokers:
        print(f"admin URL {broker.admin_url}")
    if cluster.brokers:     # every broker serves the web console (console_enabled, the default)
        print(f"console: {cluster.brokers[0].admin_url}/console/")
    print(f"metadata URL {redact_url(cluster.metadata_url)}")
    if cluster.s3 is not None:
        print(f"S3 endpoint {cluster.s3.endpoint} bucket {cluster.s3.bucket} "
              f"(credentials in {data_dir / 's3' / 'credentials.json'})")
    print(f"bookies {', '.join(b.address for b in cluster.bookies)} at E/Qw/Qa {cluster.e}/{cluster.qw}/{cluster.qa}")
    print(f"state {data_dir / 'cluster.json'}; stop with: strata cluster down --data-dir {data_dir_arg}")


def _postgres_running(state: dict[str, Any]) -> bool:
    pg = state.get("postgres")
    if not pg:
        return False
    return Path(pg["data_dir"], "postmaster.pid").exists()


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is None:
        print(f"strata cluster: no cluster in {data_dir} (no cluster.json)", file=sys.stderr)
        return 1
    groups = [state["brokers"], state["bookies"], [state["s3"]] if state.get("s3") else []]
    for group in groups:   # brokers first: they release their bundles while bookies still serve
        live = [n for n in group if n.get("pid") and pid_alive(n["pid"])]
        for node in live:
            signal_group(node["pid"], signal.SIGCONT)
            signal_group(node["pid"], signal.SIGTERM)
        for node in live:
            clean = stop_pid(node["pid"], args.timeout_s)
            print(f"stopped {node.get('name', 's3')} (pid {node['pid']})" + ("" if clean else ", killed"))
    if state.get("postgres"):
        stop_recorded(state["postgres"])
        print("stopped PostgreSQL")
    return 0


def read_metadata(metadata_url: str) -> dict[str, Any]:
    """Registered brokers, the leader, bundle owners and bookies, as the metadata store holds them."""
    import metadata

    store = metadata.open_store(metadata_url)
    try:
        def values(prefix: str) -> dict[str, Any]:
            """{path below `prefix`: its JSON value} for every key below `prefix`."""
            found = {}
            for path, item in store.list_prefix(prefix):
                if path == prefix or not item.value:
                    continue
                try:
                    found[path[len(prefix) + 1:]] = json.loads(item.value)
                except ValueError:
                    found[path[len(prefix) + 1:]] = {"raw": item.value[:200].decode(errors="replace")}
            return found
        leader = store.get("/loadbalance/leader")
        return {"brokers": values("/loadbalance/brokers"), "bundles": values("/namespace"),
                "bookies": values("/bookies/available"),
                "leader": json.loads(leader.value) if leader and leader.value else None}
    finally:
        store.close()


def node_state(node: dict[str, Any]) -> str:
    if not node.get("pid") or not pid_alive(node["pid"]):
        return "stopped"
    try:
        with open(f"/proc/{node['pid']}/stat") as f:
            return "frozen" if f.read().rsplit(")", 1)[1].split()[0] == "T" else "running"
    except OSError:
        return "stopped"


def status_doc(state: dict[str, Any]) -> dict[str, Any]:
    """The status as one JSON document: each process's state joined with its registration."""
    try:
        meta = read_metadata(state["metadata_url"])
        meta_error = None
    except StrataError as exc:
        meta, meta_error = {"brokers": {}, "bundles": {}, "bookies": {}, "leader": None}, redact_text(str(exc))
    brokers = []
    for b in state["brokers"]:
        report = meta["brokers"].get(f"127.0.0.1:{b['admin_port']}")
        brokers.append({"name": b["name"], "pid": b["pid"], "state": node_state(b),
                        "service_url": b["service_url"], "admin_url": b["admin_url"],
                        "registered": report is not None, "load": report})
    bookies = [{"name": b["name"], "pid": b["pid"], "state": node_state(b), "address": b["address"],
                "registered": b["address"] in meta["bookies"], "info": meta["bookies"].get(b["address"])}
               for b in state["bookies"]]
    bundles = [{"namespace": key.rsplit("/", 1)[0], "bundle": key.rsplit("/", 1)[-1],
                "owner": value.get("nativeUrl"), "http_url": value.get("httpUrl")}
               for key, value in sorted(meta["bundles"].items())]
    return {"service_url": state["service_url"], "metadata_url": redact_url(state["metadata_url"]),
            "metadata_error": meta_error, "leader": meta["leader"], "brokers": brokers,
            "bundles": bundles, "bookies": bookies,
            "s3": None if not state.get("s3") else {**state["s3"], "state": node_state(state["s3"])}}


def print_tables(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"service URL {doc['service_url']}   metadata {doc['metadata_url']}")
    if doc["metadata_error"]:
        console.print(f"[red]metadata store unreachable: {doc['metadata_error']}[/red]")
    leader = (doc["leader"] or {}).get("brokerId", "-")
    table = Table(title=f"brokers (leader {leader})")
    for column in ("name", "pid", "state", "service URL", "admin URL", "registered", "topics",
                   "bundles", "msg/s in", "cpu %"):
        table.add_column(column)
    for b in doc["brokers"]:
        load = b["load"] or {}
        table.add_row(b["name"], str(b["pid"]), b["state"], b["service_url"], b["admin_url"],
                      "yes" if b["registered"] else "no", str(load.get("numTopics", "-")),
                      str(load.get("numBundles", "-")), _num(load.get("msgRateIn")),
                      _num((load.get("cpu") or {}).get("usage")))
    console.print(table)
    table = Table(title="bundle owners")
    for column in ("namespace", "bundle", "owner"):
        table.add_column(column)
    for u in doc["bundles"]:
        table.add_row(u["namespace"], u["bundle"], str(u["owner"]))
    console.print(table)
    table = Table(title="bookies")
    for column in ("name", "pid", "state", "address", "registered", "free bytes", "read-only"):
        table.add_column(column)
    for k in doc["bookies"]:
        info = k["info"] or {}
        table.add_row(k["name"], str(k["pid"]), k["state"], k["address"], "yes" if k["registered"] else "no",
                      str(info.get("free_bytes", "-")), str(info.get("read_only", "-")))
    console.print(table)


def _num(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def cmd_status(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is None:
        print(f"strata cluster: no cluster in {data_dir} (no cluster.json)", file=sys.stderr)
        return 1
    doc = status_doc(state)
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        print_tables(doc)
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        if args.action == "up":
            return cmd_up(args)
        if args.action == "down":
            return cmd_down(args)
        return cmd_status(args)
    except (StrataError, PostgresServerError, OSError, subprocess.SubprocessError) as exc:
        print(f"strata cluster {args.action}: {exc}", file=sys.stderr)
        return 1
