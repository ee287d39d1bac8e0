"""The parent-death helper: start a child that the kernel signals when its parent dies.

    proc = spawn(cmd, on_parent_death=signal.SIGKILL, stdout=log, cwd=...)   # Popen's keywords
    proc = spawn(cmd, on_parent_death=None, ...)                              # outlives us (detached)

On Linux the child sets PR_SET_PDEATHSIG (prctl) between fork and exec, so a kill -9 of the
process that started it takes it down too and a restart finds its ports free. Elsewhere (no
prctl) the child is started without it.

What must hold:
- The signal follows the forking *thread*, not the process: a child forked from a short-lived
  thread (asyncio.to_thread, an executor shut down with its loop) would be killed when that
  thread exits. So a child is forked on the main thread, or else on one long-lived spawner
  thread that lives as long as the process.
- A parent that died between the fork and the prctl is caught: the child then signals itself.
- Every hand-over to the spawner thread is bounded (a full queue or a stuck fork raises).
- This is the only PR_SET_PDEATHSIG in the product.
"""

from __future__ import annotations

import ctypes
import functools
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from common.errors import TimeoutExpired

T = TypeVar("T")

PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
SPAWN_TIMEOUT_S = 30.0  # bound on handing a fork to the spawner thread and on its answer
SPAWN_QUEUE_MAX = 16    # forks waiting for the spawner thread


def _libc() -> Any:
    """libc with prctl, loaded in the parent (not between fork and exec); None off Linux."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "prctl") else None


_LIBC = _libc()


def _set_parent_death_signal(sig: int, parent_pid: int) -> None:
    """In the child, before exec: ask for `sig` when the parent dies; if it already has, take it now."""
    if _LIBC is None:
        return
    _LIBC.prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


class _Spawner:
    """Runs fork calls on one long-lived daemon thread (see the module docstring)."""

    def __init__(self) -> None:
        self._requests: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue(
            maxsize=SPAWN_QUEUE_MAX)
        self._thread = threading.Thread(target=self._run, name="launch-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            fn, reply = self._requests.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # handed to the caller
                reply.put((False, exc))

    def call(self, fn: Callable[[], T]) -> T:
        reply: queue.Queue[Any] = queue.Queue(maxsize=1)
        try:
            self._requests.put((fn, reply), timeout=SPAWN_TIMEOUT_S)
            ok, value = reply.get(timeout=SPAWN_TIMEOUT_S)
        except (queue.Full, queue.Empty):
            raise TimeoutExpired("the spawner thread did not start the process",
                                 timeout_s=SPAWN_TIMEOUT_S) from None
        if not ok:
            raise value
        return cast(T, value)


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _on_long_lived_thread(fn: Callable[[], T]) -> T:
    """`fn()` on a thread that outlives the child it forks: this one if it is the main thread."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner.call(fn)


def spawn(cmd: Sequence[str], *, on_parent_death: int | None, **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(cmd, **popen_kwargs)`, the child getting signal `on_parent_death` when
    this process dies (None: it outlives us). Raises what Popen raises (a missing binary: OSError)."""
    if on_parent_death is None:
        return subprocess.Popen(cmd, **popen_kwargs)
    preexec = functools.partial(_set_parent_death_signal, on_parent_death, os.getpid())
    return _on_long_lived_thread(lambda: subprocess.Popen(cmd, preexec_fn=preexec, **popen_kwargs))
