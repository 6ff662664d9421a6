"""Signals: what Ctrl-C does inside bookgen, and the fault points of the crash tests.

The terminal sends Ctrl-C (SIGINT) to the whole process group: to bookgen and
to every worker process it started. Only the main process decides what a
Ctrl-C stops; a worker ignores it (:func:`ignore_interrupts`) and is stopped
by its parent. The main process takes Ctrl-C over in two ways:

- :func:`stop_on_interrupt`: a long run (grow, refine search, self-play, a
  match) turns Ctrl-C into a :class:`RunStop` event that the run checks
  between steps; inside :meth:`RunStop.abortable` (waiting for work in
  flight) it raises :class:`Interrupted` instead, so that the wait ends at
  once (:func:`bookgen.workers.runcontrol.collect_or_abandon`);
- :func:`interrupts_held`: a COMMIT is never cut short; a Ctrl-C that comes
  during it is recorded and handed to the caller afterwards.

:func:`fault_point` marks the places where the crash and interrupt tests
kill, stop or interrupt the process (``BOOKGEN_FAULT``).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Interrupted", "RunStop", "fault_point", "ignore_interrupts", "interrupts_held",
           "stop_on_interrupt"]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a run waited for work in flight; that work is abandoned."""


class RunStop(threading.Event):
    """Set when the run should stop: by Ctrl-C (``interrupted`` true) or by the
    run itself (a budget, ``--sprt``)."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False
        self._abortable = 0

    @contextmanager
    def abortable(self) -> Iterator[None]:
        """While active, Ctrl-C raises :class:`Interrupted` (work here may be dropped)."""
        if self.interrupted:
            raise Interrupted
        self._abortable += 1
        try:
            yield
        finally:
            self._abortable -= 1

    def interrupt(self) -> None:
        """Record a Ctrl-C (one the book held back during a commit, for example)."""
        self.interrupted = True
        self.set()

    def _on_sigint(self, *_: object) -> None:
        self.interrupt()
        if self._abortable:
            raise Interrupted


_active: RunStop | None = None


@contextmanager
def stop_on_interrupt() -> Iterator[RunStop]:
    """While active, Ctrl-C sets the yielded :class:`RunStop` instead of raising
    (and raises :class:`Interrupted` inside its :meth:`RunStop.abortable`).

    Nested uses (``refine mistakes --iterate`` runs grow and refine search)
    share the outer one: a Ctrl-C stops them all.
    """
    global _active
    if _active is not None:
        yield _active
        return
    stop = RunStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGINT, stop._on_sigint)
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        signal.signal(signal.SIGINT, previous)


@contextmanager
def interrupts_held() -> Iterator[list[int]]:
    """Record SIGINT instead of raising it; yields the list of signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda number, _frame: received.append(number))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


_fault_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Act here when BOOKGEN_FAULT names this point (crash and interrupt tests).

    ``BOOKGEN_FAULT=NAME[@N][:stop|:SIGINT]``: kill the process (SIGKILL) at
    the point; with ``:stop`` stop it instead (SIGSTOP), so that a test can act
    while it is there and then let it go on (SIGCONT); with ``:SIGINT`` send it
    a Ctrl-C. ``@N`` acts at the N-th time the process passes the point and at
    no other; without it a kill or a Ctrl-C comes every time, a stop the first
    time only."""
    fault = os.environ.get("BOOKGEN_FAULT")
    if not fault:
        return
    point, _, action = fault.partition(":")
    point, at, count = point.partition("@")
    if point != name:
        return
    hits = _fault_hits[name] = _fault_hits.get(name, 0) + 1
    if at:
        if hits != int(count):
            return
    elif action == "stop" and hits > 1:
        return
    if action == "":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "SIGINT":
        os.kill(os.getpid(), signal.SIGINT)


def ignore_interrupts() -> None:
    """Ignore Ctrl-C (SIGINT) in this process from now on: for worker processes,
    whose parent decides what to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
