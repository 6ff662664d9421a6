"""``bookgen refine mistakes``: positions where the book and an alpha-beta engine disagree.

The book's score ``s`` of a position is its ``minimax_value`` when ``refine
minimax`` filled it, else the value of its best book move (``moves.minimax_value``
when present, else ``moves.value``); the engine's score ``o`` is the latest
analysis of the position by ``refine search`` with one analysis key (engine,
options, limits). Both are centipawns for the side to move. dlshogi's
``diff_eval`` rule flags the position when

    ((s + thr) * o < 0 or (s - thr) * o < 0 or s * (o + opp) < 0 or s * (o - opp) < 0)
    and (|o - s| >= diff or the engine announced a mate)

The rule's settings are a :class:`bookgen.refine.settings.DetectionSettings`.
``thr`` (``threshold_cp``, 150) widens the test on the book's score and ``opp``
(``opp_threshold_cp``, default ``thr``; dlshogi calls the engine's score the
"opponent" score) the test on the engine's: the first part holds unless both
scores are clearly on the same side (``s >= thr and o >= opp``, or
``s <= -thr and o <= -opp``). ``diff`` (``diff_cp``) defaults to 200 cp: two
thirds of a minor piece, well above the noise between a fixed-node search and
a book value, and a difference a network's training can feel. Such a position
is a mistake of kind ``diff``. A mate the engine announced where the book does
not hold a mate for the same side is a mistake of kind ``missed_mate``
whatever the rule says.

``iterate`` (:class:`bookgen.refine.settings.ExtensionSettings`) follows
dlshogi's ``iter_diff_eval``: for each newly flagged position it extends the
book from the position after the engine's best move when the book was too
pessimistic (``o > s``), else after the book's best move. An engine move that
is not yet a book move is added to the position's moves first (value and
``eval_value`` the engine's score, depth the analysis's, count 1, child
linked), so that what grows behind it reaches the position's value. Each
position after such a move is the root of its own ``grow`` run (``expand``
positions, no ``eval_threshold_cp`` cut, its root recorded as
``mistakes:<run>:<iteration>:<number>``), made by the :class:`Extender` the
caller passes in (the CLI passes :func:`bookgen.cli.refine.grow_extender`,
which runs :func:`bookgen.grow.grow`: refine does not import the grow stage);
then ``refine minimax`` runs, the positions the grow runs expanded are
searched with the same analysis key, and the mistakes are detected again. It
stops when a round flags no position that an earlier round had not flagged, or
after ``max_iterations`` extensions. Every round's mistakes are recorded with
their round number (``iteration``); the last round's are the result.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import cshogi

from bookgen.engines.settings import EngineSettings
from bookgen.errors import BookgenError
from bookgen.formats.positions import Roots
from bookgen.position import board_key, signed64
from bookgen.refine.book_search import search
from bookgen.refine.minimax import refine_minimax
from bookgen.refine.settings import (
    DetectionSettings,
    ExtensionSettings,
    MistakesSettings,
    SearchSettings,
)
from bookgen.signals import Interrupted, RunStop, stop_on_interrupt
from bookgen.store import DEFAULT_BOOK, Book, MoveRows, queries, writes
from bookgen.store.index import BookIndex
from bookgen.store.runs import (
    command_and_params,
    last_search_with_analyses,
    latest_analyses,
    mark_dead_runs,
    matching_runs,
    positions_expanded_by,
)
from bookgen.timestamps import utc_now
from bookgen.values import MATE_BOUND, MATE_VALUE
from bookgen.workers.cluster import connected

__all__ = ["Extender", "Extension", "Mistake", "MistakesSummary", "classify", "find_mistakes",
           "mistakes", "position_line"]


class Extension(Protocol):
    """What one extension reports (:class:`bookgen.grow.GrowSummary` is one)."""

    @property
    def run_id(self) -> int: ...

    @property
    def status(self) -> str: ...

    @property
    def expansions(self) -> int: ...


class Extender(Protocol):
    """Grows ``book`` from ``roots`` as one run, by ``settings.expand`` expansions
    with the settings' evaluator, playouts and batch size, without stopping at
    values beyond ``eval_threshold_cp``: the CLI passes one that calls
    :func:`bookgen.grow.grow` (:func:`bookgen.cli.refine.grow_extender`)."""

    def __call__(self, book: Path, settings: ExtensionSettings, *, roots: Roots,
                 eval_threshold_cp: int, seed: int, progress: bool) -> Extension: ...


def classify(s: int, o: int, engine_mate: int | None,
             thr: int = DetectionSettings.threshold_cp, opp: int | None = None,
             diff: int = DetectionSettings.diff_cp) -> str | None:
    """``"missed_mate"``, ``"diff"`` or None for book score ``s`` and engine score ``o``."""
    opp = thr if opp is None else opp
    if engine_mate is not None:
        book_mate_same_side = abs(s) >= MATE_BOUND and (s > 0) == (o > 0)
        if not book_mate_same_side:
            return "missed_mate"
    disagree = ((s + thr) * o < 0 or (s - thr) * o < 0
                or s * (o + opp) < 0 or s * (o - opp) < 0)
    if disagree and (abs(o - s) >= diff or engine_mate is not None):
        return "diff"
    return None


@dataclass
class Mistake:
    position_id: int
    sfen: str
    ply: int | None
    kind: str
    book_value: int
    engine_value: int
    difference: int            # engine - book, for the side to move
    engine_mate: int | None
    book_move: str | None
    engine_move: str | None
    analysis_run_id: int
    reason: str
    line: list[str] | None = None   # shortest book line from the initial position
    engine_depth: int | None = None

    @property
    def extension_move(self) -> str | None:
        """The move ``--iterate`` extends along: the engine's where the book was too
        pessimistic, else the book's."""
        if self.engine_value > self.book_value and self.engine_move:
            return self.engine_move
        return self.book_move or self.engine_move

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["position"] = position_line(self)
        return result


