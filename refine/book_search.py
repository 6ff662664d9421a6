"""``bookgen refine search``: re-search book positions with an alpha-beta engine.

Each selected position is searched once by the engine (a USI engine through
bookgen's own client, or the built-in alpha-beta search) and the result is
stored in the ``analyses`` table: the score in centipawns for the side to move
(mates as ``+-(30000 - plies)`` with the distance in ``mate``), its bound,
depth, seldepth, nodes, best move and PV, with the ``runs`` row of the run.

Selections (:class:`bookgen.refine.settings.PositionSelection`; all of them
contain only positions that have book moves):

- ``all``: every position with moves;
- ``leaves``: positions none of whose moves leads to a position with moves;
- ``principal``: the principal lines. From the roots (the initial position
  when it is in the book, and every position with moves that no book move
  leads to), follow for **both** sides every move whose value is within
  ``margin_cp`` of the position's best move; the value of a move is its
  ``minimax_value`` when ``refine minimax`` filled it, else its ``value``.
  The positions reached (breadth first, each once) are the selection;
- ``visits``: positions whose ``visits`` (search effort spent when grow
  expanded them) is at least ``min_visits``.

Runs are resumable: the engine spec, its options and its limits form the
run's *analysis key* (``params.key``); positions already analysed by any
earlier ``refine search`` run with the same key are skipped. Every analysis
is committed on its own, so Ctrl-C and ``kill -9`` lose only the searches in
flight. The engine gets ``usinewgame`` (a cleared hash)
before every position, so a result does not depend on what the engine
searched before (nor on the number of workers). A crash or timeout restarts
the engine and searches the position again, up to ``retries`` times (the
engine settings' restart policy). A position that still fails is counted as
failed and skipped (a later run tries it again), so that one position an
engine cannot search does not block a book. But an engine that fails on the
first 2 positions it is given, on 10 in a row later, or on every position of
the run is broken: the run stops as ``failed`` (exit code 2) with the
engine's last error, as grow stops when its evaluator fails.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cshogi
import numpy as np

from bookgen.arrays import NULL
from bookgen.engines.factory import open_evaluator
from bookgen.engines.protocols import Evaluation, Evaluator, PositionFailed
from bookgen.engines.restart import EngineLabel
from bookgen.engines.settings import EngineSettings
from bookgen.errors import BookgenError
from bookgen.progress import progress_bar
from bookgen.refine.settings import SELECTIONS, PositionSelection, SearchSettings
from bookgen.signals import RunStop, fault_point, stop_on_interrupt
from bookgen.store import DEFAULT_BOOK, Book, writes
from bookgen.store.index import BookIndex
from bookgen.store.lock import writing
from bookgen.store.runs import analysed_positions, mark_dead_runs
from bookgen.timestamps import utc_now
from bookgen.workers.cluster import RayRunner
from bookgen.workers.pool import BrokenProcessPool, LocalRunner, PoolRunner
from bookgen.workers.runcontrol import (
    collect_or_abandon,
    in_flight,
    shut_down,
    uncounted_on_failure,
)

__all__ = [
    "SELECTIONS", "AnalysisRecord", "SearchSummary", "analyse_position", "open_analyser",
    "search", "search_label", "select_positions",
]

MAX_FAILURES_IN_A_ROW = 10  # an engine that analysed positions, then fails on this many
MAX_FAILURES_AT_START = 2   # an engine that fails on this many before analysing any


# --------------------------------------------------------------------------
# analysing one position


@dataclass
class AnalysisRecord:
    """Refine search's record of one position: its evaluation, or why it has none
    (``ok`` False: every attempt failed), the engine restarts and the seconds it took."""

    position_id: int
    ok: bool
    evaluation: Evaluation | None = None
    error: str = ""
    restarts: int = 0
    seconds: float = 0.0


def open_analyser(settings: EngineSettings) -> Evaluator:
    """The engine analysing best lines (see
    :func:`~bookgen.engines.factory.open_evaluator`); a clear BookgenError when it
    cannot start."""
    return open_evaluator(settings, "best-line", search_label(str(settings.spec)))


def analyse_position(evaluator: Evaluator, position_id: int, sfen: str) -> AnalysisRecord:
    """Search one position; a position the engine gave up on is a record with ``ok`` False."""
    start = time.perf_counter()
    try:
        [evaluation] = evaluator.evaluate([cshogi.Board(sfen)])
    except PositionFailed as failed:
        return AnalysisRecord(position_id, False, error=failed.error, restarts=failed.restarts,
                              seconds=time.perf_counter() - start)
    return AnalysisRecord(position_id, True, evaluation, restarts=evaluation.restarts,
                          seconds=time.perf_counter() - start)


def search_label(spec: str) -> EngineLabel:
    """How refine search words its engine's start errors."""
    return EngineLabel(f"engine {spec}", f"cannot start engine {spec}",
                       "engine {name}: gpsusi aborts on 'go nodes', 'go movetime' and "
                       "'go depth'; use --byoyomi")


# --------------------------------------------------------------------------
# backends: this process, or worker processes with an engine each


_worker: dict[str, Any] = {}


