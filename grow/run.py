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

from bookgen.engines.factory import default_batch_size, make_evaluator
from bookgen.engines.mcts import MctsSettings
from bookgen.engines.protocols import EvaluatorError
from bookgen.errors import BookgenError
from bookgen.formats.positions import read_roots
from bookgen.grow.book_graph import GrowGraph
from bookgen.grow.expand import ExpansionResult, ExpansionSettings, make_backend
from bookgen.grow.strategies import STRATEGIES, WalkLimits, make_strategy
from bookgen.position import STARTPOS_SFEN
from bookgen.progress import progress_bar
from bookgen.signals import RunStop, fault_point, stop_on_interrupt
from bookgen.store import DEFAULT_BOOK, Book
from bookgen.store.lock import writing
from bookgen.store.runs import mark_dead_runs
from bookgen.values import DrawValues
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

    @property
    def positions_per_second(self) -> float:
        return self.expansions / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["positions_per_second"] = self.positions_per_second
        return result


def grow(book: str | Path = DEFAULT_BOOK, *, evaluator: str = "builtin",
         evaluator_options: dict[str, Any] | None = None, strategy: str = "dlshogi",
         playouts: int = 200, batch_size: int | None = None, trials: int | None = None,
         positions: int | None = None, seconds: float | None = None, color: str = "both",
         roots: str | Path | None = None, max_ply: int = 64, eval_threshold: int = 400,
         temperature: float = 1.0, draw_value_black: int = 500,
         draw_value_white: int = 500, visit_threshold: float = 0.005, cutoff: float = 0.015,
         min_visits: int = 5, workers: int = 1, seed: int = 0, progress: bool = True,
         wait: bool = False) -> GrowSummary:
    """Grow ``book`` until a budget (trials, expanded positions, seconds) runs out,
    the strategy finds nothing left to expand, or Ctrl-C. See ``bookgen grow --help``.
    Draw values are per mille of a win (:class:`bookgen.values.DrawValues`).

    ``batch_size`` None is the evaluator's default
    (:func:`bookgen.engines.factory.default_batch_size`). ``wait``: when another
    process writes the book, wait for it instead of raising
    :class:`bookgen.store.lock.BookLocked`."""
    if strategy not in STRATEGIES:
        raise BookgenError(f"unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
    if color not in ("both", "black", "white"):
        raise BookgenError(f"--color must be both, black or white, not {color!r}")
    if trials is None and positions is None and seconds is None:
        positions = 100
    if batch_size is None:
        batch_size = default_batch_size(evaluator)
    for name, value in (("--playouts", playouts), ("--workers", workers),
                        ("--batch-size", batch_size)):
        if value < 1:
            raise BookgenError(f"{name} must be at least 1")
    draws = DrawValues(draw_value_black, draw_value_white)
    options = dict(evaluator_options or {})
    if workers > 1 and evaluator.startswith(("torch:", "onnx:")):
        # Each worker runs its own model: share the cores instead of each taking all.
        options.setdefault("threads", max(1, (os.cpu_count() or 1) // workers))
    root_boards = read_roots(roots) if roots else [cshogi.Board(STARTPOS_SFEN + " 1")]
    settings = ExpansionSettings(
        MctsSettings(playouts=playouts, batch_size=batch_size, draws=draws),
        visit_threshold=visit_threshold, cutoff=cutoff, min_visits=min_visits)
    limits = WalkLimits(max_ply=max_ply, eval_threshold=eval_threshold,
                        temperature=temperature, color=color)
    params = {"evaluator": evaluator, "evaluator_options": options, "strategy": strategy,
              "playouts": playouts, "batch_size": batch_size, "trials": trials,
              "positions": positions, "seconds": seconds, "color": color,
              "roots": str(roots) if roots else None, "max_ply": max_ply,
              "eval_threshold": eval_threshold, "temperature": temperature,
              "draw_value_black": draw_value_black, "draw_value_white": draw_value_white,
              "visit_threshold": visit_threshold, "cutoff": cutoff, "min_visits": min_visits,
              "workers": workers,
              "seed": seed}

    # The writer lock first (a second writer is refused before any engine
    # starts), then a bad evaluator fails before the book is touched.
    with writing(book, wait=wait):
        try:
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
        summary = GrowSummary(str(book), run_id, "running")
        status = "failed"
        abandon = True  # on errors and Ctrl-C: do not wait for the workers' expansions
        backend = None
        try:
            walker = make_strategy(strategy, graph, root_boards, limits, random.Random(seed))
            backend = make_backend(evaluator, options, settings, workers)
            with stop_on_interrupt() as stop:
                status = _run(store, graph, walker, backend, summary, stop, trials, positions,
                              seconds, progress)
            abandon = False
        except KeyboardInterrupt:  # before the run could take Ctrl-C over (engines starting)
            status, summary.stop_reason = "interrupted", "Ctrl-C"
            raise
        except EvaluatorError as error:
            summary.stop_reason = f"evaluator failed: {error}"
            raise BookgenError(f"evaluator {evaluator}: {error}") from None
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
                bar.set_postfix(book=len(graph.nodes), refresh=False)
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
        with store.transaction():
            graph.expand(store, board, ply if ply is not None else board.move_number,
                         result.choices, result.value, result.win_rate, result.visits,
                         summary.run_id)
            _end_run(store, graph, summary, "running")
    fault_point("grow-expanded")
