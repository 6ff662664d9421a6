"""A pool of spawned worker processes, each initialised once (its own engine or
model), returning results in completion order. Used by grow, refine search,
self-play and matches; a worker that dies breaks the pool with an error instead
of a hang. :class:`LocalRunner` and :class:`PoolRunner` put one task function
behind the same submit/collect interface, in this process or in a pool.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")
T = TypeVar("T")


class WorkerPool(Generic[R]):
    """``workers`` processes running ``initializer(*initargs)`` once each."""

    def __init__(self, workers: int, initializer: Callable[..., None],
                 initargs: tuple[Any, ...], queued_per_worker: int = 1) -> None:
        self.workers = workers
        self.queued_per_worker = queued_per_worker
        # spawn, not fork: a parent that has loaded torch (OpenMP thread pools) or
        # started engine reader threads is not safe to fork.
        self.executor = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=initializer, initargs=initargs)
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
        for future in self.futures:
            future.cancel()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def terminate(self) -> None:
        """Stop now: kill the workers, abandoning the tasks in flight."""
        for process in list(getattr(self.executor, "_processes", {}).values()):
            process.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)


class TaskRunner(Protocol[T, R]):
    """Runs tasks of one kind; at most :meth:`capacity` in flight."""

    def capacity(self) -> int: ...
    def submit(self, task: T) -> None: ...
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

    def submit(self, task: T) -> None:
        self.queue.append(task)

    def collect(self) -> list[R]:
        return [self.function(self.queue.pop(0))]

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()

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

    def submit(self, task: T) -> None:
        self.pool.submit(self.function, task)

    def collect(self) -> list[R]:
        return self.pool.collect()

    def close(self) -> None:
        self.pool.close()

    def terminate(self) -> None:
        self.pool.terminate()