def _worker_init(settings: EngineSettings) -> None:
    _worker["evaluator"] = open_analyser(settings)


def _worker_analyse(task: tuple[int, str]) -> AnalysisRecord:
    return analyse_position(_worker["evaluator"], *task)


def _lost_position(task: tuple[int, str], why: str) -> AnalysisRecord:
    """A position whose cluster worker kept dying: failed (a later run tries it again)."""
    return AnalysisRecord(task[0], False, error=why)


def select_positions(index: BookIndex, selection: PositionSelection) -> list[int]:
    """The ids of the positions a selection names (see the module docstring), in the
    order they will be searched."""
    select = selection.select
    if select == "all":
        return index.with_moves()
    if select == "leaves":
        return index.leaves()
    if select == "principal":
        return index.principal(selection.margin_cp)
    assert select == "visits" and selection.min_visits is not None  # PositionSelection checks
    rows = index.with_moves_rows()
    visits = index.column("visits")[rows]
    return index.ids[rows[np.where(visits == NULL, 0, visits) >= selection.min_visits]].tolist()


# --------------------------------------------------------------------------
# the command


@dataclass
class SearchSummary:
    """What a refine search run did; :meth:`as_dict` is ``refine search --json``."""

    book: str
    run_id: int
    status: str
    engine: str
    select: str
    selected: int = 0
    already_analysed: int = 0
    to_analyse: int = 0
    left_by_limit: int = 0   # positions still to analyse that --limit left for a later run
    analysed: int = 0
    failed: int = 0
    restarts: int = 0
    seconds: float = 0.0
    stop_reason: str = ""
    failed_positions: list[int] = field(default_factory=list)
    last_error: str = ""

    @property
    def positions_per_second(self) -> float:
        return (self.analysed + self.failed) / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["positions_per_second"] = self.positions_per_second
        return result


def search(book: str | Path = DEFAULT_BOOK, settings: SearchSettings | None = None, *,
           only: Iterable[int] | None = None, progress: bool = True,
           wait: bool = False) -> SearchSummary:
    """Search the positions ``settings`` select with its engine and store the analyses.
    See the module docstring, ``bookgen refine search --help`` and
    :class:`bookgen.refine.settings.SearchSettings` (None: the defaults).

    ``only`` restricts the selection to these position ids (used by
    ``refine mistakes --iterate`` for the positions it just added).
    ``progress``: show a progress bar. ``wait``: when another process writes the
    book, wait for it instead of raising :class:`bookgen.store.lock.BookLocked`.
    """
    settings = settings if settings is not None else SearchSettings()
    engine, limit, workers = settings.engine, settings.limit, settings.workers
    path = Path(book)
    if not path.is_file():
        raise BookgenError(f"{path}: no such book")
    # The writer lock first (a second writer is refused before the engine
    # starts), then an engine that cannot start is an error before the book is
    # touched.
    with writing(path, wait=wait):
        analyser: Evaluator | None  # None once handed over to the backend
        # (on a cluster, the workers start the engines: the driver may not have it)
        analyser = open_analyser(engine) if settings.cluster is None else None
        try:
            store = Book(path, create=False, wait=wait)
        except BaseException:
            if analyser is not None:
                analyser.close()
            raise
    backend: Any = None
    try:
        mark_dead_runs(store)
        index = BookIndex.load(store)
        selected = select_positions(index, settings.selection)
        wanted = set(only) if only is not None else None
        if wanted is not None:
            selected = [pid for pid in selected if pid in wanted]
        done = analysed_positions(store, engine.key())
        todo = [pid for pid in selected if pid not in done]
        already = len(selected) - len(todo)
        left = len(todo) - limit if limit is not None and len(todo) > limit else 0
        if limit is not None:
            todo = todo[:limit]
        spec = str(engine.spec)
        params = settings.params(len(wanted) if wanted is not None else None)
        summary = SearchSummary(str(book), 0, "running", spec, settings.selection.select,
                                selected=len(selected), already_analysed=already,
                                to_analyse=len(todo), left_by_limit=left)
        with store.transaction():
            summary.run_id = store.begin_run("refine search", params, evaluator=spec)
            store.end_run(summary.run_id, status="running", counts=_counts(summary))
        status = "failed"
        abandon = True  # on errors and Ctrl-C: do not wait for the workers' searches
        start = time.perf_counter()
        try:
            if not todo:
                status, summary.stop_reason = "done", "nothing to analyse"
            else:
                if settings.cluster is not None:
                    backend = RayRunner(settings.cluster, _worker_analyse, _worker_init,
                                        (engine,), queued_per_worker=2,
                                        on_lost=_lost_position, most=len(todo))
                elif workers > 1 and len(todo) > 1:
                    assert analyser is not None
                    analyser.close()
                    analyser = None
                    # Two positions queued per worker hide the round trip.
                    backend = PoolRunner(min(workers, len(todo)), _worker_analyse,
                                         _worker_init, (engine,),
                                         queued_per_worker=2)
                else:
                    assert analyser is not None
                    local = analyser
                    backend = LocalRunner(lambda task: analyse_position(local, *task),
                                          local.close)
                    analyser = None
                with stop_on_interrupt() as stop:
                    status = _run(store, index, todo, backend, summary, stop, start, progress)
            abandon = False
        except KeyboardInterrupt:  # before the run could take Ctrl-C over
            status, summary.stop_reason = "interrupted", "Ctrl-C"
            raise
        except BrokenProcessPool as error:
            summary.stop_reason = f"a worker process died: {error}"
            raise BookgenError(f"refine search: {summary.stop_reason}") from None
        except BookgenError as error:
            summary.stop_reason = str(error)
            raise
        finally:
            # A Ctrl-C now waits for these last steps (seconds: engines that do not
            # quit are killed after their grace), so that the run's row is written.
            with stop_on_interrupt():
                shut_down(backend, abandon=abandon)
                backend = None
                summary.status = status
                summary.seconds = time.perf_counter() - start
                with store.transaction():
                    store.end_run(summary.run_id, status=status, counts=_counts(summary))
        return summary
    finally:
        if backend is not None:
            backend.close()
        if analyser is not None:
            analyser.close()
        if store is not None:
            store.close()


