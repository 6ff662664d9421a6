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

import json
import os
import sqlite3
import time
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from itertools import compress, islice
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import cshogi
import numpy as np

from bookgen.engines.builtin.alphabeta import PLAY_DEPTH, PLAY_NODES, Searcher
from bookgen.engines.usi.analyser import BadOutput
from bookgen.engines.usi.client import UsiEngine, UsiError, UsiOptionError
from bookgen.engines.usi.protocol import UsiSearch, parse_info, printable
from bookgen.errors import BookgenError
from bookgen.lock import writing
from bookgen.position import STARTPOS_SFEN, legal_prefix
from bookgen.progress import progress_bar
from bookgen.runcontrol import (RunStop, collect_or_abandon, in_flight, mark_dead_runs,
                                 stop_on_interrupt, uncounted_on_failure)
from bookgen.store import DEFAULT_BOOK, Book, fault_point, now
from bookgen.values import MATE_VALUE
from bookgen.workers.forked import fork_map
from bookgen.workers.pool import LocalRunner, PoolRunner

__all__ = [
    "NULL", "SELECTIONS", "AnalysisResult", "BookIndex", "EngineSettings", "SearchSummary",
    "analysed_positions", "engine_settings", "find_rows", "matching_runs", "search",
    "select_positions", "sql_int_columns", "start_analyser",
]

SELECTIONS = ("all", "leaves", "principal", "visits")
DEFAULT_MARGIN = 50
DEFAULT_BYOYOMI = 1000
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


class UsiAnalyser:
    """A USI engine searching one position at a time, restarted when it fails."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        command = settings.command
        try:
            self.engine = UsiEngine(command, options=settings.options,
                                    stop_grace=5.0 if settings.timeout is None
                                    else min(5.0, settings.timeout))
        except UsiOptionError as error:
            raise BookgenError(f"engine {settings.spec}: {error}") from None
        except UsiError as error:
            raise BookgenError(f"cannot start engine {settings.spec}: {error}") from None
        name = self.engine.name or ""
        if name.startswith("gpsshogi") and (settings.nodes, settings.movetime,
                                            settings.depth) != (None, None, None):
            self.engine.close()
            raise BookgenError(f"engine {name}: gpsusi aborts on 'go nodes', 'go movetime' and "
                               "'go depth'; use --byoyomi")

    def analyse(self, position_id: int, sfen: str) -> AnalysisResult:
        start = time.perf_counter()
        board = cshogi.Board(sfen)
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        errors: list[str] = []
        restarts = 0
        for attempt in range(self.settings.retries + 1):
            try:
                if attempt > 0 or not self.engine.alive:
                    restarts += 1
                    self.engine.restart()
                result = self._analyse_once(position_id, sfen, board, legal)
                result.restarts = restarts
                result.seconds = time.perf_counter() - start
                return result
            except _NoScore as error:
                errors.append(str(error))
                break
            except (UsiError, BadOutput) as error:
                errors.append(str(error) or type(error).__name__)
        return AnalysisResult(position_id, False, error=errors[-1], restarts=restarts,
                              seconds=time.perf_counter() - start)

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
            hint = " (gpsusi: --engine-option BookDepth=0)" if (
                engine.name or "").startswith("gpsshogi") else ""
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


# --------------------------------------------------------------------------
# the book as an index of positions and edges


class BookEdge(NamedTuple):
    move: str
    value: int | None          # minimax_value when present, else value
    count: int
    child: int | None          # child position id, when the child is in the book


NULL = np.iinfo(np.int64).min  # an SQL NULL in the int64 columns of BookIndex
_MAX_MOVE_CHARS = 9            # 7 bits per ASCII character in an int64 move code


def sql_int_columns(conn: sqlite3.Connection, sql: str, columns: Sequence[str],
                    args: Sequence[Any] = ()) -> list[np.ndarray]:
    """Integer ``columns`` of the rows of ``sql``, each an int64 array (NULL is
    :data:`NULL`), in the rows' order.

    SQLite joins each column into one text (``group_concat``) that numpy
    parses: much faster and leaner than a Python tuple per row. (SQLite keeps
    the ORDER BY of a FROM subquery under ``group_concat``; the callers check
    their key columns anyway.)
    """
    joined = ", ".join(f"group_concat(coalesce({c}, {NULL}))" for c in columns)
    texts = conn.execute(f"SELECT {joined} FROM ({sql})", args).fetchone()
    arrays = []
    for column, text in zip(columns, texts):
        if not text:
            arrays.append(np.empty(0, dtype=np.int64))
            continue
        try:
            arrays.append(np.fromstring(text, dtype=np.int64, sep=","))
        except ValueError:  # not all integers (REAL or TEXT in the column)
            arrays.append(np.array(
                [NULL if row[0] is None else int(row[0]) for row in
                 conn.execute(f"SELECT {column} FROM ({sql})", args)], dtype=np.int64))
    return arrays


def _ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(starts[i], stops[i])``."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


def find_rows(ids: np.ndarray, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``pids`` in the ascending ``ids``, and which of them are there."""
    if len(ids) and int(ids[-1]) - int(ids[0]) + 1 == len(ids):  # ids without gaps
        rows = pids - ids[0]
        return rows, (rows >= 0) & (rows < len(ids))
    rows = np.searchsorted(ids, pids)
    found = rows < len(ids)
    found[found] = ids[rows[found]] == pids[found]
    return rows, found


