"""bookgen suite: dlshogi's make_gokaku_sfen rule over the book."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import cshogi
import pytest

from bookgen.analysis.suites import (
    BookSuiteSettings,
    SuiteSelection,
    SuiteSummary,
    make_suite,
    parse_plies,
)
from bookgen.cli.support import error_text
from bookgen.errors import SettingsError
from bookgen.grow import grow
from bookgen.store import ValueColumn
from conftest import ROOT, run_cli, small_grow

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


def book_values(book) -> dict[str, dict[str, int]]:
    conn = sqlite3.connect(book)
    rows = conn.execute("SELECT p.sfen, m.move, m.value FROM moves m "
                        "JOIN positions p ON p.id = m.position_id").fetchall()
    conn.close()
    result: dict[str, dict[str, int]] = {}
    for sfen, move, value in rows:
        result.setdefault(sfen, {})[move] = value
    return result


def test_suite_from_a_grown_book(tmp_path):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(30, 40, seed=3), progress=False)
    values = book_values(book)
    out = tmp_path / "suite.txt"
    summary = json.loads(run_cli("suite", "-b", book, "-o", out, "--max-value", "15",
                                 "--min-ply", "2", "--max-ply", "6", "--per-line-cap", "2",
                                 "--cap-plies", "2", "--json").stdout)
    lines = out.read_text().splitlines()
    assert len(lines) == summary["positions"] > 0
    prefixes = Counter()
    seen = set()
    for line in lines:
        assert line.startswith("startpos moves ")
        board = cshogi.Board()
        moves = line.split()[2:]
        for move in moves:
            key = board.sfen().rsplit(" ", 1)[0]
            assert move in values[key], f"{line}: {move} is not a book move"
            board.push_usi(move)
        key = board.sfen().rsplit(" ", 1)[0]
        assert key not in seen
        seen.add(key)
        assert 2 <= len(moves) + 1 <= 6
        assert abs(max(values[key].values())) <= 15
        prefixes[tuple(moves[:2])] += 1
    assert max(prefixes.values()) <= 2


def test_lines_repeating_along_best_moves_are_left_out(tmp_path):
    lines = ["#YANEURAOU-DB2016 1.00", f"sfen {START} 1", "5i5h none 0 1 1",
             "7g7f none -5 1 1"]
    board = cshogi.Board()
    for move, reply in (("5i5h", "5a5b"), ("5a5b", "5h5i"), ("5h5i", "5b5a")):
        board.push_usi(move)
        lines += [f"sfen {board.sfen()}", f"{reply} none 0 1 1"]
    board = cshogi.Board()
    board.push_usi("7g7f")
    lines += [f"sfen {board.sfen()}", "3c3d none 0 1 1"]
    source = tmp_path / "loop.db"
    source.write_text("\n".join(lines) + "\n")
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    out = tmp_path / "suite.txt"
    run_cli("suite", "-b", book, "-o", out, "--max-value", "10")
    # Every position on the king shuffle repeats along its best moves; only
    # the position after 7g7f (best move 3c3d, then out of the book) remains.
    assert out.read_text().splitlines() == ["startpos moves 7g7f"]


def test_suite_errors(tmp_path):
    source = tmp_path / "x.db"
    board = cshogi.Board()
    board.push_usi("7g7f")
    source.write_text(f"#YANEURAOU-DB2016 1.00\nsfen {board.sfen()}\n3c3d none 0 1 1\n")
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    result = run_cli("suite", "-b", book, "-o", tmp_path / "s.txt", expect=2)
    assert "initial position has no book moves" in result.stderr
    result = run_cli("suite", "-b", book, "-o", tmp_path / "s.txt", "--min-ply", "9",
                     "--max-ply", "3", expect=2)
    assert "above --max-ply" in result.stderr


def test_a_book_suite_with_no_position_is_an_error_that_says_why(tmp_path):
    book = tmp_path / "book.sqlite"
    run_cli("import", ROOT / "data" / "sample.db", "-b", book)
    out = tmp_path / "suite.txt"
    result = run_cli("suite", "-b", book, "-o", out, "--max-value", "0", "--min-ply", "3",
                     "--max-ply", "5", expect=2)
    assert "no position qualified" in result.stderr and "|value| over 0" in result.stderr
    assert not out.exists()


def test_the_library_takes_settings_and_gives_the_summary_the_cli_prints(tmp_path):
    """make_suite(book, out, BookSuiteSettings) returns a SuiteSummary whose as_dict()
    is the --json, key for key and in order, and writes the same file."""
    book = ROOT / "data" / "sample.db"
    imported = tmp_path / "book.sqlite"
    run_cli("import", "-b", imported, book)
    settings = BookSuiteSettings(SuiteSelection(max_value_cp=150, plies=(6, 2, 4, 6),
                                                per_line_cap=2, cap_plies=2, seed=4),
                                 ValueColumn.RAW)
    assert settings.selection.plies == (2, 4, 6)
    summary = make_suite(imported, tmp_path / "lib.txt", settings)
    assert isinstance(summary, SuiteSummary) and summary.positions > 0
    printed = run_cli("suite", "-b", imported, "-o", tmp_path / "cli.txt", "--max-value", "150",
                      "--plies", "6,2,4,6", "--per-line-cap", "2", "--cap-plies", "2",
                      "--seed", "4", "--json").stdout
    expected = json.loads(printed)
    expected["file"] = str(tmp_path / "lib.txt")
    assert list(summary.as_dict().items()) == list(expected.items())
    assert (tmp_path / "lib.txt").read_bytes() == (tmp_path / "cli.txt").read_bytes()


@pytest.mark.parametrize("make, field, library, cli", [
    (lambda: SuiteSelection(min_ply=5, max_ply=3), "selection.min_ply",
     "selection.min_ply 5 is above selection.max_ply 3", "--min-ply 5 is above --max-ply 3"),
    (lambda: SuiteSelection(plies=()), "selection.plies", "selection.plies is empty",
     "--plies is empty"),
    (lambda: SuiteSelection(max_value_cp=-1), "selection.max_value_cp",
     "selection.max_value_cp must be at least 0", "--max-value must be at least 0"),
    (lambda: SuiteSelection(per_line_cap=0), "selection.per_line_cap",
     "selection.per_line_cap must be at least 1", "--per-line-cap must be at least 1"),
    (lambda: parse_plies("3,x"), "selection.plies",
     "selection.plies '3,x': 'x' is not a ply number (1 or more)",
     "--plies '3,x': 'x' is not a ply number (1 or more)"),
    (lambda: BookSuiteSettings(values="best"), "values",  # type: ignore[arg-type]
     "values must be raw or minimax, not 'best'", "--values must be raw or minimax, not 'best'"),
])
def test_suite_settings_name_their_fields(make, field, library, cli):
    with pytest.raises(SettingsError) as caught:
        make()
    assert (caught.value.field, str(caught.value), error_text(caught.value)) == \
        (field, library, cli)


def test_the_cli_still_names_the_flags(tmp_path):
    result = run_cli("suite", "-b", tmp_path / "none.sqlite", "-o", tmp_path / "s.txt",
                     "--min-ply", "5", "--max-ply", "3", expect=2)
    assert result.stderr == "bookgen: error: --min-ply 5 is above --max-ply 3\n"
