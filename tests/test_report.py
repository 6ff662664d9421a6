"""``bookgen report``: the HTML page, its Markdown twin, escaping, the book section,
errors, and a render in headless Chromium.

Results files are written with ``ResultsFile`` (three players, colour-swapped
pairs, some declaration wins); the numbers the report shows are checked
against the analysis functions' own output (``RatingTable.format_text``,
``pairstats``), and the HTML is read back with the standard library's
``html.parser``.
"""

from __future__ import annotations

import base64
import html
import io
import os
import random
import re
import shutil
import sqlite3
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from bookgen.analysis import report as report_module
from bookgen.analysis.document import markdown_escape
from bookgen.analysis.outcomes import PAIRED_NOTE
from bookgen.analysis.pairstats import (
    SprtSettings,
    SprtTest,
    count_games,
    elo_pentanomial,
    elo_trinomial,
    sprt,
)
from bookgen.analysis.ratings import RatingSettings, fit_ratings
from bookgen.analysis.report import ReportSettings, build_report, parse_sprt, write_html
from bookgen.analysis.results import load_games
from bookgen.cli.support import error_text
from bookgen.errors import BookgenError
from bookgen.formats.records import write_pgn_game
from bookgen.grow import grow
from bookgen.store.results import ResultsFile
from conftest import STARTPOS, dump_book, run_chromium, run_cli, small_grow

NASTY = '<script>alert(1)</script>&"x"'
PIPE = "a|b`c"
PLAYERS = ["alpha", "beta", "gamma"]


# --------------------------------------------------------------------------
# helpers


def write_results(path: Path, names: list[str], *, pairs_per_opponent: int = 10,
                  seed: int = 7) -> Path:
    """A round robin of colour-swapped pairs; the later names are stronger."""
    rng = random.Random(seed)
    strength = {name: 80 * i for i, name in enumerate(names)}
    reasons = ["checkmate", "resign", "declaration"]
    with ResultsFile(path) as results:
        match_id = results.begin_match("test", {"test": True}, 0)
        pair = 0
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for _ in range(pairs_per_opponent):
                    for black, white in ((a, b), (b, a)):
                        expected = 1 / (1 + 10 ** ((strength[white] - strength[black]) / 400))
                        draw = rng.random() < 0.15
                        if draw:
                            result, reason = "draw", rng.choice(["repetition draw", "max ply"])
                        else:
                            result = "black" if rng.random() < expected else "white"
                            reason = reasons[pair % 3]
                        results.add_game(
                            match_id, game_key=f"{pair}/{black}", round=pair, pair=pair,
                            opening_index=pair % 5, opening="startpos", start_sfen=STARTPOS,
                            black=black, white=white, result=result, reason=reason,
                            plies=rng.randint(30, 250), moves="", black_ms=1000,
                            white_ms=1200)
                    pair += 1
    return path