def _move_codes(text: str, n: int) -> tuple[np.ndarray, list[str]] | None:
    """Ranks (in sorted order of the moves) and names of ``n`` space-joined moves;
    None unless every move is at most 9 printable ASCII characters."""
    raw = text.encode("utf-8")
    buf = np.frombuffer(raw, dtype=np.uint8)
    if buf.size and (int(buf.max()) > 126 or int(buf.min()) < 32):
        return None
    starts = np.zeros(n, dtype=np.int64)
    separators = np.flatnonzero(buf == 32)
    if len(separators) != n - 1:
        return None
    starts[1:] = separators + 1
    del separators
    ends = np.append(starts[1:] - 1, len(buf))
    width = int((ends - starts).max())
    if width > _MAX_MOVE_CHARS:
        return None
    code = np.zeros(n, dtype=np.int64)
    block = 1 << 20
    for at in range(0, n, block):  # (bounded temporaries)
        first, end = starts[at:at + block], ends[at:at + block]
        part = code[at:at + block]
        for column in range(width):  # big-endian, zero padded: code order is string order
            where = first + column
            inside = where < end
            part <<= 7
            part[inside] |= buf[where[inside]]
    codes = np.unique(code)
    names = ["".join(chr((c >> 7 * (width - 1 - i)) & 127) for i in range(width)).rstrip("\0")
             for c in codes.tolist()]
    return np.searchsorted(codes, code).astype(np.int32), names


def _load_moves(conn: sqlite3.Connection, values: bool = True
                ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None,
                           np.ndarray | None, np.ndarray]:
    """Every moves row ordered by (position id, move): position ids, move ranks
    (indices into the sorted move names), move names, values (minimax when
    present) and counts (None unless ``values``) and child ids."""
    order = "FROM moves ORDER BY position_id, move"
    pids, child = sql_int_columns(conn, f"SELECT position_id, child_id {order}",
                                  ["position_id", "child_id"])
    text = conn.execute(f"SELECT group_concat(move, ' ') FROM (SELECT move {order})"
                        ).fetchone()[0] or ""
    coded = _move_codes(text, len(pids)) if len(pids) else (np.empty(0, np.int32), [])
    del text
    if coded is not None:
        ranks, names = coded
        same = pids[1:] == pids[:-1]
        if np.all((pids[1:] > pids[:-1]) | (same & (ranks[1:] > ranks[:-1]))):
            value = count = None
            if values:
                value, count = sql_int_columns(
                    conn, f"SELECT coalesce(minimax_value, value) AS v, count {order}",
                    ["v", "count"])
            return pids, ranks, names, value, count, child
    del pids, child
    # Unusual move text: one Python tuple per row.
    rows = conn.execute("SELECT position_id, move, coalesce(minimax_value, value), count, "
                        f"child_id {order}").fetchall()
    names = sorted({row[1] for row in rows})
    rank = {name: i for i, name in enumerate(names)}

    def column(i: int) -> np.ndarray:
        return np.array([NULL if r[i] is None else int(r[i]) for r in rows], dtype=np.int64)

    pids = column(0)
    ranks = np.array([rank[r[1]] for r in rows], dtype=np.int32)
    order_ = np.lexsort((ranks, pids))
    value, count = (column(2)[order_], column(3)[order_]) if values else (None, None)
    return pids[order_], ranks[order_], names, value, count, column(4)[order_]


