"""Small socket helpers shared by the launchers, the perf tools and the tests.

`free_port` hands out a TCP port that is free on loopback right now. Nothing reserves it: a
caller that gives it to a child process races any other process that binds it first. Two rules
keep that race rare:
- ports come from below the kernel's ephemeral range (`ip_local_port_range`, 32768 and up on
  Linux), so an outgoing connection's source port, which the kernel takes from that range, can
  never be the port a server is about to bind (CI lost a run to exactly that: a broker's Kafka
  port, picked with bind(0), was taken by a client socket before the broker bound it);
- one process never hands out the same port twice, so the ports of one cluster are distinct.
"""

from __future__ import annotations

import random
import socket
import threading

PORT_LOW = 20000
PORT_HIGH = 32000  # below the ephemeral range on Linux (32768-60999)
_ATTEMPTS_MAX = 1000

_given: set[int] = set()
_lock = threading.Lock()


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` at the moment of the call, not handed out before by this process."""
    with _lock:
        for _ in range(_ATTEMPTS_MAX):
            port = random.randint(PORT_LOW, PORT_HIGH)
            if port not in _given and _bindable(host, port):
                _given.add(port)
                return port
        if len(_given) > (PORT_HIGH - PORT_LOW) // 2:
            _given.clear()  # a long-lived process (a test run) may come back to old ports
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