class _Page(HTMLParser):
    """Tables (by id: rows of cell texts), images and tags of an HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.tags: list[str] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        if tag == "table":
            self._table = values.get("id") or f"anonymous-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(values.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse_page(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def markdown_rows(text: str, heading: str) -> list[list[str]]:
    """Cells of the first table after ``heading`` (escapes undone)."""
    lines = text.splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([html.unescape(re.sub(r"\\(.)", r"\1", c.strip())) for c in cells])
        elif rows:
            break
    return [row for row in rows if not all(re.fullmatch(r":?-+:?", c) for c in row)]


def format_text_rows(games, settings: RatingSettings) -> list[list[str]]:
    """Rows of ``fit_ratings(...).format_text()`` as tokens (names without spaces)."""
    lines = fit_ratings(games, settings).format_text().splitlines()
    rows = []
    for line in lines[1:]:
        tokens = line.split()
        if len(tokens) == 13 and tokens[2] == ":":
            rows.append(tokens[:2] + tokens[3:])
    return rows


@pytest.fixture(scope="module")
def results_path(tmp_path_factory) -> Path:
    return write_results(tmp_path_factory.mktemp("results") / "match.sqlite", PLAYERS)


@pytest.fixture(scope="module")
def rendered(results_path, tmp_path_factory) -> dict[str, object]:
    """The report of ``results_path`` written by the command, HTML and Markdown."""
    out = tmp_path_factory.mktemp("report")
    html_path, md_path = out / "report.html", out / "report.md"
    run_cli("report", results_path, "-o", html_path, "--markdown", md_path, "-s", "200",
            "--seed", "5", "--sprt", "gamma,alpha,0,2", "--title", "Test report")
    text = html_path.read_text(encoding="utf-8")
    return {"html_path": html_path, "md_path": md_path, "html": text,
            "page": parse_page(text), "markdown": md_path.read_text(encoding="utf-8")}


# --------------------------------------------------------------------------
# the HTML page


def test_rating_table_matches_fit_ratings(results_path, rendered):
    page = rendered["page"]
    expected = format_text_rows(load_games([results_path]),
                                RatingSettings(simulations=200, seed=5))
    header, *rows = page.tables["ratings"]
    assert header == report_module.RATING_HEADERS
    assert rows == expected
    assert [row[1] for row in rows] == sorted(PLAYERS, reverse=True)  # strength order


def test_rating_options_reach_the_fit(results_path, tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", results_path, "-o", out, "-s", "50", "--seed", "2", "-W", "-D")
    games = load_games([results_path])
    settings = RatingSettings(simulations=50, seed=2, fit_white_advantage=True,
                              fit_draw_rate=True)
    table = fit_ratings(games, settings)
    text = out.read_text()
    assert parse_page(text).tables["ratings"][1:] == format_text_rows(games, settings)
    assert f"White advantage = {table.white_advantage:.2f}" in text
    assert f"Draw rate (equal opponents) = {100 * table.draw_rate:.2f} %" in text


def test_pairwise_matrix_uses_pentanomial_counts(results_path, rendered):
    games = load_games([results_path])
    header, *rows = rendered["page"].tables["pairwise-matrix"]
    names = header[1:]
    assert names == [row[0] for row in rows] == sorted(PLAYERS, reverse=True)
    differs = False
    for row in rows:
        a = row[0]
        for b, cell in zip(names, row[1:]):
            if a == b:
                assert cell == "—"
                continue
            counts = count_games(games, a, b)
            assert counts.penta is not None and counts.unpaired == 0
            e = elo_pentanomial(counts.penta)
            assert cell == f"{e.elo:+.1f} ± {e.elo_error:.1f}, LOS {e.los:.1f} %"
            trinomial = elo_trinomial(counts.wins, counts.draws, counts.losses)
            differs |= f"{trinomial.elo_error:.1f}" != f"{e.elo_error:.1f}"
    assert differs, "the data cannot tell pentanomial from trinomial errors"
    details = rendered["page"].tables["pairwise-details"]
    assert len(details) == 1 + 3  # header and the three pairs


def test_sprt_section(results_path, rendered):
    games = load_games([results_path])
    result = sprt(games, "gamma", "alpha", SprtSettings(elo0=0, elo1=2))
    text = rendered["html"]
    assert "SPRT: gamma (engine under test) vs alpha" in text
    assert "<td>engine under test</td><td>gamma (W, D, L, Elo from its side)</td>" in text
    assert f"{result.llr:.2f} in [{result.lower:.2f}, {result.upper:.2f}]" in text
    verdict = {"H1": "H1 accepted: gamma is stronger than alpha",
               "H0": "H0 accepted: gamma is not stronger than alpha by 2 normalized Elo",
               None: "continue: no verdict yet on gamma against alpha"}[result.verdict]
    assert f"<td>verdict</td><td>{verdict}" in text


def test_outcome_section(results_path, rendered):
    page = rendered["page"]
    header, *rows = page.tables["outcome-table"]
    assert "declaration win" in header and "declaration loss" in header
    column = header.index("declaration win")
    games = load_games([results_path])
    for row in rows:
        wins = sum(1 for g in games if g.reason == "declaration" and g.winner == row[0])
        assert int(row[column]) == wins
    text = rendered["html"]
    assert html.escape(PAIRED_NOTE) in text
    for ending in header[2:]:
        assert f"<h3>Ending: {html.escape(ending)}</h3>" in text
    assert "chi2_contingency" in text or "fisher_exact" in text


def test_page_is_self_contained_with_figures(rendered):
    page, text = rendered["page"], rendered["html"]
    assert len(page.images) >= 4
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:|//)", text)
    assert "url(" not in text and "@import" not in text
    assert "script" not in page.tags and "link" not in page.tags
    assert "<title>Test report</title>" in text


def test_markdown_twin(rendered):
    md, page = rendered["markdown"], rendered["page"]
    assert markdown_rows(md, "## Ratings (Ordo)") == page.tables["ratings"]
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(images) >= 4
    for relative in images:
        assert not relative.startswith(("/", "http"))
        png = rendered["md_path"].parent / relative
        assert png.read_bytes().startswith(b"\x89PNG")
    assert markdown_rows(md, "### SPRT: gamma (engine under test) vs alpha")[0] == ["", "value"]


def estimates_of(rows: list[list[str]]) -> set[str]:
    """The numbers written with two decimals in a table's cells: Elo, nElo, their
    margins, LOS (counts and rates have none or one), unsigned."""
    return {n for row in rows for cell in row for n in re.findall(r"\d+\.\d\d\b", cell)}


def repeated_tables(page: _Page) -> list[tuple[str, str]]:
    """Pairs of tables (ids) that show two or more of the same estimates."""
    tables = {name: estimates_of(rows[1:]) for name, rows in page.tables.items()}
    names = list(tables)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
            if len(tables[a] & tables[b]) >= 2]


def test_two_pairs_without_spread_report_no_interval_nor_los(tmp_path):
    # new won both pairs 1.5-0.5: every pair scored the same, so the sample has
    # no spread; the report used to print "± 0.00" and LOS 100.00 %
    path = tmp_path / "two-pairs.sqlite"
    games = [("new", "old", "black"), ("old", "new", "draw")] * 2
    with ResultsFile(path) as results:
        match_id = results.begin_match("m", {"test": "m"}, len(games))
        for index, (black, white, result) in enumerate(games):
            results.add_game(match_id, game_key=str(index), round=index // 2, pair=index // 2,
                             opening_index=index // 2, opening="startpos",
                             start_sfen=STARTPOS, black=black, white=white, result=result,
                             reason="resign" if result != "draw" else "max ply", plies=80,
                             moves="7g7f 3c3d")
    out = tmp_path / "two-pairs.html"
    run_cli("report", path, "-o", out, "-s", "0")
    head = dict(parse_page(out.read_text()).tables["head-to-head"][1:])
    e = elo_pentanomial(count_games(load_games([path]), "new", "old").penta)
    assert e.elo_error is None and e.los is None
    assert head["LOS"] == "n/a" and head["Elo"] == f"{e.elo:+.2f} ± n/a"
    assert f"{e.elo:+.2f}" == "+190.85"


def test_two_player_report_shows_each_fact_once(tmp_path):
    path = write_results(tmp_path / "two.sqlite", ["old", "new"], pairs_per_opponent=12)
    out, md_path = tmp_path / "two.html", tmp_path / "two.md"
    run_cli("report", path, "-o", out, "--markdown", md_path, "-s", "0", "--sprt", "new,old,0,2")
    text = out.read_text()
    page = parse_page(text)
    games = load_games([path])
    first = page.tables["ratings"][1][1]
    second = "old" if first == "new" else "new"
    e = elo_pentanomial(count_games(games, first, second).penta)
    # The head to head, from the higher-rated side, without the ratings table's W/D/L.
    assert f"Head to head: {first} vs {second}" in text
    head = dict(page.tables["head-to-head"][1:])
    assert head["LOS"] == f"{e.los:.2f} %"
    assert head["Elo"] == f"{e.elo:+.2f} ± {e.elo_error:.2f}"
    assert "games" not in head and "W" not in head
    # No matrix showing the one pair twice, no summary repeating it.
    assert "pairwise-matrix" not in page.tables and "pairwise-details" not in page.tables
    assert "Summary:" not in text
    # The SPRT keeps what is its own.
    sprt_rows = markdown_rows(md_path.read_text(), "### SPRT: new (engine under test) vs old")
    assert [row[0] for row in sprt_rows] == ["", "engine under test", "test", "hypotheses",
                                             "LLR", "verdict"]
    # One test per ending pair ('checkmate loss' of one is 'checkmate win' of the other).
    endings = re.findall(r"<h3>Ending: ([^<]+)</h3>", text)
    assert "checkmate win" in endings and "checkmate loss" not in endings
    assert not repeated_tables(page), repeated_tables(page)
    # No simulations: no errors, CFS shown as in Ordo's table.
    assert [row[3] for row in page.tables["ratings"][1:]] == ["----", "----"]


def test_two_player_report_without_sprt(tmp_path):
    path = write_results(tmp_path / "two.sqlite", ["old", "new"], pairs_per_opponent=6)
    out = tmp_path / "two.html"
    run_cli("report", path, "-o", out, "-s", "0")
    text = out.read_text()
    assert "No SPRT requested" in text and "head-to-head" in parse_page(text).tables
    assert not repeated_tables(parse_page(text))


def test_pgn_and_results_files_together(results_path, tmp_path):
    pgn = tmp_path / "old.pgn"
    rng = random.Random(3)
    with open(pgn, "w", encoding="utf-8") as handle:
        for number in range(12):
            black, white = ("alpha", "delta") if number % 2 == 0 else ("delta", "alpha")
            write_pgn_game(handle, event="old", round_label=str(number), black=black,
                           white=white, result=rng.choice(["black", "white", "draw"]),
                           reason="resign", start_sfen=STARTPOS, moves=["7g7f"] * 9)
    out = tmp_path / "both.html"
    run_cli("report", results_path, pgn, "-o", out, "-s", "0")
    files = parse_page(out.read_text()).tables["anonymous-0"]
    assert files == [["file", "games"], [str(results_path), "60"], [str(pgn), "12"]]


# --------------------------------------------------------------------------
# escaping


def test_names_cannot_inject_markup(tmp_path):
    path = write_results(tmp_path / "nasty.sqlite", ["plain", NASTY, PIPE])
    out, md_path = tmp_path / "nasty.html", tmp_path / "nasty.md"
    run_cli("report", path, "-o", out, "--markdown", md_path, "-s", "20",
            "--sprt", f"{NASTY},{PIPE},0,2", "--title", "<b>title</b>")
    text = out.read_text()
    assert html.escape(NASTY) in text
    assert "<script" not in text.lower()
    assert "<b>title" not in text and "&lt;b&gt;title&lt;/b&gt;" in text
    page = parse_page(text)
    assert "script" not in page.tags and "b" not in page.tags
    assert {row[1] for row in page.tables["ratings"][1:]} == {"plain", NASTY, PIPE}

    md = md_path.read_text()
    assert "<script" not in md.lower() and "<b>" not in md
    assert markdown_escape(NASTY) in md and "\\|" in md
    assert not re.search(r"(?<!\\)`", md), "an unescaped backtick would open a code span"
    rows = markdown_rows(md, "## Ratings (Ordo)")
    assert all(len(row) == 12 for row in rows)  # the pipe in a name did not split a cell
    assert rows == page.tables["ratings"]


def test_markdown_escape():
    assert markdown_escape("a|b") == "a\\|b"
    assert markdown_escape("x`y`") == "x\\`y\\`"
    assert markdown_escape("<i>&") == "&lt;i&gt;&amp;"
    assert markdown_escape("two\nlines") == "two lines"
    assert markdown_escape("-12.5") == "-12.5"
    assert markdown_escape("# not a heading", block=True) == "\\# not a heading"
    assert markdown_escape("1. not a list", block=True) == "1\\. not a list"


def test_plots_do_not_parse_math_in_names(tmp_path):
    # An unbalanced TeX command between dollars would make mathtext raise.
    path = write_results(tmp_path / "tex.sqlite", ["$\\frac{$", "b", "c"])
    run_cli("report", path, "-o", tmp_path / "tex.html", "-s", "0")


# --------------------------------------------------------------------------
# --sprt parsing


def test_parse_sprt_with_commas_in_names():
    assert parse_sprt("x,y,0,2", ["x", "y"]) == SprtTest("x", "y", SprtSettings(0.0, 2.0))
    assert parse_sprt("a,b,c,-1.5,2", ["a,b", "c"]) == SprtTest("a,b", "c",
                                                                SprtSettings(-1.5, 2.0))
    with pytest.raises(BookgenError, match="unknown player 'z'"):
        parse_sprt("x,z,0,2", ["x", "y"])
    with pytest.raises(BookgenError, match="ELO0 and ELO1 must be numbers"):
        parse_sprt("x,y,zero,2", ["x", "y"])
    with pytest.raises(BookgenError, match="expected A,B,ELO0,ELO1") as caught:
        parse_sprt("x,0,2", ["x", "y"])
    # the library names the setting, the command line its flag
    assert str(caught.value) == "sprt_tests 'x,0,2': expected A,B,ELO0,ELO1"
    assert error_text(caught.value) == "--sprt 'x,0,2': expected A,B,ELO0,ELO1"
    # Bounds in the wrong order: SprtSettings' words, as report has always printed them.
    with pytest.raises(BookgenError) as caught:
        parse_sprt("x,y,5,0", ["x", "y"])
    assert error_text(caught.value) == str(caught.value) == "elo0 (5) must be below elo1 (0)"


# --------------------------------------------------------------------------
# the book


def add_mistakes(book: Path) -> dict[int, int]:
    """Two 'refine mistakes' runs with a few mistakes each (rows as refine writes them)."""
    conn = sqlite3.connect(book)
    try:
        position_ids = [row[0] for row in conn.execute(
            "SELECT id FROM positions ORDER BY id LIMIT 5")]
        now = "2024-01-01T00:00:00+00:00"
        conn.execute("INSERT INTO runs (command, started_at, status, bookgen_version) "
                     "VALUES ('refine search', ?, 'done', 'test')", (now,))
        search = conn.execute("SELECT max(id) FROM runs").fetchone()[0]
        found = {}
        for count in (3, 2):
            conn.execute("INSERT INTO runs (command, started_at, status, bookgen_version) "
                         "VALUES ('refine mistakes', ?, 'done', 'test')", (now,))
            run = conn.execute("SELECT max(id) FROM runs").fetchone()[0]
            for index, position in enumerate(position_ids[:count]):
                conn.execute(
                    "INSERT INTO mistakes (run_id, iteration, position_id, analysis_run_id, "
                    "kind, book_value, engine_value, difference, reason, created_at) "
                    "VALUES (?, 0, ?, ?, ?, 10, 400, 390, 'test', ?)",
                    (run, position, search, "missed_mate" if index == 0 else "diff", now))
            found[run] = count
        conn.commit()
    finally:
        conn.close()
    return found


def test_book_section(results_path, tmp_path):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(30, 40, seed=3), progress=False)
    mistakes = add_mistakes(book)
    before = dump_book(book)
    out, md_path = tmp_path / "book.html", tmp_path / "book.md"
    run_cli("report", results_path, "-b", book, "-o", out, "--markdown", md_path, "-s", "0")
    assert dump_book(book) == before  # read only

    page = parse_page(out.read_text())
    runs = page.tables["book-runs"]
    header = runs[0]
    conn = sqlite3.connect(book)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
        positions = conn.execute("SELECT count(*) FROM positions").fetchone()[0]
        moves = conn.execute("SELECT count(*) FROM moves").fetchone()[0]
        reported = conn.execute("SELECT sum(positions_added) FROM runs").fetchone()[0]
    finally:
        conn.close()
    assert [int(row[0]) for row in runs[1:]] == ids
    last = dict(zip(header, runs[-1]))
    assert int(last["positions (in book)"]) == positions
    assert int(last["moves (in book)"]) == moves
    assert int(last["positions (reported)"]) == reported
    # The runs table counts the rows each run added: it adds up to the book's size.
    assert reported == positions

    table = page.tables["book-mistakes"]
    totals = {int(row[0]): int(row[-1]) for row in table[1:]}
    assert totals == mistakes
    assert table[0] == ["run", "iteration", "started", "diff", "missed_mate", "total"]
    # ratings, W/D/L, colour, lengths + growth, ply, values, mistakes
    assert len(page.images) == 8
    md = md_path.read_text()
    assert markdown_rows(md, "### Size run after run") == runs
    assert (md_path.parent / "book_files" / "book_mistakes.png").is_file()


def test_book_without_mistakes_says_so(results_path, tmp_path):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(30, 10, seed=1), progress=False)
    out = tmp_path / "r.html"
    run_cli("report", results_path, "-b", book, "-o", out, "-s", "0")
    text = out.read_text()
    assert "No mistakes recorded" in text and 'id="book-mistakes"' not in text


# --------------------------------------------------------------------------
# errors and writing


def test_errors_exit_2(results_path, tmp_path):
    empty = tmp_path / "empty.sqlite"
    with ResultsFile(empty):
        pass
    out = tmp_path / "out.html"
    result = run_cli("report", empty, "-o", out, expect=2)
    assert "no finished games" in result.stderr

    result = run_cli("report", results_path, "-o", out, "--sprt", "alpha,nobody,0,2",
                     expect=2)
    assert "unknown player 'nobody'" in result.stderr

    not_a_book = tmp_path / "book.txt"
    not_a_book.write_text("this is not SQLite\n" * 10)
    result = run_cli("report", results_path, "-b", not_a_book, "-o", out, expect=2)
    assert "not a readable SQLite book" in result.stderr

    result = run_cli("report", results_path, "-b", results_path, "-o", out, expect=2)
    assert "not a book" in result.stderr

    result = run_cli("report", tmp_path / "missing.sqlite", "-o", out, expect=2)
    assert "no such file" in result.stderr

    result = run_cli("report", results_path, "-o", tmp_path / "nodir" / "r.html", expect=2)
    assert "does not exist" in result.stderr

    result = run_cli("report", results_path, "-o", out, "-s", "1", expect=2)
    assert "--simulations" in result.stderr
    assert not out.exists()

    result = run_cli("report", results_path, "-o", out, "--markdown", out, expect=2)
    assert "same file" in result.stderr

    copy = tmp_path / "copy.sqlite"
    shutil.copy(results_path, copy)
    content = copy.read_bytes()
    result = run_cli("report", copy, "-o", copy, "-s", "0", expect=2)
    assert "would overwrite an input file" in result.stderr
    assert copy.read_bytes() == content


def test_writes_are_atomic(results_path, tmp_path, monkeypatch):
    report = build_report(ReportSettings((results_path,), rating=RatingSettings()))
    out = tmp_path / "r.html"
    out.write_text("old report")

    def fail(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(BookgenError, match=r"r\.html: cannot write \(disk full\)"):
        write_html(report, out)
    assert out.read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
    monkeypatch.undo()
    write_html(report, out)
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


# --------------------------------------------------------------------------
# a real browser


def test_chromium_renders_the_report(rendered, tmp_path):
    url = rendered["html_path"].resolve().as_uri()
    started = time.monotonic()
    dom = run_chromium(tmp_path / "profile-dom", "--dump-dom", url).stdout
    page = parse_page(dom)
    assert "ratings" in page.tables, "the rendered DOM has no ratings table"
    names = {row[1] for row in page.tables["ratings"][1:]}
    assert names == set(PLAYERS)
    assert len(page.images) >= 4

    shot = tmp_path / "shot.png"
    run_chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,2000",
                 url)
    print(f"chromium took {time.monotonic() - started:.1f} s")
    with Image.open(io.BytesIO(shot.read_bytes())) as image:
        assert image.size == (1280, 2000)
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 24)
        pixels = rgb.width * rgb.height
    assert colours is not None and len(colours) > 200, "the screenshot is (nearly) blank"
    most = max(count for count, _ in colours)
    assert most < 0.9 * pixels, "one colour covers 90 % of the screenshot"
    # The plots are there: some pixels in their win / loss colours.
    counts = {colour: count for count, colour in colours}
    assert counts.get((0x4C, 0x9A, 0x5B), 0) > 500 and counts.get((0xC8, 0x55, 0x3D), 0) > 500
