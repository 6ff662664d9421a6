"""``bookgen refine search``: re-search book positions with an alpha-beta engine.

Each selected position is searched once by the engine (a USI engine through
bookgen's own client, or the built-in alpha-beta search) and the result is
stored in the ``analyses`` table: the score in centipawns for the side to move
(mates as ``+-(30000 - plies)`` with the distance in ``mate``), its bound,
depth, seldepth, nodes, best move and PV, with the ``runs`` row of the run.

Selections (all of them contain only positions that have book moves):

- ``all``: every position with moves;
- ``leaves``: positions none of whose moves leads to a position with moves;
- ``principal``: the principal lines. From the roots (the initial position
  when it is in the book, and every position with moves that no book move
  leads to), follow for **both** sides every move whose value is within
  ``margin`` cp of the position's best move; the value of a move is its
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
the engine and searches the position again, up to ``retries`` times. A
position that still fails is counted as failed and skipped (a later run tries
it again), so that one position an engine cannot search does not block a
book. But an engine that fails on the first 2 positions it is given, on 10
in a row later, or on every position of the run is broken: the run stops
as ``failed`` (exit code 2) with the engine's last error, as grow stops when
its evaluator fails.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import cshogi
import numpy as np

from bookgen.arrays import NULL
from bookgen.engines.builtin.alphabeta import PLAY_DEPTH, PLAY_NODES, Searcher
from bookgen.engines.restart import (
    DEFAULT_BYOYOMI,
    EngineFailed,
    EngineLabel,
    RestartPolicy,
    SearchLimits,
    is_gpsshogi,
    run_with_restarts,
    search_stop_grace,
    start_engine,
)
from bookgen.engines.usi.analyser import BadOutput
from bookgen.engines.usi.client import UsiError
from bookgen.engines.usi.protocol import UsiSearch, parse_info, printable
from bookgen.errors import BookgenError
from bookgen.position import legal_prefix
from bookgen.progress import progress_bar
from bookgen.signals import RunStop, fault_point, stop_on_interrupt
from bookgen.store import DEFAULT_BOOK, Book, writes
from bookgen.store.index import BookIndex
from bookgen.store.lock import writing
from bookgen.store.runs import analysed_positions, mark_dead_runs
from bookgen.timestamps import utc_now
from bookgen.values import MATE_VALUE
from bookgen.workers.pool import BrokenProcessPool, LocalRunner, PoolRunner
from bookgen.workers.runcontrol import (
    collect_or_abandon,
    in_flight,
    shut_down,
    uncounted_on_failure,
)

__all__ = [
    "SELECTIONS", "AnalysisResult", "EngineSettings", "SearchSummary", "engine_settings",
    "search", "select_positions", "start_analyser",
]

SELECTIONS = ("all", "leaves", "principal", "visits")
DEFAULT_MARGIN = 50
MAX_FAILURES_IN_A_ROW = 10  # an engine that analysed positions, then fails on this many
MAX_FAILURES_AT_START = 2   # an engine that fails on this many before analysing any
_MAX_BUILTIN_DEPTH = 64


# --------------------------------------------------------------------------
# engine settings


@dataclass(frozen=True)
class EngineSettings:
    """What to search with. ``key()`` identifies analyses that are interchangeable."""

    spec: str                                   # "builtin" or "usi:COMMAND"
    options: dict[str, str] = field(default_factory=dict)  # USI setoption pairs
    nodes: int | None = None
    byoyomi: int | None = None
    movetime: int | None = None
    depth: int | None = None
    timeout: float | None = None                # seconds per search (usi); None: automatic
    retries: int = 2                            # engine restarts per position

    @property
    def kind(self) -> str:
        return self.spec.partition(":")[0]

    @property
    def command(self) -> str:
        return self.spec.partition(":")[2]

    def key(self) -> dict[str, Any]:
        return {"engine": self.spec, "options": dict(sorted(self.options.items())),
                "nodes": self.nodes, "byoyomi": self.byoyomi, "movetime": self.movetime,
                "depth": self.depth}

    @classmethod
    def from_key(cls, key: dict[str, Any], timeout: float | None = None,
                 retries: int = 2) -> EngineSettings:
        return cls(key["engine"], dict(key.get("options") or {}), key.get("nodes"),
                   key.get("byoyomi"), key.get("movetime"), key.get("depth"), timeout, retries)


def engine_settings(engine: str = "builtin", engine_options: dict[str, str] | None = None,
                    nodes: int | None = None, byoyomi: int | None = None,
                    movetime: int | None = None, depth: int | None = None,
                    timeout: float | None = None, retries: int = 2) -> EngineSettings:
    """Validated settings with the defaults filled in (they are part of the key).

    builtin: depth 4 with a 40,000-node budget unless ``depth``/``nodes`` say
    otherwise (``nodes`` alone deepens until the budget is spent). usi:
    byoyomi 1000 ms when no limit is given.
    """
    kind, _, command = engine.partition(":")
    for name, value in (("--nodes", nodes), ("--byoyomi", byoyomi), ("--movetime", movetime),
                        ("--depth", depth)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise BookgenError(f"{name} must be a positive integer, not {value!r}")
    if timeout is not None and timeout <= 0:
        raise BookgenError("--engine-timeout must be positive")
    if retries < 0:
        raise BookgenError("--retries must be 0 or more")
    options = {str(k): str(v) for k, v in (engine_options or {}).items()}
    if kind == "builtin" and not command:
        if options or byoyomi is not None or movetime is not None or timeout is not None:
            raise BookgenError("--engine-option, --byoyomi, --movetime and --engine-timeout "
                               "apply to usi: engines only")
        if depth is None and nodes is None:
            depth, nodes = PLAY_DEPTH, PLAY_NODES
        elif depth is None:
            depth = _MAX_BUILTIN_DEPTH
        return EngineSettings("builtin", {}, nodes, None, None, depth, None, retries)
    if kind == "usi" and command.strip():
        if nodes is None and byoyomi is None and movetime is None and depth is None:
            byoyomi = DEFAULT_BYOYOMI
        return EngineSettings(f"usi:{command}", options, nodes, byoyomi, movetime, depth,
                              timeout, retries)
    raise BookgenError(f"unknown engine {engine!r} (use builtin or usi:COMMAND)")


# --------------------------------------------------------------------------
# analysing one position


@dataclass
class AnalysisResult:
    """The outcome of searching one position (``ok`` False: every attempt failed)."""

    position_id: int
    ok: bool
    score: int | None = None
    mate: int | None = None
    bound: str | None = None
    depth: int | None = None
    seldepth: int | None = None
    nodes: int | None = None
    bestmove: str | None = None
    pv: str = ""
    error: str = ""
    restarts: int = 0
    seconds: float = 0.0


class _NoScore(Exception):
    """The engine answered without any score: a configuration problem, not retried."""


class Analyser(Protocol):
    def analyse(self, position_id: int, sfen: str) -> AnalysisResult: ...

    def close(self) -> None: ...


class BuiltinAnalyser:
    """The built-in alpha-beta search (:mod:`bookgen.engines.builtin.alphabeta`), deterministic."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.searcher = Searcher()

    def analyse(self, position_id: int, sfen: str) -> AnalysisResult:
        start = time.perf_counter()
        board = cshogi.Board(sfen)
        r = self.searcher.search_root(board, self.settings.depth or PLAY_DEPTH,
                                      self.settings.nodes, margin=0)
        if not r.best:
            return AnalysisResult(position_id, True, -MATE_VALUE, 0, "exact", 0, None, r.nodes,
                                  None, "", seconds=time.perf_counter() - start)
        return AnalysisResult(
            position_id, True, r.score, r.mate, "exact", r.depth, None, r.nodes,
            cshogi.move_to_usi(r.best), " ".join(cshogi.move_to_usi(m) for m in r.pv),
            seconds=time.perf_counter() - start)

    def close(self) -> None:
        pass


