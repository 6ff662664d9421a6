"""A pool of spawned worker processes, each initialised once (its own engine or
model), returning results in completion order. Used by grow, refine search,
self-play and matches; a worker that dies breaks the pool with an error instead
of a hang. :class:`LocalRunner` and :class:`PoolRunner` put one task function
behind the same submit/collect interface, in this process or in a pool.

Workers ignore SIGINT (the terminal sends Ctrl-C to the whole process group;
the main process decides what to stop) from their first instruction on: SIGINT
is blocked while a worker is spawned, so that the new interpreter starts with it
blocked and unblocks it only once it ignores it (as :mod:`multiprocessing`'s
resource tracker does); a Ctrl-C while a worker starts up cannot make it print
a ``KeyboardInterrupt`` traceback. Workers die with the main process, even
after ``kill -9`` (:mod:`bookgen.children`); their engines die with them. A
worker whose parent is gone exits quietly, without a traceback.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any, Generic, Protocol, TypeVar

from bookgen.children import die_with_parent
from bookgen.signals import ignore_interrupts

__all__ = ["BrokenProcessPool", "GroupedRunner", "LocalRunner", "PoolRunner", "TaskRunner",
           "WorkerPool"]
"""``BrokenProcessPool``: what a :class:`PoolRunner` raises when a worker died."""

R = TypeVar("R")
T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)  # a runner of T tasks also runs narrower ones


class _WorkerProcess(SpawnProcess):
    """A spawned worker that ignores Ctrl-C, dies with its parent and never outlives
    it noisily."""

    def start(self) -> None:
        # The signal mask survives fork and exec: the worker starts with SIGINT
        # blocked. Here a Ctrl-C meanwhile is only delayed (another thread takes it,
        # or it waits until the mask is restored).
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def run(self) -> None:
        # BaseProcess sets _parent_pid; typeshed does not declare the private attribute.
        parent = self._parent_pid  # type: ignore[attr-defined]
        ignore_interrupts()  # discards a Ctrl-C held back
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        die_with_parent(parent)
        try:
            super().run()
        except BaseException:
            if os.getppid() != parent:
                os._exit(1)  # the parent died: its pipes broke, nothing to report to
            raise


class _WorkerContext(SpawnContext):
    # spawn, not fork: a parent that has loaded torch (OpenMP thread pools) or
    # started engine reader threads is not safe to fork.
    Process = _WorkerProcess


class WorkerPool(Generic[R]):
    """``workers`` processes running ``initializer(*initargs)`` once each."""

    def __init__(self, workers: int, initializer: Callable[..., None],
                 initargs: tuple[Any, ...], queued_per_worker: int = 1) -> None:
        self.workers = workers
        self.queued_per_worker = queued_per_worker
        # The processes are started by submit(): call it from the thread that
        # owns the pool (the main thread), as they die when that thread ends.
        self.executor = ProcessPoolExecutor(
            workers, mp_context=_WorkerContext(), initializer=initializer,
            initargs=initargs)
        self.futures: set[Future[R]] = set()

    def capacity(self) -> int:
        """How many tasks may be in flight (queued ones hide the round trip)."""
        return self.workers * self.queued_per_worker

    def submit(self, function: Callable[..., R], *args: Any) -> None:
        self.futures.add(self.executor.submit(function, *args))

    def collect(self) -> list[R]:
        """Block until at least one task is done; return all done ones."""
        done, self.futures = wait(self.futures, return_when=FIRST_COMPLETED)
        return [future.result() for future in done]

    def close(self) -> None:
        # Queued tasks are cancelled by the executor itself: a future cancelled from
        # here could later be failed by a breaking pool (InvalidStateError).
        self.executor.shutdown(wait=True, cancel_futures=True)

    def terminate(self) -> None:
        """Stop now: kill the workers (their engines die with them), abandoning
        the tasks in flight."""
        for process in list((getattr(self.executor, "_processes", None) or {}).values()):
            process.kill()
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.futures = set()


class TaskRunner(Protocol[T_contra, R]):
    """Runs tasks of one kind; at most :meth:`capacity` in flight, on
    :meth:`live_workers` workers (a progress bar shows them). The Ray backend
    (:class:`bookgen.workers.cluster.RayRunner`) is the third kind."""

    def capacity(self) -> int: ...
    def live_workers(self) -> int: ...
    def submit(self, task: T_contra) -> None: ...
    def collect(self) -> list[R]: ...
    def close(self) -> None: ...
    def terminate(self) -> None: ...


class LocalRunner(Generic[T, R]):
    """Tasks run one at a time in this process, when collected."""

    def __init__(self, function: Callable[[T], R],
                 on_close: Callable[[], None] | None = None) -> None:
        self.function = function
        self.on_close = on_close
        self.queue: list[T] = []

    def capacity(self) -> int:
        return 1

    def live_workers(self) -> int:
        return 1

    def submit(self, task: T) -> None:
        self.queue.append(task)

    def collect(self) -> list[R]:
        return [self.function(self.queue.pop(0))]

    def close(self) -> None:
        self.queue.clear()
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close()

    def terminate(self) -> None:
        self.close()


class PoolRunner(Generic[T, R]):
    """Tasks run by ``function`` (a module-level function) in a :class:`WorkerPool`."""

    def __init__(self, workers: int, function: Callable[[T], R],
                 initializer: Callable[..., None], initargs: tuple[Any, ...],
                 queued_per_worker: int = 1) -> None:
        self.function = function
        self.pool: WorkerPool[R] = WorkerPool(workers, initializer, initargs,
                                              queued_per_worker)

    def capacity(self) -> int:
        return self.pool.capacity()

    def live_workers(self) -> int:
        return self.pool.workers

    def submit(self, task: T) -> None:
        self.pool.submit(self.function, task)

    def collect(self) -> list[R]:
        return self.pool.collect()

    def close(self) -> None:
        self.pool.close()

    def terminate(self) -> None:
        self.pool.terminate()


class GroupedRunner(Generic[T, R]):
    """Tasks sent in groups of ``group`` to a runner of groups (``inner``, whose
    task is a list of tasks and whose result the list of their results):
    a worker then has a whole group to work on at once (grow's
    ``--parallel-searches``). A group is sent when it is full, or, part
    full, when results are collected. Each in-flight group of ``inner``
    counts ``group`` tasks of :meth:`capacity`."""

    def __init__(self, inner: TaskRunner[list[T], list[R]], group: int) -> None:
        self.inner = inner
        self.group = max(1, group)
        self.buffer: list[T] = []

    def capacity(self) -> int:
        return self.inner.capacity() * self.group

    def live_workers(self) -> int:
        return self.inner.live_workers()

    def submit(self, task: T) -> None:
        self.buffer.append(task)
        if len(self.buffer) >= self.group:
            self._send()

    def collect(self) -> list[R]:
        if self.buffer:
            self._send()
        return [result for results in self.inner.collect() for result in results]

    def close(self) -> None:
        self.buffer.clear()
        self.inner.close()

    def terminate(self) -> None:
        self.buffer.clear()
        self.inner.terminate()

    def _send(self) -> None:
        group, self.buffer = self.buffer, []
        self.inner.submit(group)
