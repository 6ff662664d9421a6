"""Long runs (grow, refine search, self-play): stopping cleanly and finding dead runs.

A long run records its process id in its ``runs`` row (``counts.pid``) while
it is ``running``; a later run marks rows whose process is gone as
``interrupted``. Ctrl-C sets an event instead of raising, so the work in
flight finishes and is recorded.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from bookgen.store import Book


@contextmanager
def stop_on_interrupt(second_raises: bool = False) -> Iterator[threading.Event]:
    """While active, Ctrl-C sets the yielded event instead of raising.

    With ``second_raises``, a second Ctrl-C raises :class:`KeyboardInterrupt`
    (for work in flight that may take minutes to finish).
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(*_: object) -> None:
        if second_raises and stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _alive(pid: object) -> bool:
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except (OSError, TypeError, ValueError):
        return False
    return True


def mark_dead_runs(book: Book) -> int:
    """Mark 'running' runs whose process no longer exists as 'interrupted'."""
    rows = book.conn.execute(
        "SELECT id, json_extract(counts, '$.pid') FROM runs WHERE status = 'running'").fetchall()
    dead = [(run_id,) for run_id, pid in rows if not _alive(pid)]
    if dead:
        with book.transaction():
            book.conn.executemany("UPDATE runs SET status = 'interrupted' WHERE id = ?", dead)
    return len(dead)
