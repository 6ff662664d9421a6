"""bookgen starts: every written position decodes to a book position passing the filters."""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.arrays import NULL
from bookgen.cli.support import error_text
from bookgen.errors import BookgenError, SettingsError
from bookgen.grow import grow
from bookgen.selfplay.starts import StartsSelection, StartsSettings, StartsSummary, make_starts
from bookgen.store import ValueColumn
from conftest import run_cli, small_grow


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Path:
    book = tmp_path_factory.mktemp("starts") / "book.sqlite"
    grow(book, small_grow(30, 25, seed=2), progress=False)
    return book


def book_positions(book: Path) -> dict[str, dict]:
    """sfen -> ply, turn, best value, count sum, has-book-child, for positions with moves."""
    conn = sqlite3.connect(book)
    rows = conn.execute(
        "SELECT p.sfen, p.ply, p.turn, max(m.value), sum(m.count), "
        "sum(CASE WHEN m.child_id IN (SELECT position_id FROM moves) THEN 1 ELSE 0 END) "
        "FROM positions p JOIN moves m ON m.position_id = p.id GROUP BY p.id").fetchall()
    conn.close()
    return {sfen: {"ply": ply, "turn": turn, "best": best, "count": count, "inner": inner > 0}
            for sfen, ply, turn, best, count, inner in rows}


def decode(path: Path, fmt: str) -> list[str]:
    """Normalised sfens of the written positions, in file order."""
    if fmt in ("usi", "sfen"):
        sfens = []
        for line in path.read_text().splitlines():
            board = cshogi.Board()
            if line.startswith("startpos"):
                for move in line.split()[2:]:
                    assert move in {cshogi.move_to_usi(m) for m in board.legal_moves}, line
                    board.push_usi(move)
            else:
                assert line.startswith("sfen ")
                board.set_sfen(line[5:])
            sfens.append(board.sfen().rsplit(" ", 1)[0])
        return sfens
    dtype = cshogi.HuffmanCodedPos if fmt == "hcp" else cshogi.PackedSfen
    records = np.fromfile(path, dtype=dtype)
    sfens = []
    for index in range(len(records)):
        board = cshogi.Board()
        if fmt == "hcp":
            board.set_hcp(records[index:index + 1])
        else:
            board.set_psfen(records[index:index + 1])
        sfens.append(board.sfen().rsplit(" ", 1)[0])
    return sfens


@pytest.mark.parametrize("fmt", ["usi", "sfen", "hcp", "psfen"])
def test_every_format_decodes_to_book_positions(grown, tmp_path, fmt):
    out = tmp_path / f"starts.{fmt}"
    result = run_cli("starts", "-b", grown, "-o", out, "--format", fmt, "--json")
    summary = json.loads(result.stdout)
    book = book_positions(grown)
    sfens = decode(out, fmt)
    assert sorted(sfens) == sorted(book), "exactly the book positions, no duplicates"
    assert summary["written"] == len(sfens) == summary["positions"]


def test_usi_lines_follow_book_moves_from_the_start(grown, tmp_path):
    out = tmp_path / "starts.txt"
    run_cli("starts", "-b", grown, "-o", out)
    conn = sqlite3.connect(grown)
    book_moves = {(sfen, move) for sfen, move in conn.execute(
        "SELECT p.sfen, m.move FROM moves m JOIN positions p ON p.id = m.position_id")}
    conn.close()
    lines = out.read_text().splitlines()
    assert all(line.startswith("startpos") for line in lines), "grown books reach every position"
    for line in lines:
        board = cshogi.Board()
        for move in line.split()[2:]:
            assert (board.sfen().rsplit(" ", 1)[0], move) in book_moves, line
            board.push_usi(move)


def test_summary_line_says_how_lines_start(grown, tmp_path):
    """The summary counts 'startpos moves' and 'sfen' lines for usi output, and
    says nothing of the initial position for formats that hold positions only."""
    n = len(book_positions(grown))
    out = run_cli("starts", "-b", grown, "-o", tmp_path / "s.txt").output
    assert f"{n} lines for {n} positions (all as 'startpos moves ...')" in out
    for fmt in ("sfen", "hcp", "psfen"):
        out = run_cli("starts", "-b", grown, "-o", tmp_path / f"s.{fmt}", "--format", fmt).output
        kind = "lines" if fmt == "sfen" else "records"
        assert f"{n} {kind} for {n} positions; values" in out, out
        assert "initial position" not in out and "(0 " not in out
    # A position off the book's lines from the initial position is written as sfen.
    book = tmp_path / "book.sqlite"
    shutil.copy(grown, book)
    conn = sqlite3.connect(book)
    with conn:
        conn.execute("UPDATE moves SET child_id = NULL")
        conn.execute("DELETE FROM moves WHERE position_id = (SELECT id FROM positions "
                     "WHERE ply = 1)")
    conn.close()
    out = run_cli("starts", "-b", book, "-o", tmp_path / "t.txt").output
    lines = (tmp_path / "t.txt").read_text().splitlines()
    sfen_lines = sum(line.startswith("sfen ") for line in lines)
    assert sfen_lines == len(lines) == n - 1
    assert f"{n - 1} lines for {n - 1} positions (all as 'sfen ...': none is reached" in out