def _counts(summary: SearchSummary) -> dict[str, Any]:
    return {"pid": os.getpid(), "selected": summary.selected,
            "already_analysed": summary.already_analysed, "to_analyse": summary.to_analyse,
            "analysed": summary.analysed, "failed": summary.failed,
            "failed_positions": summary.failed_positions[:100], "restarts": summary.restarts,
            "left_by_limit": summary.left_by_limit,
            "last_error": summary.last_error[:500], "seconds": round(summary.seconds, 3),
            "stop_reason": summary.stop_reason}


def _run(store: Book, index: BookIndex, todo: list[int], backend: Any, summary: SearchSummary,
         stop: RunStop, start: float, progress: bool) -> str:
    queue = deque(todo)
    pending = 0
    failures_in_a_row = 0
    with progress_bar(total=len(todo), unit="pos", desc="searching",
                      disable=None if progress else True) as bar:
        while True:
            while queue and not stop.is_set() and pending < backend.capacity():
                pid = queue.popleft()
                ply = index.ply[pid]
                backend.submit((pid, f"{index.sfen[pid]} {ply if ply else 1}"))
                pending += 1
            if not pending:
                if queue:
                    summary.stop_reason = "Ctrl-C"
                    return "interrupted"
                if summary.failed and not summary.analysed:
                    raise BookgenError(_broken_engine(summary, None, failures_in_a_row))
                summary.stop_reason = _done_reason(summary)
                return "done"
            results = collect_or_abandon(backend, stop)
            if results is None:
                summary.seconds = time.perf_counter() - start
                summary.stop_reason = f"Ctrl-C; {in_flight(pending, 'search')}"
                return "interrupted"
            for result in results:
                pending -= 1
                summary.seconds = time.perf_counter() - start
                _record(store, summary, result)
                failures_in_a_row = 0 if result.ok else failures_in_a_row + 1
                bar.update(1)
                bar.set_postfix(failed=summary.failed, workers=backend.live_workers(),
                                refresh=False)
                limit = MAX_FAILURES_IN_A_ROW if summary.analysed else MAX_FAILURES_AT_START
                if failures_in_a_row >= limit:
                    raise BookgenError(_broken_engine(summary, result, failures_in_a_row))
            if store.interrupted:  # Ctrl-C arrived during a commit
                stop.interrupt()


def _broken_engine(summary: SearchSummary, result: AnalysisRecord | None,
                   failures_in_a_row: int) -> str:
    """Why the run gives up on the engine (``result``: the last failure, if the run
    had more to do)."""
    positions = f"{failures_in_a_row} position{'s' if failures_in_a_row > 1 else ''}"
    if summary.analysed:
        what = f"failed on {positions} in a row"
    elif result is not None:
        what = f"failed on the first {positions} it was given"
    else:
        what = f"failed on every position it was given ({positions})"
    return (f"engine {summary.engine} {what}, each time after retries; last error: "
            f"{summary.last_error}")


def _done_reason(summary: SearchSummary) -> str:
    if summary.left_by_limit:
        searched = summary.analysed + summary.failed
        return (f"--limit reached: {searched} of {searched + summary.left_by_limit} selected "
                f"positions not yet analysed searched, {summary.left_by_limit} left for a "
                "later run")
    return "all selected positions searched"


def _record(store: Book, summary: SearchSummary, result: AnalysisRecord) -> None:
    with uncounted_on_failure(summary):
        summary.restarts += result.restarts
        if result.ok:
            summary.analysed += 1
        else:
            summary.failed += 1
            summary.failed_positions.append(result.position_id)
            summary.last_error = result.error
        with store.transaction():
            e = result.evaluation
            if e is not None:
                writes.insert_analysis(
                    store.conn,
                    (result.position_id, summary.run_id, summary.engine, e.score, e.mate,
                     e.bound, e.depth, e.seldepth, e.nodes, e.bestmove, " ".join(e.pv) or None,
                     utc_now()))
            store.end_run(summary.run_id, status="running", counts=_counts(summary))
    fault_point("refine-search-recorded")
