"""Long runs (grow, refine search, self-play, matches): stopping cleanly and finding
dead runs.

A long run records its process id in its ``runs`` row (``counts.pid``) while
it is ``running``; a later run marks rows whose process is gone as
``interrupted``.

Ctrl-C stops a run within seconds, whatever its engines do: while the run
waits for work in flight (:func:`collect_or_abandon`), the work is abandoned
at once: the worker processes are killed, or this process's engines closed
(killed if they do not quit at once). What was finished and recorded stays;
the command says what it dropped and exits with code 130
(:func:`bookgen.cli_support.exit_if_interrupted`); rerunning it continues. Elsewhere (recording a
result, committing) Ctrl-C only sets the stop event, and the run stops at
its next wait.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from bookgen.store import Book
from bookgen.workers.pool import TaskRunner

__all__ = ["Interrupted", "RunStop", "collect_or_abandon", "in_flight",
           "mark_dead_runs", "stop_on_interrupt", "uncounted_on_failure"]

R = TypeVar("R")
T = TypeVar("T")


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


def collect_or_abandon(runner: TaskRunner[T, R], stop: RunStop) -> list[R] | None:
    """``runner.collect()``; None when Ctrl-C came (before or while waiting): the
    runner is then terminated, its tasks in flight abandoned and its engines
    killed."""
    try:
        with stop.abortable():
            return runner.collect()
    except Interrupted:
        runner.terminate()
        return None


def in_flight(count: int, noun: str) -> str:
    """``"2 expansions in flight dropped"``, for a run's stop reason."""
    return f"{count} {noun}{'' if count == 1 else 's'} in flight dropped"


def mark_dead_runs(book: Book) -> int:
    """Mark 'running' runs of other processes as 'interrupted'.

    Runs are written by the book's one writer (:mod:`bookgen.lock`), and the
    caller holds the writer lock: a run still 'running' under another process
    id belongs to a writer that died (a live one would hold the lock), even if
    its process id has since been reused."""
    if not book.writing:
        raise RuntimeError("mark_dead_runs needs the book open for writing")
    rows = book.conn.execute(
        "SELECT id, json_extract(counts, '$.pid') FROM runs WHERE status = 'running'").fetchall()
    dead = [(run_id,) for run_id, pid in rows if pid != os.getpid()]
    if dead:
        with book.transaction():
            book.conn.executemany("UPDATE runs SET status = 'interrupted' WHERE id = ?", dead)
    return len(dead)


@contextmanager
def uncounted_on_failure(*counters: object) -> Iterator[None]:
    """For recording one result: the run's counters (dataclass instances) are
    updated in the block and written in the same transaction as the result.
    If the block raises (a full disk: the transaction rolled back), they get
    their values back, so that the run's last row does not count work that
    was not committed."""
    saved = [copy.deepcopy(vars(counter)) for counter in counters]
    try:
        yield
    except BaseException:
        for counter, values in zip(counters, saved):
            vars(counter).update(values)
        raise
