"""Small socket helpers shared by the launchers, the perf tools and the tests.

`free_port` asks the kernel for a port that is free on loopback right now. Nothing reserves it:
a caller that hands it to a child process must tolerate the rare race where another process
takes it first (the launchers retry on a failed bind).
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` at the moment of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
