"""A client-side bound on each PostgreSQL transaction, for servers that hang rather than fail.

`statement_timeout` and `lock_timeout` are enforced by the server, and TCP keepalives only
notice a peer that stops acknowledging; a server that is stopped (SIGSTOP, a frozen VM) or a
proxy that holds the connection open would leave a call blocked for ever. So every transaction
is armed here with its deadline and its connection's socket; one thread checks the deadlines
every `TICK_S` and shuts down (`shutdown(SHUT_RDWR)`) the socket of any transaction past its
deadline. The blocked driver call then fails at once with a connection error, which the adapter
turns into `MetadataUnavailable`, and the connection is invalidated rather than reused.

What must hold: a socket is shut down only while its transaction is armed (arm/disarm and the
check run under one lock), and `disarm()` tells the caller whether it fired, so a connection
that was cut is never returned to the pool.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time

log = logging.getLogger("strata.metadata.watchdog")

TICK_S = 0.05


class Watchdog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # token -> (monotonic deadline, socket fd); an entry exists only while armed
        self._armed: dict[int, tuple[float, int]] = {}
        self._fired: set[int] = set()  # tokens cut and not yet disarmed
        self._tokens = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None  # started on first arm()

    def arm(self, fd: int, timeout_s: float) -> int:
        with self._lock:
            token = next(self._tokens)
            self._armed[token] = (time.monotonic() + timeout_s, fd)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="metadata-watchdog", daemon=True)
                self._thread.start()
            return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True if the deadline passed and the socket was shut down."""
        with self._lock:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            now = time.monotonic()
            with self._lock:
                for token, (deadline, fd) in list(self._armed.items()):
                    if now >= deadline:
                        del self._armed[token]
                        self._fired.add(token)
                        _shutdown(fd)


def _shutdown(fd: int) -> None:
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
        log.warning("metadata transaction passed its deadline; connection cut")
    except OSError:
        pass
    finally:
        sock.close()
