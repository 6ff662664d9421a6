"""``bookgen grow``: the MCTS-driven book expander.

The main process owns the book: it walks the in-memory graph with a strategy
to pick positions, hands them to an expansion backend (this process, or
worker processes with their own evaluators), and records every finished
expansion in its own transaction. A run can therefore be stopped at any
moment (Ctrl-C and ``kill -9`` lose only the expansions in flight) and rerun
to continue. Every run is a row of the ``runs`` table.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cshogi

from bookgen.engines.factory import make_evaluator
from bookgen.engines.protocols import EvaluatorError
from bookgen.errors import BookgenError
from bookgen.grow.book_graph import GrowGraph
from bookgen.grow.expand import ExpansionResult, make_backend
from bookgen.grow.settings import GrowSettings
from bookgen.grow.strategies import make_strategy
from bookgen.position import STARTPOS_SFEN
from bookgen.progress import progress_bar
from bookgen.signals import RunStop, fault_point, stop_on_interrupt
from bookgen.store import DEFAULT_BOOK, Book
from bookgen.store.lock import writing
from bookgen.store.runs import mark_dead_runs
from bookgen.workers.pool import BrokenProcessPool
from bookgen.workers.runcontrol import (
    collect_or_abandon,
    in_flight,
    shut_down,
    uncounted_on_failure,
)


@dataclass
class GrowSummary:
    book: str
    run_id: int
    status: str
    expansions: int = 0
    trials: int = 0
    positions: int = 0
    moves: int = 0
    positions_added: int = 0
    moves_added: int = 0
    moves_updated: int = 0
    seconds: float = 0.0
    eval_seconds: float = 0.0
    evaluations: int = 0
    stop_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    batches: int = 0          # evaluator calls (network batches), all workers
    workers: int = 1          # the workers whose time ``eval_seconds`` sums

    @property
    def positions_per_second(self) -> float:
        return self.expansions / self.seconds if self.seconds else 0.0

    @property
    def mean_batch(self) -> float:
        """Positions per evaluator call (the mean network batch)."""
        return self.evaluations / self.batches if self.batches else 0.0

    @property
    def outside_evaluator_share(self) -> float:
        """The share of the workers' time spent outside the evaluator (0 to 1)."""
        busy = self.seconds * self.workers
        return max(0.0, 1 - self.eval_seconds / busy) if busy else 0.0

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        del result["workers"], result["batches"]
        result["positions_per_second"] = self.positions_per_second
        result["network_batches"] = self.batches
        result["mean_batch"] = round(self.mean_batch, 3)
        result["outside_evaluator_share"] = round(self.outside_evaluator_share, 4)
        return result


def grow(book: str | Path = DEFAULT_BOOK, settings: GrowSettings | None = None, *,
         progress: bool = True, wait: bool = False) -> GrowSummary:
    """Grow ``book`` until the budget (trials, expanded positions, seconds) runs out,
    the strategy finds nothing left to expand, or Ctrl-C. See ``bookgen grow --help``
    and :class:`bookgen.grow.settings.GrowSettings` (None: the defaults).

    ``progress``: show a progress bar. ``wait``: when another process writes the
    book, wait for it instead of raising :class:`bookgen.store.lock.BookLocked`."""
    settings = settings if settings is not None else GrowSettings()
    evaluator = settings.evaluator.spec
    options = settings.evaluator_options()
    params = settings.params()
    root_boards = settings.roots.boards() or [cshogi.Board(STARTPOS_SFEN + " 1")]
    budget = settings.budget

    # The writer lock first (a second writer is refused before any engine
    # starts), then a bad evaluator fails before the book is touched (on a
    # cluster, the driver may not have the engine or the GPU: the workers say).
    with writing(book, wait=wait):
        try:
            if settings.cluster is None:
                make_evaluator(evaluator, **options).close()
        except EvaluatorError as error:
            raise BookgenError(f"evaluator {evaluator}: {error}") from None
        store = Book(book, wait=wait)
    try:
        mark_dead_runs(store)
        graph = GrowGraph.load(store)
        with store.transaction():
            graph.link_children(store)
            run_id = store.begin_run("grow", params, evaluator=evaluator)
            store.end_run(run_id, status="running", counts={"pid": os.getpid()})
        summary = GrowSummary(str(book), run_id, "running",
                              workers=((settings.cluster.workers or settings.workers)
                                       if settings.cluster else settings.workers))
        status = "failed"
        abandon = True  # on errors and Ctrl-C: do not wait for the workers' expansions
        backend = None
        try:
            walker = make_strategy(settings.strategy, graph, root_boards, settings.walk,
                                   random.Random(settings.seed))
            backend = make_backend(evaluator, options, (settings.mcts, settings.book_moves),
                                   settings.workers, settings.cluster,
                                   settings.parallel_searches)
            with stop_on_interrupt() as stop:
                status = _run(store, graph, walker, backend, summary, stop, budget.trials,
                              budget.positions, budget.seconds_s, progress)
            abandon = False
        except KeyboardInterrupt:  # before the run could take Ctrl-C over (engines starting)
            status, summary.stop_reason = "interrupted", "Ctrl-C"
            raise
        except EvaluatorError as error:
            summary.stop_reason = f"evaluator failed: {error}"
            raise BookgenError(f"evaluator {evaluator}: {error}") from None
        except BrokenProcessPool as error:
            summary.stop_reason = f"a worker died: {error}"
            raise BookgenError(f"grow: {summary.stop_reason}") from None
        finally:
            # A Ctrl-C now waits for these last steps (seconds: engines that do not
            # quit are killed after their grace), so that the run's row is written.
            with stop_on_interrupt():
                shut_down(backend, abandon=abandon)
                summary.status = status
                summary.positions = store.count_positions()
                summary.moves = store.count_moves()
                with store.transaction():
                    _end_run(store, graph, summary, status)
        return summary
    finally:
        store.close()