def test_filters(grown, tmp_path):
    book = book_positions(grown)
    out = tmp_path / "f.sfen"
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--min-ply", "3",
            "--max-ply", "4", "--max-value", "20", "--side", "white")
    sfens = decode(out, "sfen")
    expected = {s for s, p in book.items() if 3 <= p["ply"] <= 4 and abs(p["best"]) <= 20
                and p["turn"] == cshogi.WHITE}
    assert set(sfens) == expected and len(sfens) == len(expected)
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--from", "leaves")
    assert set(decode(out, "sfen")) == {s for s, p in book.items() if not p["inner"]}
    threshold = int(np.percentile([p["count"] for p in book.values()], 75))
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--count-percentile", "75")
    assert set(decode(out, "sfen")) == {s for s, p in book.items() if p["count"] >= threshold}


def test_principal_line_is_the_best_line_of_both_sides(grown, tmp_path):
    out = tmp_path / "p.txt"
    run_cli("starts", "-b", grown, "-o", out, "--from", "principal")
    conn = sqlite3.connect(grown)
    best = {}
    for sfen, move, value in conn.execute(
            "SELECT p.sfen, m.move, m.value FROM moves m JOIN positions p ON p.id = m.position_id"):
        best.setdefault(sfen, []).append((value, move))
    conn.close()
    expected = set()
    board = cshogi.Board()
    frontier = [board.sfen()]
    while frontier:  # independent walk: every move with the best value, both sides
        sfen = frontier.pop()
        key = sfen.rsplit(" ", 1)[0]
        if key in expected or key not in best:
            continue
        expected.add(key)
        top = max(v for v, _ in best[key])
        for value, move in best[key]:
            if value == top:
                b = cshogi.Board(sfen)
                b.push_usi(move)
                frontier.append(b.sfen())
    assert set(decode(out, "usi")) == expected


def test_weighting_by_visits_and_limit(tmp_path, grown):
    grown = Path(shutil.copy(grown, tmp_path / "copy.sqlite"))  # the fixture is shared
    conn = sqlite3.connect(grown)
    conn.execute("UPDATE positions SET visits = 300 WHERE id = (SELECT min(position_id) "
                 "FROM moves)")
    conn.commit()
    conn.close()
    out = tmp_path / "w.sfen"
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--weight", "visits")
    sfens = decode(out, "sfen")
    counts = {s: sfens.count(s) for s in set(sfens)}
    assert max(counts.values()) > 1 and len(counts) == len(book_positions(grown))
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--limit", "5", "--seed", "1")
    first = decode(out, "sfen")
    run_cli("starts", "-b", grown, "-o", out, "--format", "sfen", "--limit", "5", "--seed", "1")
    assert decode(out, "sfen") == first and len(set(first)) == 5


def test_errors(grown, tmp_path):
    result = run_cli("starts", "-b", tmp_path / "missing.sqlite", "-o", tmp_path / "x",
                     expect=2)
    assert "no such book" in result.stderr
    result = run_cli("starts", "-b", grown, "-o", tmp_path / "x", "--min-count", "1",
                     "--count-percentile", "5", expect=2)
    assert result.stderr == ("bookgen: error: --min-count and --count-percentile exclude "
                             "each other\n")


@pytest.mark.parametrize("make, field, library, cli", [
    (lambda: StartsSelection(side="red"), "selection.side",
     "selection.side must be both, black or white, not 'red'",
     "--side must be both, black or white, not 'red'"),
    (lambda: StartsSettings(weight="count"), "weight",
     "weight must be none or visits, not 'count'", "--weight must be none or visits, not 'count'"),
    (lambda: StartsSelection(min_count=1, count_percentile=5), "selection.min_count",
     "selection.min_count and selection.count_percentile exclude each other",
     "--min-count and --count-percentile exclude each other"),
    (lambda: StartsSelection(count_percentile=101), "selection.count_percentile",
     "selection.count_percentile must be between 0 and 100",
     "--count-percentile must be between 0 and 100"),
    (lambda: StartsSelection(min_ply=-1), "selection.min_ply", "selection.min_ply must be at "
     "least 0", "--min-ply must be at least 0"),
    (lambda: StartsSelection(max_value_cp=-1), "selection.max_value_cp",
     "selection.max_value_cp must be at least 0", "--max-value must be at least 0"),
    (lambda: StartsSelection(principal_margin_cp=-5), "selection.principal_margin_cp",
     "selection.principal_margin_cp must be at least 0", "--principal-margin must be at least 0"),
    (lambda: StartsSettings(limit=0), "limit", "limit must be at least 1",
     "--limit must be at least 1"),
])
def test_bad_settings_name_the_field_and_the_cli_the_flag(make, field, library, cli):
    with pytest.raises(SettingsError) as caught:
        make()
    assert (caught.value.field, str(caught.value)) == (field, library)
    assert error_text(caught.value) == cli


