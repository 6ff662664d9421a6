"""Many searches, one evaluator: cross-search batching.

A worker that runs K searches at once (``grow --parallel-searches K``) drives
them as resumable searches (:data:`bookgen.engines.mcts.SearchSteps`, e.g.
:meth:`bookgen.engines.mcts.Mcts.searching`) in one thread: each search runs
until it yields its batch of leaves (its own virtual-loss batch), and
:class:`SearchBatcher` gathers the leaves of the waiting searches into one
call of the evaluator, of up to ``batch_size`` boards. A batch is sent when
it is full or when every search is waiting; a search is resumed once all its
leaves are evaluated. Searches never see each other's leaves, so each search
returns what it would return alone with the same evaluations (for
evaluators that evaluate each board on its own, the same as searching the
positions one after another).

The batcher counts the evaluator calls, the boards sent and the time spent
inside the evaluator (:class:`BatchStats`): a run's mean network batch and
its share of time outside the evaluator.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from bookgen.engines.mcts import SearchSteps
from bookgen.engines.protocols import Evaluation, Evaluator

__all__ = ["BatchStats", "SearchBatcher", "search_batch"]

R = TypeVar("R")


def search_batch(batch_size: int, searches: int) -> int:
    """The leaves one of ``searches`` concurrent searches gathers before it
    waits, so that together they fill an evaluator batch of ``batch_size``:
    ``batch_size / searches`` rounded up."""
    return max(1, -(-batch_size // max(1, searches)))


@dataclass
class BatchStats:
    """What a :class:`SearchBatcher` sent to its evaluator."""

    calls: int = 0          # evaluator calls (network batches)
    boards: int = 0         # boards evaluated in them
    seconds: float = 0.0    # time inside the evaluator

    @property
    def mean_batch(self) -> float:
        return self.boards / self.calls if self.calls else 0.0


@dataclass
class _Request:
    search: int                       # index of the waiting search
    boards: list
    evaluations: list[Evaluation]     # those evaluated so far, in order


class SearchBatcher(Generic[R]):
    """Runs resumable searches together over one evaluator (see the module
    docstring); ``stats`` add up over the calls of :meth:`run`."""

    def __init__(self, evaluator: Evaluator, batch_size: int) -> None:
        self.evaluator = evaluator
        self.batch_size = max(1, batch_size)
        self.stats = BatchStats()

    def run(self, searches: Sequence[SearchSteps[R]], active: int | None = None) -> list[R]:
        """Run every search to its end; their results, in order. ``active``: at
        most this many run at once, the next one started when one ends (None:
        all at once), so that searches of unequal lengths (games) keep the
        batches full."""
        results: list[R | None] = [None] * len(searches)
        finished = [False] * len(searches)
        started = len(searches) if active is None else min(len(searches), max(1, active))
        # Searches to resume, with what to send them (None: start them).
        runnable: deque[tuple[int, list[Evaluation] | None]] = deque(
            (index, None) for index in range(started))
        waiting: deque[_Request] = deque()
        queued = 0
        while runnable or waiting:
            while runnable and queued < self.batch_size:
                index, answer = runnable.popleft()
                steps = searches[index]
                try:
                    boards = next(steps) if answer is None else steps.send(answer)
                except StopIteration as stop:
                    results[index], finished[index] = stop.value, True
                    if started < len(searches):
                        runnable.append((started, None))
                        started += 1
                    continue
                if not boards:
                    runnable.appendleft((index, []))
                    continue
                waiting.append(_Request(index, list(boards), []))
                queued += len(boards)
            if waiting:  # full, or every search is waiting
                queued -= self._flush(waiting, runnable)
        assert all(finished)
        return results  # type: ignore[return-value]

    def _flush(self, waiting: deque[_Request], runnable: deque[tuple[int, list[Evaluation] | None]]
               ) -> int:
        """Evaluate up to ``batch_size`` boards from the front of ``waiting``;
        requests fully evaluated go to ``runnable``. Returns the boards evaluated."""
        taken: list[tuple[_Request, int, int]] = []   # request, first board, end
        boards: list = []
        for request in waiting:
            room = self.batch_size - len(boards)
            if room <= 0:
                break
            start = len(request.evaluations)
            end = min(len(request.boards), start + room)
            taken.append((request, start, end))
            boards.extend(request.boards[start:end])
        began = time.perf_counter()
        try:
            evaluations = self.evaluator.evaluate(boards)
        finally:
            self.stats.seconds += time.perf_counter() - began
        self.stats.calls += 1
        self.stats.boards += len(boards)
        offset = 0
        for request, start, end in taken:
            request.evaluations.extend(evaluations[offset:offset + end - start])
            offset += end - start
        while waiting and len(waiting[0].evaluations) == len(waiting[0].boards):
            done = waiting.popleft()
            runnable.append((done.search, done.evaluations))
        return len(boards)