def position_line(mistake: Mistake) -> str:
    """``startpos moves ...`` along the shortest book line, else ``sfen SFEN PLY``."""
    if mistake.line is not None:
        return "startpos moves " + " ".join(mistake.line) if mistake.line else "startpos"
    return f"sfen {mistake.sfen} {mistake.ply or 1}"


def _reason(kind: str, s: int, o: int, mate: int | None, thr: int, opp: int, diff: int) -> str:
    if kind == "missed_mate":
        side = "the side to move mates" if (mate or 0) > 0 else "the side to move is mated"
        return f"engine: mate in {abs(mate or 0)} ({side}); book {s:+d}"
    return (f"book {s:+d} and engine {o:+d} are not both beyond +-{thr}/{opp} on one side; "
            f"difference {abs(o - s)} >= {diff}" if abs(o - s) >= diff else
            f"book {s:+d} and engine {o:+d} disagree and the engine sees a mate")


def _analysis_key(book: Book, engine: str | None, analysis_run: int | None
                  ) -> tuple[dict[str, Any], int]:
    """The analysis key to compare with and the run it was taken from."""
    if analysis_run is not None:
        run = command_and_params(book, analysis_run)
        if run is None or run[0] != "refine search":
            raise BookgenError(f"run {analysis_run} is not a refine search run")
        return json.loads(run[1])["key"], analysis_run
    row = last_search_with_analyses(book, engine)
    if row is None:
        which = f" by {engine}" if engine else ""
        raise BookgenError(f"{book.path}: no refine search analyses{which}; run "
                           "'bookgen refine search' first")
    return json.loads(row[1])["key"], row[0]


def _detect(book: Book, key: dict[str, Any], rule: DetectionSettings
            ) -> tuple[list[Mistake], int]:
    """Mistakes of the book against the analyses with ``key``; also how many
    positions were compared."""
    thr, opp, diff = rule.threshold_cp, rule.opp_cp, rule.diff_cp
    index = BookIndex.load(book)
    analyses = latest_analyses(book, matching_runs(book, key))
    paths = index.paths_from_start()
    found: list[Mistake] = []
    compared = 0
    for pid, (run_id, o, mate, bestmove, depth) in analyses.items():
        s = index.book_score(pid)
        if s is None:
            continue
        compared += 1
        kind = classify(s, o, mate, thr, opp, diff)
        if kind is None:
            continue
        best = index.best_edge(pid)
        found.append(Mistake(pid, index.sfen[pid], index.ply[pid], kind, s, o, o - s, mate,
                             best.move if best else None, bestmove, run_id,
                             _reason(kind, s, o, mate, thr, opp, diff), paths.get(pid), depth))
    found.sort(key=lambda m: (m.ply is None, m.ply or 0, -abs(m.difference), m.position_id))
    return found, compared


