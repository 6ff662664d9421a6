"""The book suite walks the BookIndex: the same suites as the walk that pushed moves.

``old_make_suite`` below is the implementation the index replaced: it reads
the book's own valued moves by sfen and walks breadth-first from the initial
position by pushing moves on a board. Both run on many generated books
(hypothesis, derandomized: a fixed set of examples), imported (child links
found by playing the moves) and refined (stored links, minimax values,
transposition rows that are not book moves), and on the imported sample book;
their files, summaries and errors must be identical.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import cshogi
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from bookgen.analysis import suites
from bookgen.analysis.suites import (
    REPETITION_PLIES,
    BookSuiteSettings,
    SuiteLine,
    SuiteSelection,
    SuiteSummary,
    make_suite,
    write_suite,
)
from bookgen.bookfiles.importer import import_books
from bookgen.errors import BookgenError
from bookgen.refine.minimax import MinimaxSettings, refine_minimax
from conftest import ROOT, key_of, write_db2016

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
OWN = ("NOT (m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT NULL "
       "AND m.run_id IN (SELECT id FROM main.runs WHERE command IN ('refine minimax', 'link')))")


# ---------------------------------------------------------------- the old implementation


def _old_load(path: Path, values: str) -> dict[str, list[tuple[int, str]]]:
    column = "coalesce(m.minimax_value, m.value)" if values == "minimax" else "m.value"
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(f"SELECT p.sfen, m.move, {column} FROM moves m JOIN positions p "
                            f"ON p.id = m.position_id WHERE {OWN}").fetchall()
    finally:
        conn.close()
    book: dict[str, list[tuple[int, str]]] = {}
    for sfen, move, value in rows:
        if value is not None:
            book.setdefault(sfen, []).append((value, move))
    return book


def _old_best(entries: list[tuple[int, str]]) -> tuple[int, str]:
    return max(entries, key=lambda entry: (entry[0], entry[1]))


def _old_repeats_along_best(board: cshogi.Board, book: dict[str, list[tuple[int, str]]]
                            ) -> bool:
    seen = {key_of(board)}
    pushed = 0
    try:
        for _ in range(REPETITION_PLIES):
            entries = book.get(key_of(board))
            if not entries:
                return False
            board.push_usi(_old_best(entries)[1])
            pushed += 1
            key = key_of(board)
            if key in seen:
                return True
            seen.add(key)
        return False
    finally:
        for _ in range(pushed):
            board.pop()


def old_make_suite(book: Path, out: Path, settings: BookSuiteSettings) -> SuiteSummary:
    selection = settings.selection
    max_value = selection.max_value_cp
    wanted, last_ply = selection.wanted_plies()
    entries = _old_load(book, settings.values)
    if START not in entries:
        raise BookgenError(f"{book}: the initial position has no book moves")
    kept: list[SuiteLine] = []
    reached = 0
    rejected = {"outside the plies": 0, f"|value| over {max_value}": 0, "best line repeats": 0}
    seen = {START}
    queue: deque[list[str]] = deque([[]])
    board = cshogi.Board()
    while queue:
        line = queue.popleft()
        board.reset()
        for move in line:
            board.push_usi(move)
        ply = len(line) + 1
        moves = entries.get(key_of(board))
        if not moves:
            continue
        best_value = _old_best(moves)[0]
        reached += 1
        if ply not in wanted:
            rejected["outside the plies"] += 1
        elif abs(best_value) > max_value:
            rejected[f"|value| over {max_value}"] += 1
        elif _old_repeats_along_best(board, entries):
            rejected["best line repeats"] += 1
        else:
            kept.append(SuiteLine(tuple(line), best_value))
        if ply >= last_ply:
            continue
        for _value, move in sorted(moves, key=lambda m: m[1]):
            board.push_usi(move)
            key = key_of(board)
            board.pop()
            if key not in seen:
                seen.add(key)
                queue.append(line + [move])
    if not kept:
        left_out = ", ".join(f"{count} {rule}" for rule, count in rejected.items() if count)
        raise BookgenError(f"no position qualified, {out} not written: {reached} book "
                           f"positions reached from the initial position"
                           + (f", left out: {left_out}" if left_out else ""))
    return write_suite(out, kept, selection)


# ---------------------------------------------------------------- the comparison


def settings_of(options: dict[str, Any]) -> BookSuiteSettings:
    """The settings of ``options``: ``values`` and the selection's fields, with
    ``max_value`` for ``max_value_cp``."""
    selection = {("max_value_cp" if key == "max_value" else key): value
                 for key, value in options.items() if key != "values"}
    return BookSuiteSettings(SuiteSelection(**selection), values=options.get("values", "raw"))


def run(suite: Any, out: Path, book: Path, options: dict[str, Any]) -> tuple[Any, bytes | None]:
    try:
        summary = suite(book, out, settings_of(options))
    except BookgenError as error:
        return ("error", str(error)), None
    data = out.read_bytes()
    out.unlink()
    return summary, data


def assert_same_suites(book: Path, options: dict[str, Any], where: Path) -> bool:
    """Both walks on ``book``; returns whether a suite was written."""
    out = where / "suite.txt"
    new = run(make_suite, out, book, options)
    old = run(old_make_suite, out, book, options)
    assert new == old, options
    return new[1] is not None


# Moves that meet again (transpositions) and rooks that go back and forth
# (repetitions along the best moves).
FAVOURITES = ["7g7f", "3c3d", "2g2f", "8c8d", "6i7h", "4a3b", "2h3h", "3h2h", "8b7b", "7b8b",
              "7h6i", "3b4a", "2f2e", "8d8e"]
SHUFFLE = ["2h3h", "8b7b", "3h2h", "7b8b"]


@st.composite
def generated_books(draw) -> list[tuple[str, list[tuple]]]:
    """DB2016 blocks of random walks from the initial position, mostly along
    FAVOURITES, some ending in a cycle (SHUFFLE); each position holds the moves
    played from it, with coarse values near 0 (some without value) and counts."""
    moves_of: dict[str, dict[str, tuple]] = {}
    plies_of: dict[str, int] = {}
    for _walk in range(draw(st.integers(1, 8))):
        board = cshogi.Board()
        # Some walks end with both rooks going back and forth (a cycle), soon.
        shuffle = SHUFFLE * 2 if draw(st.integers(0, 2)) == 0 else []
        plies = draw(st.integers(0, 3 if shuffle else 14))
        for ply in range(plies + len(shuffle)):
            legal = [cshogi.move_to_usi(m) for m in board.legal_moves]
            if ply >= plies:
                if shuffle[ply - plies] not in legal:
                    break
                choices = [shuffle[ply - plies]]
            else:
                choices = [m for m in FAVOURITES if m in legal]
                if not choices or draw(st.integers(0, 9)) == 0:
                    choices = legal
            move = choices[draw(st.integers(0, len(choices) - 1))]
            key = key_of(board)
            plies_of.setdefault(key, board.move_number)
            if move not in moves_of.setdefault(key, {}):
                # (coarse: best moves that tie)
                value = None if draw(st.integers(0, 6)) == 0 else 25 * draw(st.integers(-6, 6))
                moves_of[key][move] = (move, None, value, 1, draw(st.integers(1, 9)))
            board.push_usi(move)
    return [(f"{key} {plies_of[key]}", list(moves.values())) for key, moves in moves_of.items()]



def cycle_book() -> list[tuple[str, list[tuple]]]:
    """Blocks of a book whose only line is the rook shuffle: its best line repeats."""
    board = cshogi.Board()
    blocks = []
    for move in SHUFFLE * 2:
        blocks.append((f"{key_of(board)} {board.move_number}", [(move, None, 0, 1, 1)]))
        board.push_usi(move)
    return blocks[:len(SHUFFLE)]


suite_options = st.fixed_dictionaries({
    "max_value": st.sampled_from([20, 60, 100, 200]),
    "values": st.sampled_from(["raw", "minimax"]),
}, optional={
    "min_ply": st.integers(1, 4),
    "max_ply": st.integers(4, 16),
    "plies": st.lists(st.integers(1, 12), min_size=1, max_size=4),
    "limit": st.integers(1, 5),
    "per_line_cap": st.integers(1, 3),
})


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(blocks=generated_books(), options=suite_options, refined=st.booleans())
@example(blocks=cycle_book(), options={"max_value": 100, "values": "minimax"}, refined=True)
@example(blocks=cycle_book(), options={"max_value": 100, "values": "raw"}, refined=False)
def test_the_index_walk_makes_the_old_suites(blocks, options, refined):
    if "min_ply" in options and "max_ply" in options and options["min_ply"] > options["max_ply"]:
        options["min_ply"] = options["max_ply"]
    with tempfile.TemporaryDirectory() as temporary:
        where = Path(temporary)
        book = where / "book.sqlite"
        if not blocks:
            return
        import_books(book, [write_db2016(where / "book.db", blocks)], progress=False)
        if refined:
            refine_minimax(book, MinimaxSettings(scan_workers=1))
        assert_same_suites(book, options, where)


def test_the_generated_books_cover_every_outcome(monkeypatch):
    """The generator's books give suites, lines repeating along the best moves and
    errors; and refined books hold transposition rows (rows the walks leave out)."""
    outcomes: dict[str, int] = {"written": 0, "repeats": 0, "error": 0, "transpositions": 0}
    repeats = suites._repeats_along_best

    def counted(*args: Any) -> bool:
        found = repeats(*args)
        outcomes["repeats"] += found
        return found

    monkeypatch.setattr(suites, "_repeats_along_best", counted)

    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(blocks=generated_books())
    @example(blocks=cycle_book())  # the generator's own draws may miss a repeating line
    def count(blocks):
        if not blocks:
            return
        with tempfile.TemporaryDirectory() as temporary:
            where = Path(temporary)
            book = where / "book.sqlite"
            import_books(book, [write_db2016(where / "book.db", blocks)], progress=False)
            refine_minimax(book, MinimaxSettings(scan_workers=1))
            conn = sqlite3.connect(book)
            outcomes["transpositions"] += conn.execute(
                f"SELECT count(*) FROM moves m WHERE NOT {OWN}").fetchone()[0]
            conn.close()
            for max_value in (150, 10):
                try:
                    summary = make_suite(book, where / "suite.txt",
                                         BookSuiteSettings(SuiteSelection(max_value_cp=max_value)))
                    outcomes["written"] += summary.positions > 0
                except BookgenError:
                    outcomes["error"] += 1

    count()
    assert all(outcomes.values()), outcomes


@pytest.mark.parametrize("values", ["raw", "minimax"])
@pytest.mark.parametrize("refined", [False, True])
def test_the_imported_sample_book(tmp_path, values, refined):
    book = tmp_path / "sample.sqlite"
    import_books(book, [ROOT / "data" / "sample.db"], progress=False)
    if refined:
        refine_minimax(book, MinimaxSettings(scan_workers=1))
    written = 0
    for options in ({"max_value": 100}, {"max_value": 30, "max_ply": 8},
                    {"max_value": 300, "plies": [3, 5, 9]}, {"max_value": 0},
                    {"max_value": 200, "min_ply": 2, "per_line_cap": 1, "cap_plies": 2}):
        written += assert_same_suites(book, {**options, "values": values}, tmp_path)
    assert written >= 3
    shutil.rmtree(tmp_path / "suite.txt", ignore_errors=True)
