"""A function mapped over tasks by forked worker processes.

The workers are forked, so they inherit this process's memory (large arrays
and lookup tables set up before the call need no copying or pickling), and
return their results in task order. Only the function's results travel back.
With one worker, or where fork is not available, the tasks run in this
process instead, in the same order.

fork, not spawn or forkserver: those re-import ``__main__``, which fails (and
makes the pool respawn workers forever) when the caller runs from stdin or
``-c``. Workers ignore Ctrl-C (the main process decides, and stops them) and
die with the process that forked them, even after ``kill -9``. Create a pool
from a thread that lives as long as it does (the main thread): see
:mod:`bookgen.children`.

:func:`fork_map` is an ordered iterator; the tasks are consumed lazily by a
thread of this process, so they may be a generator. :class:`Feed` is such a
generator for work that grows as its results come in (a breadth-first walk):
a first-in-first-out queue of items, handed out in batches, that the consumer
of the results adds to.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Generic, TypeVar

from bookgen.children import die_with_parent
from bookgen.signals import ignore_interrupts

__all__ = ["Feed", "fork_available", "fork_map"]

T = TypeVar("T")
R = TypeVar("R")


def fork_available() -> bool:
    """Whether this platform can fork worker processes."""
    return "fork" in multiprocessing.get_all_start_methods()


def _init_worker(parent: int) -> None:
    """Initializer of the forked workers: ignore Ctrl-C, die with ``parent``."""
    ignore_interrupts()
    die_with_parent(parent)


def _pool(workers: int) -> Any:
    return multiprocessing.get_context("fork").Pool(workers, initializer=_init_worker,
                                                    initargs=(os.getpid(),))


def fork_map(function: Callable[[T], R], tasks: Iterable[T], workers: int, *,
             chunksize: int = 1) -> Generator[R, None, None]:
    """``map(function, tasks)``, in order; on ``workers`` forked processes when
    more than one (``function`` must be a module-level function). ``tasks`` is
    consumed by a thread of this process. Closing the iterator early (or an
    exception while it runs) kills the workers."""
    if workers <= 1 or not fork_available():
        yield from map(function, tasks)
        return
    with _pool(workers) as pool:
        yield from pool.imap(function, tasks, chunksize)


class Feed(Generic[T]):
    """Tasks for :func:`fork_map` that its consumer adds to: a first-in-first-out
    queue of items, handed out as lists of up to ``batch`` items in queue order.

    The consumer :meth:`put` s items (before iterating: the first ones), and after
    reading each result puts the items it gives rise to and calls
    :meth:`answered`. :meth:`tasks` ends once the queue is empty and every task
    handed out was answered. It hands out a short list only while fewer than
    ``workers`` tasks are unanswered (so that no worker waits for a full one), and
    keeps at most ``ahead`` tasks unanswered. Call :meth:`close` (in a ``finally``)
    before closing the results' iterator: a pool waits for the thread that reads
    the tasks."""

    def __init__(self, batch: int, workers: int = 1, ahead: int = 4) -> None:
        self.batch = batch
        self.workers = max(1, workers)
        self.ahead = max(ahead, self.workers)
        self._queue: deque[list[T]] = deque()
        self._size = 0
        self._unanswered = 0
        self._closed = False
        self._changed = threading.Condition()

    def put(self, items: list[T]) -> None:
        """Add ``items`` at the end of the queue."""
        if items:
            with self._changed:
                self._queue.append(items)
                self._size += len(items)
                self._changed.notify_all()

    def answered(self) -> None:
        """One more task's result read (and its items put)."""
        with self._changed:
            self._unanswered -= 1
            self._changed.notify_all()

    def close(self) -> None:
        """Stop handing out tasks."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _ready(self) -> bool:
        if self._closed or (not self._size and not self._unanswered):
            return True
        if self._unanswered >= self.ahead or not self._size:
            return False
        return self._size >= self.batch or self._unanswered < self.workers

    def tasks(self) -> Iterator[list[T]]:
        """The batches, in queue order, as they become ready."""
        while True:
            with self._changed:
                self._changed.wait_for(self._ready)
                if self._closed or not self._size:
                    return
                task: list[T] = []
                while self._queue and len(task) < self.batch:
                    items = self._queue.popleft()
                    room = self.batch - len(task)
                    if len(items) > room:
                        self._queue.appendleft(items[room:])
                        items = items[:room]
                    task += items
                self._size -= len(task)
                self._unanswered += 1
            yield task
