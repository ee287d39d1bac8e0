"""Start real `strata bookie` processes: free port, a data dir, bounded waits, cleanup.

Used by `strata perf bookie` (which must work from an installed package, so this is product
code, like perf/standalone_proc.py) and by the tests:

    with BookieProcess.start(tmp_path / "b1") as bookie:        # waits for "bookie ready"
        client = BookieClient(bookie.address, config=default_config())
        ...
        bookie.kill9()            # crash it
        bookie.restart()          # same data dir and port

    with bookie_cluster(tmp_path, 3, metadata_url=url) as bookies: ...   # N bookies

Each process runs `python -m cli.main bookie ...` with this interpreter, from the directory that
holds the `cli` package (the repo root in a source tree); its stderr goes to a file in the data
dir's parent (included in the error of a failed start). Every wait is bounded; a bookie that
does not print its ready line in `ready_timeout_s` is killed and the start raises with its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from common.invariant import present
from common.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


class BookieProcess:
    def __init__(self, data_dir: Path, port: int, *, metadata_url: str | None = None,
                 config_path: Path | None = None, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()  # the child runs in REPO_ROOT
        self.port = port
        self.metadata_url = metadata_url
        self.config_path = Path(config_path).resolve() if config_path else None
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"bookie-{port}.log"
        self.starts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, data_dir: Path, *, port: int | None = None, **kwargs) -> BookieProcess:
        bookie = cls(data_dir, port or free_port(), **kwargs)
        bookie.launch()
        return bookie

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "cli.main", "bookie", "--data-dir", str(self.data_dir),
               "--port", str(self.port), "--host", "127.0.0.1"]
        if self.metadata_url:
            cmd += ["--metadata-url", self.metadata_url]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        return cmd + self.extra_args

    def launch(self, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start the process and wait (bounded) for its ready line."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), cwd=REPO_ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=log)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + ready_timeout_s
        stdout = present(self.proc.stdout, "stdout is a pipe")
        os.set_blocking(stdout.fileno(), False)
        buffer = b""
        while time.monotonic() < deadline:
            chunk = stdout.read()
            if chunk:
                buffer += chunk
                if b"bookie ready" in buffer:
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.kill9()
        raise RuntimeError(f"bookie on port {self.port} did not become ready "
                           f"(rc={self.proc.returncode}); log:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """Crash the bookie: SIGKILL, no flush."""
        if self.alive():
            present(self.proc, "the process was started").send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(STOP_TIMEOUT_S)

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code (kill -9 after the bound)."""
        if not self.alive():
            return self.proc.returncode if self.proc else 0
        proc = present(self.proc, "the process was started")
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise RuntimeError(f"bookie on port {self.port} ignored SIGTERM for {timeout_s}s") from None

    def restart(self, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start again on the same port and data dir (after kill9 or terminate)."""
        if self.alive():
            self.terminate()
        self.launch(ready_timeout_s)

    def close(self) -> None:
        if self.alive():
            try:
                self.terminate()
            except RuntimeError:
                pass
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> BookieProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def bookie_cluster(base_dir: Path, count: int, **kwargs) -> Iterator[list[BookieProcess]]:
    """`count` bookies, each in `base_dir/bookie-<i>`, started one after the other."""
    bookies: list[BookieProcess] = []
    try:
        for i in range(count):
            bookies.append(BookieProcess.start(Path(base_dir) / f"bookie-{i}", **kwargs))
        yield bookies
    finally:
        for bookie in bookies:
            bookie.close()
