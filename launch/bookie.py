"""`strata bookie` as a child process: the one bookie launcher of `strata standalone`,
`strata cluster`, `strata perf bookie|ledger` and the tests.

    with BookieProcess.start(tmp_path / "b1") as bookie:        # waits for "bookie ready"
        client = BookieClient(bookie.address, config=default_config())
        bookie.kill9()            # crash it
        bookie.restart()          # same data dir and port
        assert bookie.stop() == 0 # SIGTERM: flush, deregister, exit 0

`data_dir` is the bookie's own `--data-dir` (segments, indexes, checkpoint). By default it
listens on 127.0.0.1 (`--host`; `host=None` leaves the bind host to the settings, as
`strata standalone` does) and logs to `<data_dir's parent>/bookie-<port>.log`. The rest is
process.NodeProcess: the ready line `bookie ready <host>:<port>` (cli/bookie_cmd.py prints it on
stdout), bounded waits, death with the process that started it.

What must hold: a bookie keeps its port and data dir for the object's life, so a restart comes
back at the same address with its data (ledger metadata names bookies by address); a settings
file is passed as an absolute path, so it means the same whatever the child's working directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from common.net import free_port
from launch.process import READY_TIMEOUT_S, NodeProcess

HOST = "127.0.0.1"
READY_LINE = "bookie ready "   # + <advertised host>:<port>


class BookieProcess(NodeProcess):
    """One `strata bookie`. metadata_url: the store it registers in (None: it does not register).
    config_path: its settings file. extra_args: more flags (test seams); read at every spawn."""

    kind = "bookie"

    def __init__(self, data_dir: Path, port: int, *, metadata_url: str | None = None,
                 config_path: str | Path | None = None, extra_args: list[str] | None = None,
                 host: str | None = HOST, log_path: Path | None = None, name: str | None = None,
                 **node: Any) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.host = host
        self.metadata_url = metadata_url
        self.config_path = str(Path(config_path).resolve()) if config_path is not None else None
        self.extra_args = list(extra_args or [])
        super().__init__(name or f"bookie-{port}", log_path or self.data_dir.parent / f"bookie-{port}.log", **node)

    @classmethod
    def start(cls, data_dir: Path, *, port: int | None = None, ready_timeout_s: float = READY_TIMEOUT_S,
              **kwargs: Any) -> BookieProcess:
        """A bookie on `port` (a free one by default), started and serving."""
        bookie = cls(data_dir, port or free_port(), **kwargs)
        try:
            bookie.launch(ready_timeout_s)
        except BaseException:
            bookie.close()
            raise
        return bookie

    @property
    def address(self) -> str:
        return f"{self.host or HOST}:{self.port}"

    @property
    def ready_marker(self) -> str:
        return READY_LINE

    def brief_details(self) -> dict[str, Any]:
        return {"port": self.port}

    def prepare(self) -> None:
        super().prepare()
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "cli.main", "bookie", "--data-dir", str(self.data_dir), "--port", str(self.port)]
        if self.host is not None:
            cmd += ["--host", self.host]
        if self.metadata_url:
            cmd += ["--metadata-url", self.metadata_url]
        if self.config_path:
            cmd += ["--config", self.config_path]
        return cmd + self.extra_args