@dataclass
class MistakesSummary:
    """What a refine mistakes run found: the last round's ``mistakes`` among the
    ``compared`` positions analysed with the analysis ``key`` (of ``engine``),
    one entry per round in ``rounds``, and the rows the run wrote itself (its
    grow and search runs count theirs in their own ``runs`` rows).
    :meth:`as_dict` is ``refine mistakes --json`` (its ``notes`` are always
    empty, kept for the JSON of earlier versions)."""

    book: str
    run_id: int
    status: str
    engine: str
    key: dict[str, Any]
    settings: MistakesSettings
    compared: int = 0
    mistakes: list[Mistake] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    positions_added: int = 0
    moves_added: int = 0
    moves_updated: int = 0

    def as_dict(self) -> dict[str, Any]:
        detection = self.settings.detection
        return {"book": self.book, "run_id": self.run_id, "status": self.status,
                "engine": self.engine, "key": self.key, "threshold": detection.threshold_cp,
                "opp_threshold": detection.opp_cp, "diff": detection.diff_cp,
                "compared": self.compared, "rounds": self.rounds, "notes": [],
                "positions_added": self.positions_added, "moves_added": self.moves_added,
                "moves_updated": self.moves_updated,
                "mistakes": [m.as_dict() for m in self.mistakes]}


def find_mistakes(book: str | Path = DEFAULT_BOOK,
                  detection: DetectionSettings | None = None) -> list[Mistake]:
    """The mistakes of ``book`` by the rule and against the analyses ``detection``
    names (None: the defaults), without recording anything (read-only)."""
    detection = detection if detection is not None else DetectionSettings()
    with Book(book, create=False, readonly=True) as store:
        key, _run = _analysis_key(store, detection.engine, detection.analysis_run)
        return _detect(store, key, detection)[0]


def mistakes(book: str | Path = DEFAULT_BOOK, settings: MistakesSettings | None = None, *,
             extender: Extender | None = None, progress: bool = True,
             wait: bool = False) -> MistakesSummary:
    """Find (and with ``settings.iterate`` work on) the book's evaluation mistakes;
    records them in the ``mistakes`` table under a ``refine mistakes`` run. See the
    module docstring, ``bookgen refine mistakes --help`` and
    :class:`bookgen.refine.settings.MistakesSettings` (None: the defaults).
    ``iterate`` needs ``extender`` (:func:`bookgen.cli.refine.grow_extender`), which
    makes the grow runs with ``settings.extension``. ``progress``: show progress
    bars. ``wait``: when another process writes the book, wait for it instead of
    raising :class:`bookgen.store.lock.BookLocked`."""
    settings = settings if settings is not None else MistakesSettings()
    if settings.iterate and extender is None:
        raise BookgenError("iterate needs an extender: pass "
                           "extender=bookgen.cli.refine.grow_extender")
    detection = settings.detection
    path = Path(book)
    if not path.is_file():
        raise BookgenError(f"{path}: no such book")
    store = Book(path, create=False, wait=wait)
    try:
        mark_dead_runs(store)
        key, key_run = _analysis_key(store, detection.engine, detection.analysis_run)
        with store.transaction():
            run_id = store.begin_run("refine mistakes", settings.params(key, key_run),
                                     evaluator=key["engine"])
            store.end_run(run_id, status="running", counts={"pid": os.getpid()})
        summary = MistakesSummary(str(book), run_id, "running", key["engine"], key, settings)
        status = "failed"
        try:
            cluster = settings.extension.cluster if settings.iterate else None
            with stop_on_interrupt() as stop, connected(cluster):
                status = _rounds(store, summary, stop, progress, extender)
        finally:
            summary.status = status
            with store.transaction():
                _end_run(store, summary, status)
        return summary
    finally:
        store.close()


def _end_run(store: Book, summary: MistakesSummary, status: str) -> None:
    store.end_run(summary.run_id, status=status, positions_added=summary.positions_added,
                  moves_added=summary.moves_added, moves_updated=summary.moves_updated,
                  counts=_counts(summary))


def _counts(summary: MistakesSummary) -> dict[str, Any]:
    return {"pid": os.getpid(), "compared": summary.compared,
            "mistakes": len(summary.mistakes), "rounds": summary.rounds, "notes": []}


def _record(store: Book, summary: MistakesSummary, iteration: int,
            found: list[Mistake]) -> None:
    with store.transaction():
        writes.insert_mistakes(
            store.conn,
            [(summary.run_id, iteration, m.position_id, m.analysis_run_id, m.kind, m.book_value,
              m.engine_value, m.difference, m.book_move, m.engine_move, m.reason, utc_now())
             for m in found])
        _end_run(store, summary, "running")


