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
thread of this process, so they may be a generator.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from bookgen.children import die_with_parent
from bookgen.signals import ignore_interrupts

__all__ = ["fork_available", "fork_map"]

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
             chunksize: int = 1) -> Iterator[R]:
    """``map(function, tasks)``, in order; on ``workers`` forked processes when
    more than one (``function`` must be a module-level function). ``tasks`` is
    consumed by a thread of this process. Closing the iterator early (or an
    exception while it runs) kills the workers."""
    if workers <= 1 or not fork_available():
        yield from map(function, tasks)
        return
    with _pool(workers) as pool:
        yield from pool.imap(function, tasks, chunksize)