def search_label(spec: str) -> EngineLabel:
    """How refine search words its engine's start errors."""
    return EngineLabel(f"engine {spec}", f"cannot start engine {spec}",
                       "engine {name}: gpsusi aborts on 'go nodes', 'go movetime' and "
                       "'go depth'; use --byoyomi")


class UsiAnalyser:
    """A USI engine searching one position at a time, restarted when it fails."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.policy = RestartPolicy(settings.retries)
        self.engine = start_engine(
            settings.command, settings.options,
            SearchLimits(settings.nodes, settings.byoyomi, settings.movetime, settings.depth),
            search_label(settings.spec), stop_grace_s=search_stop_grace(settings.timeout))

    def analyse(self, position_id: int, sfen: str) -> AnalysisResult:
        start = time.perf_counter()
        board = cshogi.Board(sfen)
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        try:
            result, restarts = run_with_restarts(
                self.engine, lambda: self._analyse_once(position_id, sfen, board, legal),
                self.policy, retried=(UsiError, BadOutput), final=(_NoScore,))
        except EngineFailed as failed:
            return AnalysisResult(position_id, False,
                                  error=str(failed.last) or type(failed.last).__name__,
                                  restarts=failed.restarts, seconds=time.perf_counter() - start)
        result.restarts = restarts
        result.seconds = time.perf_counter() - start
        return result

    def _analyse_once(self, position_id: int, sfen: str, board: cshogi.Board,
                      legal: set[str]) -> AnalysisResult:
        engine = self.engine
        engine.new_game()
        engine.position(f"sfen {sfen}")
        s = self.settings
        result = engine.go(nodes=s.nodes, byoyomi=s.byoyomi, movetime=s.movetime, depth=s.depth,
                           timeout=s.timeout)
        if result.bestmove is None and not (result.resign or result.win):
            raise BadOutput(f"no bestmove in the engine's answer (last lines: "
                             f"{result.tail()})")
        if result.bestmove is not None and result.bestmove not in legal:
            raise BadOutput(f"illegal bestmove '{printable(result.bestmove, 40)}'")
        info = self._last_scored(result)
        if info is None:
            if result.resign or result.win:
                score = MATE_VALUE if result.win else -MATE_VALUE
                return AnalysisResult(position_id, True, score, None, "exact", None, None,
                                      result.nodes, result.bestmove, "")
            hint = " (gpsusi: --engine-option BookDepth=0)" if is_gpsshogi(engine.name) else ""
            raise _NoScore(f"engine {engine.name or s.command!r} answered bestmove "
                           f"{result.bestmove} without any score{hint}; it may be playing "
                           "from its own book")
        nodes = max(n for n in (info.nodes, result.nodes, 0) if n is not None)
        return AnalysisResult(
            position_id, True, info.score, info.mate, info.bound or "exact", info.depth,
            info.seldepth, nodes or None, result.bestmove,
            " ".join(legal_prefix(board, info.pv)))

    def _last_scored(self, result: UsiSearch) -> Any:
        """The last info line of the first PV that carried a score."""
        for line in reversed(result.lines):
            if line.startswith("info"):
                info = parse_info(line, self.engine.mate_cp_threshold)
                if info is not None and info.multipv == 1 and info.has_score:
                    return info
        return None

    def close(self) -> None:
        self.engine.close()


def start_analyser(settings: EngineSettings) -> Analyser:
    """Start the engine; a clear BookgenError when it cannot start."""
    if settings.kind == "builtin":
        return BuiltinAnalyser(settings)
    return UsiAnalyser(settings)


# --------------------------------------------------------------------------
# backends: this process, or worker processes with an engine each


_worker: dict[str, Any] = {}


def _worker_init(settings: EngineSettings) -> None:
    _worker["analyser"] = start_analyser(settings)


def _worker_analyse(task: tuple[int, str]) -> AnalysisResult:
    return _worker["analyser"].analyse(*task)


def select_positions(index: BookIndex, select: str = "all", min_visits: int | None = None,
                     margin: int = DEFAULT_MARGIN) -> list[int]:
    """The ids of the positions a selection names (see the module docstring), in the
    order they will be searched."""
    if select == "all":
        return index.with_moves()
    if select == "leaves":
        return index.leaves()
    if select == "principal":
        return index.principal(margin)
    if select == "visits":
        if min_visits is None:
            raise BookgenError("--select visits needs --min-visits N")
        rows = index.with_moves_rows()
        visits = index.column("visits")[rows]
        return index.ids[rows[np.where(visits == NULL, 0, visits) >= min_visits]].tolist()
    raise BookgenError(f"unknown selection {select!r} (choose from {', '.join(SELECTIONS)})")


# --------------------------------------------------------------------------
# the command


@dataclass
class SearchSummary:
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


def search(book: str | Path = DEFAULT_BOOK, *, engine: str = "builtin",
           engine_options: dict[str, str] | None = None, nodes: int | None = None,
           byoyomi: int | None = None, movetime: int | None = None, depth: int | None = None,
           select: str = "all", min_visits: int | None = None, margin: int = DEFAULT_MARGIN,
           workers: int = 1, limit: int | None = None, engine_timeout: float | None = None,
           retries: int = 2, only: Iterable[int] | None = None,
           progress: bool = True, wait: bool = False) -> SearchSummary:
    """Search the selected book positions with ``engine`` and store the analyses.

    ``only`` restricts the selection to these position ids (used by
    ``refine mistakes --iterate`` for the positions it just added). See the
    module docstring and ``bookgen refine search --help``.
    ``wait``: when another process writes the book, wait for it instead of
    raising :class:`bookgen.store.lock.BookLocked`.
    """
    if select not in SELECTIONS:
        raise BookgenError(f"unknown selection {select!r} (choose from {', '.join(SELECTIONS)})")
    if select == "visits" and min_visits is None:
        raise BookgenError("--select visits needs --min-visits N")
    if workers < 1:
        raise BookgenError("--workers must be at least 1")
    if limit is not None and limit < 1:
        raise BookgenError("--limit must be at least 1")
    if margin < 0:
        raise BookgenError("--margin must be 0 or more")
    settings = engine_settings(engine, engine_options, nodes, byoyomi, movetime, depth,
                               engine_timeout, retries)
    path = Path(book)
    if not path.is_file():
        raise BookgenError(f"{path}: no such book")
    # The writer lock first (a second writer is refused before the engine
    # starts), then an engine that cannot start is an error before the book is
    # touched.
    with writing(path, wait=wait):
        analyser: Analyser | None  # None once handed over to the backend
        analyser = start_analyser(settings)
        try:
            store = Book(path, create=False, wait=wait)
        except BaseException:
            analyser.close()
            raise
    backend: Any = None
    try:
        mark_dead_runs(store)
        index = BookIndex.load(store)
        selected = select_positions(index, select, min_visits, margin)
        wanted = set(only) if only is not None else None
        if wanted is not None:
            selected = [pid for pid in selected if pid in wanted]
        done = analysed_positions(store, settings.key())
        todo = [pid for pid in selected if pid not in done]
        already = len(selected) - len(todo)
        left = len(todo) - limit if limit is not None and len(todo) > limit else 0
        if limit is not None:
            todo = todo[:limit]
        params = {"engine": settings.spec, "key": settings.key(), "select": select,
                  "min_visits": min_visits, "margin": margin, "workers": workers,
                  "limit": limit, "engine_timeout": engine_timeout, "retries": retries,
                  "only": len(wanted) if wanted is not None else None}
        summary = SearchSummary(str(book), 0, "running", settings.spec, select,
                                selected=len(selected), already_analysed=already,
                                to_analyse=len(todo), left_by_limit=left)
        with store.transaction():
            summary.run_id = store.begin_run("refine search", params, evaluator=settings.spec)
            store.end_run(summary.run_id, status="running", counts=_counts(summary))
        status = "failed"
        abandon = True  # on errors and Ctrl-C: do not wait for the workers' searches
        start = time.perf_counter()
        try:
            if not todo:
                status, summary.stop_reason = "done", "nothing to analyse"
            else:
                if workers > 1 and len(todo) > 1:
                    analyser.close()
                    analyser = None
                    # Two positions queued per worker hide the round trip.
                    backend = PoolRunner(min(workers, len(todo)), _worker_analyse,
                                         _worker_init, (settings,),
                                         queued_per_worker=2)
                else:
                    local = analyser
                    backend = LocalRunner(lambda task: local.analyse(*task), local.close)
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
                bar.set_postfix(failed=summary.failed, refresh=False)
                limit = MAX_FAILURES_IN_A_ROW if summary.analysed else MAX_FAILURES_AT_START
                if failures_in_a_row >= limit:
                    raise BookgenError(_broken_engine(summary, result, failures_in_a_row))
            if store.interrupted:  # Ctrl-C arrived during a commit
                stop.interrupt()


def _broken_engine(summary: SearchSummary, result: AnalysisResult | None,
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


def _record(store: Book, summary: SearchSummary, result: AnalysisResult) -> None:
    with uncounted_on_failure(summary):
        summary.restarts += result.restarts
        if result.ok:
            summary.analysed += 1
        else:
            summary.failed += 1
            summary.failed_positions.append(result.position_id)
            summary.last_error = result.error
        with store.transaction():
            if result.ok:
                writes.insert_analysis(
                    store.conn,
                    (result.position_id, summary.run_id, summary.engine, result.score,
                     result.mate, result.bound, result.depth, result.seldepth, result.nodes,
                     result.bestmove, result.pv or None, utc_now()))
            store.end_run(summary.run_id, status="running", counts=_counts(summary))
    fault_point("refine-search-recorded")