def test_unknown_names_are_refused_as_before():
    with pytest.raises(BookgenError, match=r"^unknown format 'kif' \(choose from usi, sfen, "
                                           r"hcp, psfen\)$"):
        StartsSettings(format="kif")
    with pytest.raises(BookgenError, match=r"^unknown source 'x' \(choose from all, leaves, "
                                           r"principal, mistakes\)$"):
        StartsSettings(source="x")
    with pytest.raises(BookgenError, match=r"^unknown values 'best' \(choose from raw, "
                                           r"minimax\)$"):
        StartsSelection(values="best")  # type: ignore[arg-type]
    assert StartsSelection(values="minimax").values is ValueColumn.MINIMAX  # type: ignore[arg-type]
    settings = StartsSettings(selection=StartsSelection(side="white", min_count=2), limit=3)
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_the_summary_is_the_json_of_the_command(grown, tmp_path):
    """make_starts(book, out, settings) returns what --json prints, key for key."""
    out = tmp_path / "s.txt"
    settings = StartsSettings(format="usi", source="all", selection=StartsSelection(
        min_ply=2, max_ply=5, values=ValueColumn.MINIMAX), weight="visits", limit=20, seed=3)
    summary = make_starts(grown, out, settings)
    assert isinstance(summary, StartsSummary)
    library = out.read_bytes()
    printed = run_cli("starts", "-b", grown, "-o", out, "--min-ply", "2", "--max-ply", "5",
                      "--values", "minimax", "--weight", "visits", "--limit", "20", "--seed",
                      "3", "--json").stdout
    assert out.read_bytes() == library
    assert list(json.loads(printed).items()) == list(summary.as_dict().items())
    assert list(summary.as_dict()) == ["file", "format", "positions", "written",
                                       "from_startpos", "by_ply", "value_min", "value_max"]
    assert summary.positions == 20 and summary.written >= 20
    assert set(summary.by_ply) <= {"2", "3", "4", "5"}
    assert make_starts(grown, tmp_path / "d.txt").as_dict()["positions"] >= summary.positions


def old_positions(book: Path, values: str) -> dict[str, list[int | None]]:
    """The columns starts read before the BookIndex (its old _Positions loader):
    best value and count sum over every moves row, ply, turn and visits."""
    column = "coalesce(minimax_value, value)" if values == "minimax" else "value"
    conn = sqlite3.connect(book)
    try:
        moves = conn.execute(f"SELECT position_id, max({column}), coalesce(sum(count), 0) "
                             "FROM moves GROUP BY position_id").fetchall()
        positions = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, ply, turn, visits FROM positions")}
    finally:
        conn.close()
    moves = sorted(row for row in moves if row[0] in positions)
    return {"ids": [row[0] for row in moves], "best": [row[1] for row in moves],
            "total": [row[2] for row in moves],
            "ply": [positions[row[0]][0] for row in moves],
            "turn": [positions[row[0]][1] for row in moves],
            "visits": [positions[row[0]][2] for row in moves]}


@pytest.mark.parametrize("values", ["raw", "minimax"])
def test_the_index_columns_are_the_old_ones(grown, tmp_path, values):
    """best values and counts over every row (refine minimax's transposition rows
    included), ply, turn and visits, on a grown and an imported book, refined."""
    from bookgen.bookfiles.importer import import_books
    from bookgen.refine.minimax import MinimaxSettings, refine_minimax
    from bookgen.selfplay.starts import _Positions
    from bookgen.store import Book, ValueColumn
    from bookgen.store.index import BookIndex, IndexSpec
    from conftest import ROOT

    books = [Path(shutil.copy(grown, tmp_path / "grown.sqlite")), tmp_path / "sample.sqlite"]
    import_books(books[1], [ROOT / "data" / "sample.db"], progress=False)
    for book in books:
        refine_minimax(book, MinimaxSettings(scan_workers=1))
        column = ValueColumn(values)
        with Book(book, create=False, readonly=True) as store:
            index = BookIndex.load(store, IndexSpec(
                positions=frozenset({"ply", "turn", "visits"}), values=(column,),
                resolve_children=False))
        new = _Positions.of(index, column)
        got = {name: [None if v == NULL else v for v in getattr(new, name).tolist()]
               for name in ("ids", "best", "total", "ply", "turn", "visits")}
        assert got == old_positions(book, values)
    rows = 0
    for book in books:
        conn = sqlite3.connect(book)
        rows += conn.execute("SELECT count(*) FROM moves WHERE count = 0 AND value IS NULL"
                             ).fetchone()[0]
        conn.close()
    assert rows   # (transposition rows)
