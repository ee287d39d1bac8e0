"""`python -m bench.run` (what `make bench` runs): every system through every workload, one table.

    python -m bench.run                 # full run (~20 min on 2 cores)
    python -m bench.run --quick         # a tenth of the sizes
    python -m bench.run --systems strata-1,redis-everysec --workloads produce-1x1,consume-backlog

Order: install the peers if missing (bench/install-peers.sh, Debian packages), measure the disk
limit, then one system at a time: start its servers in a temp dir on free loopback ports, run
the workloads, stop the servers (always, in `finally`), remove the data. A system whose server
or client library is missing is reported as skipped, never silently dropped. Results go to
bench/results/ (JSON + PNG, see bench/report.py).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench import disk, report
from bench.procstat import ProcSampler
from bench.workloads import WORKLOADS, Row, Scale, run_all

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"

# system key -> (module, factory expression args); imported lazily so a missing peer library
# only skips that system
SYSTEMS: dict[str, tuple[str, str, dict]] = {
    "strata-1": ("bench.strata_driver", "StrataDriver", {"bookies": 1, "driver": "native"}),
    "strata-3": ("bench.strata_driver", "StrataDriver", {"bookies": 3, "driver": "native"}),
    "strata-1-pulsar-client": ("bench.strata_driver", "StrataDriver", {"bookies": 1, "driver": "pulsar-client"}),
    "redis-everysec": ("bench.peer_redis", "RedisDriver", {"fsync": "everysec"}),
    "redis-always": ("bench.peer_redis", "RedisDriver", {"fsync": "always"}),
    "redis-benchmark": ("bench.peer_redis", "RedisBenchmarkDriver", {"fsync": "everysec"}),
    "nats": ("bench.peer_nats", "NatsDriver", {}),
    "rabbitmq": ("bench.peer_rabbitmq", "RabbitDriver", {}),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a tenth of the full sizes (same as --scale 0.1)")
    p.add_argument("--scale", type=float, default=None, help="size factor, 1.0 = full run")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ",".join(SYSTEMS))
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ",".join(WORKLOADS))
    p.add_argument("--out", default=str(RESULTS_DIR), help="results directory")
    p.add_argument("--no-install", action="store_true", help="do not install missing peers")
    p.add_argument("--disk-seconds", type=float, default=3.0, help="seconds per disk group size")
    p.add_argument("--no-chart", action="store_true", help="write JSON and table only")
    return p.parse_args(argv)


def install_peers() -> str | None:
    """Run bench/install-peers.sh; returns an error text instead of raising."""
    try:
        subprocess.run(["bash", str(BENCH_DIR / "install-peers.sh")], check=True, timeout=900)
        return None
    except (subprocess.SubprocessError, OSError) as exc:
        return f"install-peers.sh failed: {exc}"


def make_driver(key: str):
    module_name, cls_name, kwargs = SYSTEMS[key]
    module = importlib.import_module(module_name)
    if hasattr(module, "available") and not module.available():
        raise RuntimeError(f"{key}: server binary not installed (bench/install-peers.sh)")
    driver = getattr(module, cls_name)(**kwargs)
    driver.factory = (module_name, cls_name, kwargs)  # rebuilds its client in a consumer process
    return driver


async def bench_system(driver, scale: Scale, workloads: set[str], workdir: Path) -> list[Row]:
    """Start the system's servers, run the workloads, always stop the servers."""
    try:
        await asyncio.to_thread(driver.start, workdir)
        sampler = ProcSampler(driver.session_ids())
        await driver.connect()
        return await run_all(driver, sampler, scale, workloads)
    finally:
        try:
            await driver.close()
        finally:
            await asyncio.to_thread(driver.stop)


def keep_logs(workdir: Path, dest: Path) -> None:
    """Copy the servers' logs of a system that had an error next to the results (bounded: *.log only)."""
    dest.mkdir(parents=True, exist_ok=True)
    for log in workdir.rglob("*.log"):
        if log.is_file():
            shutil.copy(log, dest / str(log.relative_to(workdir)).replace("/", "_"))


def run_systems(keys: list[str], scale: Scale, workloads: set[str], tmp_root: Path,
                log_dir: Path) -> tuple[list[Row], dict]:
    rows: list[Row] = []
    systems: dict[str, dict] = {}
    for key in keys:
        print(f"== {key}", flush=True)
        started = time.monotonic()
        try:
            driver = make_driver(key)
        except Exception as exc:
            systems[key] = {"skipped": f"{type(exc).__name__}: {exc}"}
            print(f"  skipped: {exc}", flush=True)
            continue
        workdir = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=tmp_root))
        os.chmod(workdir, 0o777)
        try:
            rows += uvloop.run(bench_system(driver, scale, workloads, workdir))
        except Exception as exc:
            rows.append(Row(driver.name, "start", error=f"{type(exc).__name__}: {exc}"[:1500]))
            print(f"  failed: {str(exc)[:1500]}", flush=True)
        finally:
            if any(r.error for r in rows if r.system == driver.name) or (rows and rows[-1].workload == "start"):
                keep_logs(workdir, log_dir / key)
            shutil.rmtree(workdir, ignore_errors=True)
        systems[key] = {"name": driver.name, "client": driver.client, "ack_semantics": driver.ack_semantics,
                        "seconds": round(time.monotonic() - started, 1)}
    return rows, systems


def commit() -> str | None:
    """The Strata commit measured: $STRATA_BENCH_COMMIT (a run from an exported tree), else git's HEAD."""
    if os.environ.get("STRATA_BENCH_COMMIT"):
        return os.environ["STRATA_BENCH_COMMIT"]
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=BENCH_DIR, capture_output=True,
                              text=True, timeout=10)
        return done.stdout.strip() or None
    except (subprocess.SubprocessError, OSError):
        return None


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024 ** 3
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(mem_gb, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "note": "2 cores shared with other engineers' test runs: absolute numbers drift; "
                    "compare systems within one run"}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    factor = args.scale if args.scale is not None else (0.1 if args.quick else 1.0)
    scale = Scale(factor)
    keys = [k for k in args.systems.split(",") if k]
    unknown = [k for k in keys if k not in SYSTEMS]
    if unknown:
        print(f"unknown systems: {unknown}; known: {list(SYSTEMS)}", file=sys.stderr)
        return 2
    workloads = {w for w in args.workloads.split(",") if w}
    if "consume-backlog" in workloads:
        workloads.add("produce-1x1")  # the backlog it reads
    install_error = None
    if not args.no_install and any(not k.startswith("strata") for k in keys):
        install_error = install_peers()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="strata-bench-") as tmp:
        tmp_root = Path(tmp)
        os.chmod(tmp_root, 0o711)  # servers running as their own user (rabbitmq) must traverse it
        print(f"== disk limit ({tmp_root})", flush=True)
        disk_limit = disk.measure(tmp_root / "disk", args.disk_seconds)
        print(f"  {disk_limit.mb_per_s:.0f} MB/s best group commit, {disk_limit.fsyncs_per_s:.0f} fsyncs/s", flush=True)
        rows, systems = run_systems(keys, scale, workloads, tmp_root, Path(args.out) / "logs")
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
              "seconds": round(time.time() - started, 1), "scale": factor, "commit": commit(), "machine": machine(),
              "disk": disk_limit.to_dict(), "systems": systems, "install_error": install_error,
              "rows": [r.to_dict() for r in rows]}
    paths = report.write(result, Path(args.out), chart=not args.no_chart)
    print(report.table(result))
    print(f"\nwritten: {', '.join(str(p) for p in paths)}")
    return 0 if rows and not any(r.error for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
