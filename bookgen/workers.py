"""A pool of spawned worker processes, each initialised once (its own engine or
model), returning results in completion order. Used by grow, refine search and
self-play; a worker that dies breaks the pool with an error instead of a hang.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Generic, TypeVar

R = TypeVar("R")


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