def _end_run(store: Book, graph: GrowGraph, summary: GrowSummary, status: str) -> None:
    """The run's row: the rows it wrote (positions and moves inserted, older
    move rows changed) and its counters (expansions among them)."""
    written = graph.written
    summary.positions_added = written.positions_added
    summary.moves_added = written.moves_added
    summary.moves_updated = written.moves_updated
    store.end_run(summary.run_id, status=status, positions_added=written.positions_added,
                  moves_added=written.moves_added, moves_updated=written.moves_updated,
                  counts=_counts(summary))


def _counts(summary: GrowSummary) -> dict[str, Any]:
    return {"expansions": summary.expansions, "trials": summary.trials,
            "evaluations": summary.evaluations, "seconds": round(summary.seconds, 3),
            "eval_seconds": round(summary.eval_seconds, 3), "stop_reason": summary.stop_reason,
            "pid": os.getpid()}


def _run(store: Book, graph: GrowGraph, walker: Any, backend: Any, summary: GrowSummary,
         stop: RunStop, trials: int | None, positions: int | None,
         seconds: float | None, progress: bool) -> str:
    start = time.perf_counter()
    pending: dict[str, int] = {}   # sfen -> ply of expansions in flight
    exhausted = False
    total = positions or trials
    with progress_bar(total=total, unit="pos", desc="growing",
                      disable=None if progress else True) as bar:
        while True:
            elapsed = time.perf_counter() - start
            budget_left = not (
                (positions is not None and summary.expansions + len(pending) >= positions)
                or (trials is not None and summary.trials >= trials)
                or (seconds is not None and elapsed >= seconds))
            while (budget_left and not stop.is_set() and not exhausted
                   and len(pending) < backend.capacity()):
                summary.trials += 1
                leaf = walker.next_leaf(set(pending))
                if leaf is None:
                    exhausted = True
                    break
                pending[leaf.sfen] = leaf.ply
                backend.submit(f"{leaf.sfen} {leaf.ply}")
                if trials is not None and summary.trials >= trials:
                    break
                if positions is not None and summary.expansions + len(pending) >= positions:
                    break  # (several in flight: the budget is reached within this loop)
            if not pending:
                summary.seconds = time.perf_counter() - start
                if stop.is_set():
                    summary.stop_reason = "Ctrl-C"
                    return "interrupted"
                summary.stop_reason = "nothing left to expand" if exhausted else "budget spent"
                return "done"
            exhausted = False  # new expansions open new leaves
            results = collect_or_abandon(backend, stop)
            if results is None:
                summary.seconds = time.perf_counter() - start
                summary.stop_reason = f"Ctrl-C; {in_flight(len(pending), 'expansion')}"
                return "interrupted"
            for result in results:
                _record(store, graph, result, pending.pop(result.sfen.rsplit(" ", 1)[0], None),
                        summary)
                bar.update(1)
                bar.set_postfix(book=len(graph.nodes), workers=backend.live_workers(),
                                refresh=False)
            summary.seconds = time.perf_counter() - start
            if store.interrupted:  # Ctrl-C arrived during a commit
                stop.interrupt()
            if stop.is_set() and not pending:
                summary.stop_reason = "Ctrl-C"
                return "interrupted"


def _record(store: Book, graph: GrowGraph, result: ExpansionResult, ply: int | None,
            summary: GrowSummary) -> None:
    board = cshogi.Board(result.sfen)
    with uncounted_on_failure(summary, graph.written):
        summary.expansions += 1
        summary.evaluations += result.evaluations
        summary.eval_seconds += result.eval_seconds
        summary.batches += result.batches
        with store.transaction():
            graph.expand(store, board, ply if ply is not None else board.move_number,
                         result.choices, result.value, result.win_rate, result.visits,
                         summary.run_id)
            _end_run(store, graph, summary, "running")
    fault_point("grow-expanded")