class BookIndex:
    """Positions with their book moves and child links, read once from the book
    into numpy columns.

    Positions are rows ``0..N-1`` in id order (``ids``); their moves are edges
    in CSR form (the edges of row ``r`` are ``indptr[r]:indptr[r + 1]``,
    ordered by move), with the move as an index into the sorted
    ``move_names``, the value (``minimax_value`` when present, else
    ``value``; :data:`NULL` for none), the count and the child row (-1 when
    the child is not in the book). Moves without a stored child link
    (imported books) get their child by playing the move and finding the
    position by its zobrist key, confirmed by the exact position; nothing is
    written.

    ``sfen``, ``ply``, ``visits``, ``minimax`` and ``edges`` are read-only
    mappings by position id (``sfen`` reads the book, which must still be
    open).
    """

    def __init__(self, conn: sqlite3.Connection, ids: np.ndarray, ply: np.ndarray,
                 visits: np.ndarray, minimax: np.ndarray, indptr: np.ndarray,
                 move_names: list[str], edge_move: np.ndarray, edge_value: np.ndarray | None,
                 edge_count: np.ndarray | None, edge_child: np.ndarray,
                 edge_linked: np.ndarray,
                 start: int) -> None:
        self.ids = ids
        self.ply_column = ply
        self.visits_column = visits
        self.minimax_column = minimax
        self.indptr = indptr
        self.move_names = move_names
        self.edge_move = edge_move
        self.edge_value = edge_value
        self.edge_count = edge_count
        self.edge_child = edge_child
        self.edge_linked = edge_linked      # the moves row has its child_id stored
        self.start = start                  # row of the initial position, -1 if absent
        self.degree = np.diff(indptr)       # moves per row
        self.has_moves = self.degree > 0
        self.sfen: Mapping[int, str] = _SfenLookup(self, conn)
        self.ply: Mapping[int, int | None] = _ColumnLookup(self, ply)
        self.visits: Mapping[int, int | None] = _ColumnLookup(self, visits)
        self.minimax: Mapping[int, int] = _ColumnLookup(self, minimax, skip_null=True)
        self.edges: Mapping[int, list[BookEdge]] = _EdgeLookup(self)

    @classmethod
    def load(cls, book: Book, values: bool = True, workers: int = 1) -> BookIndex:
        """Read the index from ``book`` (in one read transaction). ``values`` False
        leaves the move values and counts out (``edge_value`` and ``edge_count`` are
        None): enough for :meth:`shortest_tree`, :meth:`roots` and :meth:`leaves`.
        ``workers`` > 1 plays the unlinked moves of large books on that many forked
        processes."""
        conn = book.conn
        own = not conn.in_transaction
        if own:  # one snapshot of the book for all the queries
            conn.execute("BEGIN")
        try:
            return cls._load(conn, values, workers)
        finally:
            if own and conn.in_transaction:
                conn.execute("COMMIT")

    @classmethod
    def _load(cls, conn: sqlite3.Connection, values: bool, workers: int) -> BookIndex:
        ids, ply, visits, minimax = sql_int_columns(
            conn, "SELECT id, ply, visits, minimax_value FROM positions ORDER BY id",
            ["id", "ply", "visits", "minimax_value"])
        if np.any(ids[1:] <= ids[:-1]):
            order = np.argsort(ids, kind="stable")
            ids, ply, visits, minimax = ids[order], ply[order], visits[order], minimax[order]
        pids, move, names, value, count, child_ids = _load_moves(conn, values)
        rows, known = find_rows(ids, pids)
        del pids
        if not known.all():  # moves of positions missing from the book: ignored
            rows, move, child_ids = rows[known], move[known], child_ids[known]
            if value is not None and count is not None:
                value, count = value[known], count[known]
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(ids)), out=indptr[1:])
        linked = child_ids != NULL
        child = np.full(len(child_ids), -1, dtype=np.int32)
        found, inside = find_rows(ids, child_ids[linked])
        child[np.flatnonzero(linked)[inside]] = found[inside]
        del child_ids, found, inside
        start = conn.execute("SELECT id FROM positions WHERE sfen = ?",
                             (STARTPOS_SFEN,)).fetchone()
        start_row = int(find_rows(ids, np.array([start[0]]))[0][0]) if start else -1
        index = cls(conn, ids, ply, visits, minimax, indptr, names, move, value, count,
                    child, linked, start_row)
        if not linked.all():
            _resolve_children(conn, index, rows, workers)
        return index

    # -- lookups ------------------------------------------------------------

    def row(self, pid: int) -> int | None:
        """The row of position ``pid``, None if it is not in the book."""
        rows, found = find_rows(self.ids, np.array([pid], dtype=np.int64))
        return int(rows[0]) if found[0] else None

    def rows(self, pids: np.ndarray) -> np.ndarray:
        """Rows of the positions ``pids`` (all in the book)."""
        return find_rows(self.ids, pids)[0]

    def _values(self) -> tuple[np.ndarray, np.ndarray]:
        if self.edge_value is None or self.edge_count is None:
            raise ValueError("BookIndex loaded without values")
        return self.edge_value, self.edge_count

    def _edge_objects(self, row: int) -> list[BookEdge]:
        edge_value, edge_count = self._values()
        edges = []
        for e in range(int(self.indptr[row]), int(self.indptr[row + 1])):
            value = int(edge_value[e])
            child = int(self.edge_child[e])
            edges.append(BookEdge(self.move_names[self.edge_move[e]],
                                  None if value == NULL else value, int(edge_count[e]),
                                  None if child < 0 else int(self.ids[child])))
        return edges

    def with_moves_rows(self) -> np.ndarray:
        """Rows with book moves, shallow first (unknown ply last), then by id."""
        rows = np.flatnonzero(self.has_moves)
        ply = self.ply_column[rows]
        unknown = ply == NULL
        return rows[np.lexsort((rows, np.where(unknown, 0, ply), unknown))]

    def with_moves(self) -> list[int]:
        """Positions with book moves, shallow first (unknown ply last), then by id."""
        return self.ids[self.with_moves_rows()].tolist()

    def book_score(self, pid: int) -> int | None:
        """The book's value for the side to move: minimax when present, else the best move's."""
        row = self.row(pid)
        if row is None:
            return None
        if self.minimax_column[row] != NULL:
            return int(self.minimax_column[row])
        values = self._values()[0][self.indptr[row]:self.indptr[row + 1]]
        values = values[values != NULL]
        return int(values.max()) if len(values) else None

    def best_edge(self, pid: int) -> BookEdge | None:
        row = self.row(pid)
        edges = [e for e in self._edge_objects(row) if e.value is not None] if row is not None \
            else []
        if not edges:
            return None
        return max(edges, key=lambda e: (e.value, e.count, e.move))

    def _edge_sources(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.ids), dtype=np.int32), np.diff(self.indptr))

    def best_values(self) -> np.ndarray:
        """Each row's best move value (:data:`NULL` when it has no move with a value)."""
        best = np.full(len(self.ids), NULL, dtype=np.int64)
        rows = np.flatnonzero(self.has_moves)
        if len(rows):  # NULL is the smallest int64: max() skips it
            best[rows] = np.maximum.reduceat(self._values()[0], self.indptr[rows])
        return best

    def root_rows(self) -> np.ndarray:
        """Rows of :meth:`roots`."""
        reached = np.zeros(len(self.ids), dtype=bool)
        reached[self.edge_child[self.edge_child >= 0]] = True
        rows = self.with_moves_rows()
        roots = rows[~reached[rows]]
        if self.start >= 0 and self.has_moves[self.start] and reached[self.start]:
            roots = np.concatenate([[self.start], roots])
        return roots

    def roots(self) -> list[int]:
        """The initial position (if in the book) and the positions with moves that no
        book move leads to."""
        return self.ids[self.root_rows()].tolist()

    def leaf_rows(self) -> np.ndarray:
        """Rows of :meth:`leaves`."""
        inner = self.edge_child >= 0
        inner[inner] = self.has_moves[self.edge_child[inner]]
        has_inner = np.zeros(len(self.ids), dtype=bool)
        has_inner[self._edge_sources()[inner]] = True
        rows = self.with_moves_rows()
        return rows[~has_inner[rows]]

    def leaves(self) -> list[int]:
        """Positions with moves none of whose moves leads to a position with moves."""
        return self.ids[self.leaf_rows()].tolist()

    def principal_rows(self, margin: int) -> np.ndarray:
        """Rows of :meth:`principal`."""
        roots = self.root_rows()
        seen = np.zeros(len(self.ids), dtype=bool)
        seen[roots] = True
        best = self.best_values()
        levels = [roots]
        frontier = roots
        while len(frontier):
            edges = _ranges(self.indptr[frontier], self.indptr[frontier + 1])
            owner = np.repeat(np.arange(len(frontier)), self.degree[frontier])
            # A node's edges in the book's order: linked moves, then the others.
            order = np.argsort(owner * 2 + ~self.edge_linked[edges], kind="stable")
            edges, owner = edges[order], owner[order]
            top = best[frontier][owner]
            value = self._values()[0][edges]
            child = self.edge_child[edges]
            follow = (top == NULL) | ((value != NULL) & (value >= top - margin))
            follow &= child >= 0
            follow[follow] = self.has_moves[child[follow]] & ~seen[child[follow]]
            child = child[follow]
            _unique, first = np.unique(child, return_index=True)
            frontier = child[np.sort(first)]
            seen[frontier] = True
            levels.append(frontier)
        return np.concatenate(levels)

    def principal(self, margin: int) -> list[int]:
        """Breadth first from the roots along every move within ``margin`` of the best."""
        return self.ids[self.principal_rows(margin)].tolist()

    def shortest_tree(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The shortest book lines from the initial position, as a tree over rows:
        (parent row, move index into ``move_names``, depth), -1 where a row is not
        reached. Breadth first; at equal depth the first parent, in order, with the
        first move by name wins."""
        n = len(self.ids)
        parent = np.full(n, -1, dtype=np.int32)
        move = np.full(n, -1, dtype=np.int32)
        depth = np.full(n, -1, dtype=np.int32)
        if self.start < 0:
            return parent, move, depth
        depth[self.start] = 0
        frontier = np.array([self.start], dtype=np.int64)
        level = 0
        while len(frontier):
            edges = _ranges(self.indptr[frontier], self.indptr[frontier + 1])
            child = self.edge_child[edges]
            new = child >= 0
            new[new] = depth[child[new]] < 0
            edges, child = edges[new], child[new]
            _unique, first = np.unique(child, return_index=True)
            first.sort()
            edges, frontier = edges[first], child[first].astype(np.int64)
            level += 1
            parent[frontier] = np.searchsorted(self.indptr, edges, side="right") - 1
            move[frontier] = self.edge_move[edges]
            depth[frontier] = level
        return parent, move, depth

    def paths_from_start(self) -> Mapping[int, list[str]]:
        """The shortest book line (USI moves) from the initial position to each position
        reachable from it (a read-only mapping by position id)."""
        return _PathLookup(self, *self.shortest_tree())


class _RowMapping(Mapping):
    """A read-only mapping by position id over some rows of a BookIndex."""

    def __init__(self, index: BookIndex) -> None:
        self._index = index

    def _row(self, pid: Any) -> int:
        row = self._index.row(pid) if isinstance(pid, (int, np.integer)) else None
        if row is None or not self._has(row):
            raise KeyError(pid)
        return row

    def _has(self, row: int) -> bool:
        return True

    def _rows(self) -> np.ndarray:
        return np.arange(len(self._index.ids))

    def __contains__(self, pid: object) -> bool:
        try:
            self._row(pid)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(self._index.ids[self._rows()].tolist())

    def __len__(self) -> int:
        return len(self._rows())


class _ColumnLookup(_RowMapping):
    def __init__(self, index: BookIndex, column: np.ndarray, skip_null: bool = False) -> None:
        super().__init__(index)
        self._column = column
        self._skip_null = skip_null

    def _has(self, row: int) -> bool:
        return not self._skip_null or self._column[row] != NULL

    def _rows(self) -> np.ndarray:
        if self._skip_null:
            return np.flatnonzero(self._column != NULL)
        return super()._rows()

    def __getitem__(self, pid: int) -> int | None:
        value = int(self._column[self._row(pid)])
        return None if value == NULL else value


class _SfenLookup(_RowMapping):
    def __init__(self, index: BookIndex, conn: sqlite3.Connection) -> None:
        super().__init__(index)
        self._conn = conn

    def __getitem__(self, pid: int) -> str:
        self._row(pid)
        return self._conn.execute("SELECT sfen FROM positions WHERE id = ?",
                                  (int(pid),)).fetchone()[0]


class _EdgeLookup(_RowMapping):
    def _has(self, row: int) -> bool:
        return bool(self._index.has_moves[row])

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._index.has_moves)

    def __getitem__(self, pid: int) -> list[BookEdge]:
        return self._index._edge_objects(self._row(pid))


class _PathLookup(_RowMapping):
    def __init__(self, index: BookIndex, parent: np.ndarray, move: np.ndarray,
                 depth: np.ndarray) -> None:
        super().__init__(index)
        self._parent, self._move, self._depth = parent, move, depth

    def _has(self, row: int) -> bool:
        return bool(self._depth[row] >= 0)

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._depth >= 0)

    def __getitem__(self, pid: int) -> list[str]:
        row = self._row(pid)
        line = []
        while self._parent[row] >= 0:
            line.append(self._index.move_names[self._move[row]])
            row = int(self._parent[row])
        return line[::-1]


_RESOLVE_BLOCK = 1 << 14     # positions per block (task) of child resolution
_PARALLEL_MIN_POSITIONS = 50_000  # fewer: not worth starting worker processes


_resolving: dict[str, Any] = {}  # what _resolve_block needs; forked workers inherit it


def _resolve_block(task: tuple[int, list[str]]) -> tuple[bytes, bytes, bytes, bytes]:
    """Play the unlinked moves of the positions ``block:block + len(sfens)`` (of those
    with unlinked moves): their HuffmanCodedPos, and the moves whose child's key may
    be in the book (edge, zobrist key, HuffmanCodedPos of the child)."""
    block, sfens = task
    first, stops = _resolving["first"], _resolving["stops"]
    names, present = _resolving["names"], _resolving["present"]
    lows = first[block:block + len(sfens)].tolist()
    highs = stops[block:block + len(sfens)].tolist()
    base = lows[0]
    moves = [names[m] for m in _resolving["moves"][base:highs[-1]].tolist()]
    own = np.zeros(len(sfens), dtype=cshogi.HuffmanCodedPos)
    hit_edge, hit_key, hit_hcp = array("q"), array("Q"), bytearray()
    scratch = np.zeros(1, dtype=cshogi.HuffmanCodedPos)
    scratch_bytes = memoryview(scratch).cast("B")
    board = cshogi.Board()
    set_sfen, from_usi, is_legal = board.set_sfen, board.move_from_usi, board.is_legal
    push, pop, key, to_hcp = board.push, board.pop, board.zobrist_hash, board.to_hcp
    for i, (sfen, lo, hi) in enumerate(zip(sfens, lows, highs)):
        set_sfen(sfen + " 1")
        to_hcp(own[i:i + 1])
        for e in range(lo - base, hi - base):
            move = from_usi(moves[e])
            if move and is_legal(move):
                push(move)
                z = key()
                if present[z >> 40]:
                    to_hcp(scratch)
                    hit_hcp += scratch_bytes
                    hit_edge.append(base + e)
                    hit_key.append(z)
                pop()
    return own.tobytes(), hit_edge.tobytes(), hit_key.tobytes(), bytes(hit_hcp)


def _resolve_children(conn: sqlite3.Connection, index: BookIndex, edge_rows: np.ndarray,
                      workers: int = 1) -> None:
    """Children of the moves without a stored child link: play the move, look the
    position up by its zobrist key and confirm it by its HuffmanCodedPos (the exact
    position: board, hands and side to move). Large books on ``workers`` processes."""
    ids = index.ids
    n = len(ids)
    unlinked = np.flatnonzero(~index.edge_linked)
    rows, first = np.unique(edge_rows[unlinked], return_index=True)
    stops = np.append(first[1:], len(unlinked))
    pids, zobrist = sql_int_columns(conn, "SELECT id, zobrist FROM positions ORDER BY id",
                                    ["id", "zobrist"])
    if len(pids) != n or np.any(pids != ids):
        raise RuntimeError("the book changed while it was read")
    zobrist = zobrist.view(np.uint64)
    by_key = np.argsort(zobrist, kind="stable")
    keys = zobrist[by_key]
    del zobrist, pids
    # A byte per 2**40 keys: most children outside the book skip the exact check.
    present = bytearray(1 << 24)
    np.frombuffer(present, dtype=np.uint8)[keys >> np.uint64(40)] = 1
    need = np.zeros(n, dtype=bool)
    need[rows] = True
    hcp = np.zeros(n, dtype=cshogi.HuffmanCodedPos)   # the rows' exact positions

    def tasks() -> Iterator[tuple[int, list[str]]]:
        sfens = compress(conn.execute("SELECT sfen FROM positions ORDER BY id"),
                         need.tolist())
        for block in range(0, len(rows), _RESOLVE_BLOCK):
            yield block, [sfen for (sfen,) in islice(sfens, _RESOLVE_BLOCK)]

    _resolving.update(first=first, stops=stops, names=index.move_names, present=present,
                      moves=index.edge_move[unlinked])
    parts: list[tuple[bytes, bytes, bytes]] = []
    try:
        for block, (own, *part) in zip(
                range(0, len(rows), _RESOLVE_BLOCK),
                fork_map(_resolve_block, tasks(),
                         workers if len(rows) >= _PARALLEL_MIN_POSITIONS else 1)):
            hcp[rows[block:block + _RESOLVE_BLOCK]] = np.frombuffer(
                own, dtype=cshogi.HuffmanCodedPos)
            parts.append(tuple(part))
    finally:
        _resolving.clear()
    del present
    # The moves into possible book positions: edge, key, HuffmanCodedPos (4 words).
    count = sum(len(p[0]) for p in parts) // 8
    hits = np.empty(count, dtype=np.int64)
    hit_key = np.empty(count, dtype=np.uint64)
    hit_words = np.empty((count, 4), dtype=np.uint64)
    at = 0
    while parts:
        edges, hit_keys, hit_hcp = parts.pop(0)
        size = len(edges) // 8
        hits[at:at + size] = np.frombuffer(edges, dtype=np.int64)
        hit_key[at:at + size] = np.frombuffer(hit_keys, dtype=np.uint64)
        hit_words[at:at + size] = np.frombuffer(hit_hcp, dtype=np.uint64).reshape(-1, 4)
        at += size
    by_hit = np.argsort(hit_key)  # sorted needles: a faster search
    lo = np.empty(len(hits), dtype=np.int64)
    hi = np.empty(len(hits), dtype=np.int64)
    lo[by_hit] = np.searchsorted(keys, hit_key[by_hit], side="left")
    hi[by_hit] = np.searchsorted(keys, hit_key[by_hit], side="right")
    del hit_key, by_hit
    # Candidates: every book position with the child's key.
    candidate_hit = np.repeat(np.arange(len(hits)), hi - lo)
    candidate_row = by_key[_ranges(lo, hi)]
    del lo, hi, by_key, keys
    missing = np.unique(candidate_row[~need[candidate_row]])
    board = cshogi.Board()
    for chunk in range(0, len(missing), 500):
        part = ids[missing[chunk:chunk + 500]].tolist()
        for pid, sfen in conn.execute(
                f"SELECT id, sfen FROM positions WHERE id IN ({','.join('?' * len(part))})",
                part):
            row = int(find_rows(ids, np.array([pid]))[0][0])
            board.set_sfen(sfen + " 1")
            board.to_hcp(hcp[row:row + 1])
    words = hcp.view(np.uint8).reshape(-1, 32).view(np.uint64)
    same = np.zeros(len(candidate_row), dtype=bool)
    for part in range(0, len(same), _RESOLVE_BLOCK):
        here = slice(part, part + _RESOLVE_BLOCK)
        same[here] = (words[candidate_row[here]] == hit_words[candidate_hit[here]]).all(axis=1)
    # Distinct positions have distinct codes: at most one candidate matches.
    index.edge_child[unlinked[hits[candidate_hit[same]]]] = candidate_row[same]


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
        visits = index.visits_column[rows]
        return index.ids[rows[np.where(visits == NULL, 0, visits) >= min_visits]].tolist()
    raise BookgenError(f"unknown selection {select!r} (choose from {', '.join(SELECTIONS)})")


def matching_runs(book: Book, key: dict[str, Any]) -> list[int]:
    """``refine search`` runs made with the analysis key ``key``, oldest first."""
    runs = []
    for run_id, params in book.conn.execute(
            "SELECT id, params FROM runs WHERE command = 'refine search' ORDER BY id"):
        try:
            if json.loads(params).get("key") == key:
                runs.append(run_id)
        except (ValueError, AttributeError):
            continue
    return runs


def analysed_positions(book: Book, key: dict[str, Any]) -> set[int]:
    """Positions analysed by any run with the analysis key ``key``."""
    runs = matching_runs(book, key)
    analysed: set[int] = set()
    for start in range(0, len(runs), 500):
        chunk = runs[start:start + 500]
        analysed.update(row[0] for row in book.conn.execute(
            f"SELECT position_id FROM analyses WHERE run_id IN ({','.join('?' * len(chunk))})",
            chunk))
    return analysed


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
    raising :class:`bookgen.lock.BookLocked`.
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
        analyser: Analyser | None = start_analyser(settings)
        try:
            store: Book | None = Book(path, create=False, wait=wait)
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
                if backend is not None:
                    if abandon:
                        backend.terminate()
                    else:
                        backend.close()
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
                store.conn.execute(
                    "INSERT INTO analyses(position_id, run_id, engine, score, mate, bound, "
                    "depth, seldepth, nodes, bestmove, pv, created_at) VALUES (?, ?, ?, ?, ?, "
                    "?, ?, ?, ?, ?, ?, ?)",
                    (result.position_id, summary.run_id, summary.engine, result.score,
                     result.mate, result.bound, result.depth, result.seldepth, result.nodes,
                     result.bestmove, result.pv or None, now()))
            store.end_run(summary.run_id, status="running", counts=_counts(summary))
    fault_point("refine-search-recorded")
