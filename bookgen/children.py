"""Child processes that die with their parent.

bookgen starts worker processes and USI engines. An engine runs in its own
session (so that the terminal's Ctrl-C reaches bookgen only, which then
decides what to stop), so nothing would stop it when bookgen is killed with
``kill -9``. On Linux every child asks the kernel for ``SIGKILL`` when its
parent goes (``prctl(PR_SET_PDEATHSIG)``), then checks that the parent is
still the one that started it (it may have died before the request).

The kernel sends the signal when the *thread* that created the child exits,
not the process: create children from a thread that lives as long as they
do. bookgen creates them from the main thread (worker pools are filled by
``submit`` in the main thread; engines are started by the thread that runs
the work). Elsewhere (macOS) these functions do nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

__all__ = ["die_with_parent", "engine_preexec"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    return prctl


# Resolved once, before any fork: the child of a fork only calls it.
_prctl = _load_prctl()


def die_with_parent(parent: int) -> bool:
    """Ask for SIGKILL when the parent dies; kill this process now if ``parent``
    (the pid that started it) is gone already. False where unsupported."""
    if _prctl is None:
        return False
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def engine_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` making the child die with
    this process; None where unsupported or when called off the main thread
    (a short-lived thread's children would die with the thread)."""
    if _prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    return lambda: _child_dies_with(parent)


def _child_dies_with(parent: int) -> None:
    # Runs in the forked child before exec: the signal request survives exec.
    die_with_parent(parent)