def _rounds(store: Book, summary: MistakesSummary, stop: RunStop, progress: bool,
            extender: Extender | None) -> str:
    settings = summary.settings
    flagged_before: set[int] = set()
    iteration = 0
    while True:
        found, summary.compared = _detect(store, summary.key, settings.detection)
        new = [m for m in found if m.position_id not in flagged_before]
        summary.mistakes = found
        summary.rounds.append({"iteration": iteration, "mistakes": len(found), "new": len(new)})
        _record(store, summary, iteration, found)
        if not settings.iterate or not new or iteration >= settings.extension.max_iterations:
            return "done"
        if stop.is_set():
            return "interrupted"
        iteration += 1
        flagged_before.update(m.position_id for m in found)
        assert extender is not None  # mistakes() refuses iterate without one
        status = _extend(store, summary, stop, new, extender, iteration, progress)
        if status != "done" or stop.is_set():
            return status if status != "done" else "interrupted"


def _extend(store: Book, summary: MistakesSummary, stop: RunStop, new: list[Mistake],
            extender: Extender, iteration: int, progress: bool) -> str:
    """One ``iter_diff_eval`` step: grow (``extender``) from the positions after the
    chosen moves, propagate, search what was added. Returns the status of the step.
    The grow run from the ``number``-th root of extension ``iteration`` records its
    root as ``mistakes:<this run>:<iteration>:<number>``, and its seed is
    ``(seed + iteration) * 100_003 + number``."""
    extension = summary.settings.extension
    seed = extension.seed + iteration
    roots: dict[str, None] = {}
    added_moves = 0
    for mistake in new:
        move = mistake.extension_move
        if move is None:
            continue
        board = cshogi.Board(f"{mistake.sfen} {mistake.ply or 1}")
        if not board.push_usi(move):
            continue
        roots[f"sfen {board.sfen()}"] = None
        if move == mistake.engine_move:
            added_moves += _add_engine_move(store, summary, mistake, board)
    step = summary.rounds[-1]
    step["roots"] = len(roots)
    step["engine_moves_added"] = added_moves
    if not roots:
        return "done"
    # One grow run per root: a single run with all the roots would pick them at
    # random and could leave some mistakes without any extension.
    grow_runs: list[int] = []
    step["grow_runs"] = grow_runs
    step["expanded"] = 0
    for number, root in enumerate(roots):
        if stop.is_set():
            return "interrupted"
        label = f"mistakes:{summary.run_id}:{iteration}:{number}"
        grown = extender(store.path, extension, roots=Roots((root,), label),
                         eval_threshold_cp=MATE_VALUE, seed=seed * 100_003 + number,
                         progress=progress)
        grow_runs.append(grown.run_id)
        step["expanded"] += grown.expansions
        if grown.status != "done":
            return grown.status
    try:
        with stop.abortable():  # one transaction: nothing or everything is written
            refine_minimax(store.path)
    except Interrupted:
        return "interrupted"
    added = positions_expanded_by(store, grow_runs)
    if not added:
        return "done"
    if stop.is_set():
        return "interrupted"
    # The same analysis key, with refine search's default timeout and retries.
    settings = SearchSettings(EngineSettings.from_key(summary.key), workers=extension.workers,
                              cluster=extension.cluster)
    searched = search(store.path, settings, only=added, progress=progress)
    step["search_run"] = searched.run_id
    step["analysed"] = searched.analysed
    return searched.status


def _add_engine_move(store: Book, summary: MistakesSummary, mistake: Mistake,
                     child_board: cshogi.Board) -> int:
    """Make the engine's move a book move of the mistaken position (valued at the
    engine's score, child linked), so that what grows behind it reaches the
    position's value. Returns 1 if a move was added, 0 if it was a book move;
    counts the rows written in ``summary``."""
    conn = store.conn
    run_id = summary.run_id
    engine_move = mistake.engine_move
    assert engine_move is not None  # called for the engine's move only (_extend)
    if queries.has_move(conn, mistake.position_id, engine_move, MoveRows.OWN):
        return 0
    child_sfen = board_key(child_board)
    ply = mistake.ply + 1 if mistake.ply is not None else None
    with store.transaction():
        found = queries.position_id(conn, child_sfen)
        if found is None:
            child_id = writes.add_position(conn, child_sfen, signed64(child_board.zobrist_hash()),
                                           ply, child_board.turn, run_id)
            positions_added = 1
        else:
            child_id = found
            positions_added = 0
        transposition = queries.has_move(conn, mistake.position_id, engine_move, MoveRows.ALL)
        # A transposition row refine minimax added for this move becomes a book move.
        writes.upsert_engine_move(conn, mistake.position_id, engine_move, mistake.engine_value,
                                  mistake.engine_depth, child_id, mistake.engine_value, run_id)
    summary.positions_added += positions_added
    if transposition:
        summary.moves_updated += 1
    else:
        summary.moves_added += 1
    return 1
