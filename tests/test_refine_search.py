"""bookgen refine search / refine mistakes: analyses with real and fake engines,
selections, resume after kill -9, crashes, mistake detection on corrupted books,
output formats, --iterate, and the migration of version-1 books."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import sqlite3
from collections import deque
from pathlib import Path

import cshogi
import pytest

from bookgen.cli.refine import grow_extender
from bookgen.engines.settings import engine_settings
from bookgen.errors import BookgenError
from bookgen.formats.positions import Roots
from bookgen.grow import grow
from bookgen.refine.book_search import search
from bookgen.refine.mistakes import Mistake, classify, find_mistakes, mistakes, position_line
from bookgen.refine.settings import (
    DetectionSettings,
    ExtensionSettings,
    MistakesSettings,
    PositionSelection,
    SearchSettings,
)
from bookgen.store import Book
from conftest import PYTHON, dump_book, integrity_ok, run_cli, small_grow
from processes import Bookgen, stop_all

FAIRY = "/usr/games/fairy-stockfish"
GPSUSI = "/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"
START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
FAIRY_KEY = {"engine": f"usi:{FAIRY}", "options": {}, "nodes": 5000, "byoyomi": None,
             "movetime": None, "depth": None}


def fake_engine(script: str | Path, *args: object) -> str:
    return " ".join(shlex.quote(str(p)) for p in (PYTHON, script, *args))


def query(book: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(book)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def execute(book: Path, sql: str, args: tuple = ()) -> None:
    conn = sqlite3.connect(book)
    try:
        with conn:
            conn.execute(sql, args)
    finally:
        conn.close()


def with_moves(book: Path) -> set[int]:
    return {r[0] for r in query(book, "SELECT DISTINCT position_id FROM moves")}


def analyses(book: Path, run_id: int | None = None) -> dict[int, tuple]:
    """position id -> (sfen, engine, score, mate, bound, depth, seldepth, nodes, bestmove, pv)."""
    sql = ("SELECT a.position_id, p.sfen, a.engine, a.score, a.mate, a.bound, a.depth, "
           "a.seldepth, a.nodes, a.bestmove, a.pv FROM analyses a "
           "JOIN positions p ON p.id = a.position_id")
    rows = query(book, sql + (" WHERE a.run_id = ?" if run_id else ""),
                 (run_id,) if run_id else ())
    return {row[0]: row[1:] for row in rows}


def last_run(book: Path) -> tuple:
    return query(book, "SELECT id, command, status, evaluator, params, counts FROM runs "
                       "ORDER BY id DESC LIMIT 1")[0]


def check_analysis(sfen: str, row: tuple, *, seldepth: bool = True) -> None:
    _sfen, _engine, score, mate, bound, depth, sel, nodes, bestmove, pv = row
    board = cshogi.Board(f"{sfen} 1")
    assert bestmove in {cshogi.move_to_usi(m) for m in board.legal_moves}, (sfen, bestmove)
    assert isinstance(score, int) and bound in ("exact", "lower", "upper")
    assert depth >= 1 and nodes >= 1
    assert (sel is not None and sel >= 1) if seldepth else True
    if mate is None:
        assert abs(score) < 29000
    else:
        assert score == (30000 - mate if mate > 0 else -30000 - mate)
    for usi in pv.split():  # the PV replays legally
        move = board.move_from_usi(usi)
        assert move and board.is_legal(move), (sfen, pv)
        board.push(move)


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Path:
    book = tmp_path_factory.mktemp("grown") / "book.sqlite"
    grow(book, small_grow(30, 8, seed=0), progress=False)
    return book


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, grown) -> Path:
    book = tmp_path_factory.mktemp("analysed") / "book.sqlite"
    shutil.copy(grown, book)
    summary = search(book, fairy(5000), progress=False)
    assert summary.status == "done" and summary.analysed == len(with_moves(book))
    return book


def fairy(nodes: int, **settings: object) -> SearchSettings:
    """Fairy-Stockfish searching ``nodes`` nodes a position."""
    return SearchSettings(engine_settings(f"usi:{FAIRY}", nodes=nodes), **settings)


def copy_of(book: Path, tmp_path: Path) -> Path:
    target = tmp_path / "book.sqlite"
    shutil.copy(book, target)
    return target


# ------------------------------------------------------------------ search


def test_fairy_stockfish_search_fills_analyses_and_resumes(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    result = run_cli("refine", "search", "-b", book, "--engine", f"usi:{FAIRY}",
                     "--nodes", "5000")
    assert "8 positions analysed, 0 failed" in result.output
    rows = analyses(book)
    assert set(rows) == with_moves(book) and len(rows) == 8
    for row in rows.values():
        assert row[1] == f"usi:{FAIRY}"
        check_analysis(row[0], row)
        assert row[7] >= 4000  # go nodes 5000
    run_id, command, status, evaluator, params, counts = last_run(book)
    assert (command, status, evaluator) == ("refine search", "done", f"usi:{FAIRY}")
    assert json.loads(params)["key"] == FAIRY_KEY
    assert json.loads(counts)["analysed"] == 8
    # The same command again: everything is already analysed.
    result = run_cli("refine", "search", "-b", book, "--engine", f"usi:{FAIRY}",
                     "--nodes", "5000", "--json")
    summary = json.loads(result.output)
    assert summary["analysed"] == 0 and summary["already_analysed"] == 8
    assert len(query(book, "SELECT * FROM analyses")) == 8
    # Other limits are another analysis key: searched again.
    summary = search(book, fairy(3000, selection=PositionSelection("leaves")), progress=False)
    assert summary.analysed == summary.selected >= 1
    assert integrity_ok(book)


def test_gpsusi_byoyomi_search(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    runs_before = len(query(book, "SELECT id FROM runs"))
    with pytest.raises(BookgenError, match="gpsusi aborts"):
        search(book, SearchSettings(engine_settings(f"usi:{GPSUSI}", {"BookDepth": "0"},
                                                    nodes=1000)), progress=False)
    assert len(query(book, "SELECT id FROM runs")) == runs_before, "nothing written"
    settings = SearchSettings(engine_settings(f"usi:{GPSUSI}", {"BookDepth": "0"}, byoyomi=1000),
                              PositionSelection("principal"), limit=2)
    summary = search(book, settings, progress=False)
    assert summary.status == "done" and summary.analysed == 2 and summary.failed == 0
    rows = analyses(book, summary.run_id)
    assert len(rows) == 2
    for row in rows.values():
        check_analysis(row[0], row)
    key = json.loads(last_run(book)[4])["key"]
    assert key["options"] == {"BookDepth": "0"} and key["byoyomi"] == 1000


def test_builtin_search_is_the_same_with_two_workers(grown, tmp_path):
    one = copy_of(grown, tmp_path)
    two = tmp_path / "two.sqlite"
    shutil.copy(grown, two)
    run_cli("refine", "search", "-b", one, "--depth", "2")
    run_cli("refine", "search", "-b", two, "--depth", "2", "--workers", "2")
    rows_one, rows_two = analyses(one), analyses(two)
    assert rows_one == rows_two and set(rows_one) == with_moves(one)
    for row in rows_one.values():
        assert row[1] == "builtin" and row[4] == "exact" and row[5] == 2
        check_analysis(row[0], row, seldepth=False)
    assert json.loads(last_run(two)[4])["key"]["depth"] == 2


def test_fairy_stockfish_with_two_workers(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    summary = search(book, fairy(5000, workers=2), progress=False)
    assert summary.status == "done" and summary.analysed == 8
    rows = analyses(book)
    assert set(rows) == with_moves(book)
    for row in rows.values():
        check_analysis(row[0], row)


def test_selections(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    positions = {r[0]: r[1:] for r in query(book, "SELECT id, sfen, visits FROM positions")}
    edges: dict[int, list[tuple]] = {}
    for pid, move, value, child in query(book, "SELECT position_id, move, value, child_id "
                                               "FROM moves"):
        edges.setdefault(pid, []).append((move, value, child))
    leaves = {pid for pid, out in edges.items() if not any(c in edges for _m, _v, c in out)}
    start = next(pid for pid, (sfen, _v) in positions.items() if sfen == START)
    principal, queue = {start}, deque([start])
    while queue:
        out = edges[queue.popleft()]
        best = max(v for _m, v, _c in out)
        for _m, value, child in out:
            if value >= best - 20 and child in edges and child not in principal:
                principal.add(child)
                queue.append(child)
    visits = {pid for pid in edges if (positions[pid][1] or 0) >= 31}
    assert leaves and len(principal) >= 1
    for select, extra, expected in (("leaves", [], leaves),
                                    ("principal", ["--margin", "20"], principal),
                                    ("visits", ["--min-visits", "31"], visits)):
        result = run_cli("refine", "search", "-b", book, "--depth", "1", "--select", select,
                         *extra, "--json")
        run_id = json.loads(result.output)["run_id"]
        assert set(analyses(book, run_id)) == expected, select
        execute(book, "DELETE FROM analyses")
    result = run_cli("refine", "search", "-b", book, "--depth", "1", "--limit", "3", "--json")
    report = json.loads(result.output)
    assert report["analysed"] == 3
    total = len(with_moves(book))
    # The stop reason says that --limit stopped it, not that all were searched.
    assert report["stop_reason"] == (f"--limit reached: 3 of {total} selected positions not "
                                     f"yet analysed searched, {total - 3} left for a later run")
    assert report["left_by_limit"] == total - 3
    run = json.loads(query(book, "SELECT counts FROM runs WHERE id = ?",
                           (report["run_id"],))[0][0])
    assert run["stop_reason"] == report["stop_reason"]
    # shallowest first
    plies = sorted(r[0] for r in query(book, "SELECT p.ply FROM analyses a JOIN positions p "
                                             "ON p.id = a.position_id"))
    all_plies = sorted(r[0] for r in query(book, "SELECT ply FROM positions WHERE id IN "
                                                 "(SELECT position_id FROM moves)"))
    assert plies == all_plies[:3]
    text = run_cli("refine", "search", "-b", book, "--depth", "1", "--limit", "3").output
    assert f"(--limit reached: 3 of {total - 3} selected" in text


def _search_until_fault(tmp_path: Path, book: Path, fault: str) -> tuple[int, str, str]:
    """``bookgen refine search`` (Fairy-Stockfish) with BOOKGEN_FAULT=``fault``."""
    process = Bookgen(tmp_path, "refine", "search", "-b", book, "--engine", f"usi:{FAIRY}",
                      "--nodes", "150000", env={"BOOKGEN_FAULT": fault})
    try:
        return process.finish(deadline=120)
    finally:
        stop_all(process, {})


def test_sigkill_mid_run_then_resume(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    code, _out, err = _search_until_fault(tmp_path, book, "refine-search-recorded@3")
    assert code == -signal.SIGKILL, err  # killed after its third analysis was recorded
    assert integrity_ok(book)
    killed = query(book, "SELECT count(*) FROM analyses")[0][0]
    assert killed == 3
    assert last_run(book)[2] == "running"
    result = run_cli("refine", "search", "-b", book, "--engine", f"usi:{FAIRY}",
                     "--nodes", "150000", "--json")
    summary = json.loads(result.output)
    assert summary["already_analysed"] == killed and summary["analysed"] == 8 - killed
    statuses = [r[0] for r in query(book, "SELECT status FROM runs WHERE command = "
                                          "'refine search' ORDER BY id")]
    assert statuses == ["interrupted", "done"]
    per_position = query(book, "SELECT position_id, count(*) FROM analyses GROUP BY 1")
    assert {pid for pid, _n in per_position} == with_moves(book)
    assert {n for _pid, n in per_position} == {1}, "each position analysed exactly once"


def test_ctrl_c_stops_exits_130_and_keeps_what_was_recorded(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    code, out, err = _search_until_fault(tmp_path, book, "refine-search-recorded@2:SIGINT")
    assert code == 130, err
    assert "interrupted" in out and "Traceback" not in err
    run_id, _c, status, _e, _p, counts = last_run(book)
    assert status == "interrupted"
    assert json.loads(counts)["analysed"] == len(analyses(book, run_id)) == 2


def test_crashing_engine_is_survived(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    engine = fake_engine(FAKES / "crash_engine.py")  # exits on every 2nd go
    summary = search(book, SearchSettings(engine_settings(f"usi:{engine}", nodes=100)),
                     progress=False)
    assert summary.status == "done" and summary.analysed == 8 and summary.failed == 0
    assert summary.restarts >= 3
    rows = analyses(book)
    assert set(rows) == with_moves(book)
    for row in rows.values():
        check_analysis(row[0], row)


POISON_ENGINE = """
import sys
import cshogi

poison = sys.argv[1]
board = cshogi.Board()
for line in sys.stdin:
    tokens = line.split()
    if not tokens:
        continue
    if tokens[0] == "usi":
        print("id name PoisonEngine", flush=True)
        print("usiok", flush=True)
    elif tokens[0] == "isready":
        print("readyok", flush=True)
    elif tokens[0] == "position":
        board.set_position(" ".join(tokens[1:]))
    elif tokens[0] == "go":
        if board.sfen().rsplit(" ", 1)[0] == poison:
            sys.exit(5)
        move = cshogi.move_to_usi(list(board.legal_moves)[0])
        print(f"info depth 1 seldepth 1 score cp 7 nodes 1 pv {move}", flush=True)
        print(f"bestmove {move}", flush=True)
    elif tokens[0] == "quit":
        break
"""


def test_position_that_keeps_failing_is_counted_and_skipped(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    poison_id, poison = query(book, "SELECT id, sfen FROM positions WHERE id IN "
                                    "(SELECT position_id FROM moves) ORDER BY ply DESC, id "
                                    "LIMIT 1")[0]
    script = tmp_path / "poison.py"
    script.write_text(POISON_ENGINE)
    engine = f"usi:{fake_engine(script, poison)}"
    result = run_cli("refine", "search", "-b", book, "--engine", engine, "--json")
    summary = json.loads(result.output)
    assert summary["status"] == "done"
    assert (summary["analysed"], summary["failed"]) == (7, 1)
    assert summary["failed_positions"] == [poison_id] and "exit code 5" in summary["last_error"]
    assert summary["restarts"] >= 2
    assert set(analyses(book)) == with_moves(book) - {poison_id}
    counts = json.loads(last_run(book)[5])
    assert counts["failed"] == 1 and counts["failed_positions"] == [poison_id]
    # A later run tries the failed position again (and only it): failing on every
    # position it was given, the engine is reported as broken.
    result = run_cli("refine", "search", "-b", book, "--engine", engine, "--json", expect=2)
    assert "failed on every position it was given (1 position)" in result.stderr
    assert "exit code 5" in result.stderr
    run_id, _c, status, _e, _p, counts = last_run(book)
    assert status == "failed"
    assert json.loads(counts)["failed_positions"] == [poison_id]


def test_engine_failing_on_every_position_stops_the_run(grown, tmp_path):
    """Like grow: an engine that fails on the positions it is given before analysing
    any is broken; the run fails with its last error (exit 2) instead of going
    through the whole selection and reporting 'done'."""
    book = copy_of(grown, tmp_path)
    engine = fake_engine(FAKES / "fake_engine.py", "--crash-on-go", "1")  # every search
    result = run_cli("refine", "search", "-b", book, "--engine", f"usi:{engine}",
                     "--nodes", "100", "--retries", "1", expect=2)
    assert result.stderr.startswith("bookgen: error: engine usi:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "failed on the first 2 positions it was given" in result.stderr
    assert "last error: engine 'FakeEngine 1.0' stopped (exit code 3" in result.stderr
    assert "simulated crash" in result.stderr
    run_id, _c, status, _e, _p, counts = last_run(book)
    assert status == "failed" and analyses(book, run_id) == {}
    assert json.loads(counts)["failed"] == 2


def test_engine_answering_from_its_book_is_not_stored(grown, tmp_path):
    """An engine answering from its own book (YaneuraOu's default BookFile) is said
    once, with the option that turns the book off; nothing is stored, its positions
    are failed ones that a later run, with the book off, analyses."""
    book = copy_of(grown, tmp_path)
    engine = f"usi:{fake_engine(FAKES / 'fake_engine.py', '--book', 'depth0')}"
    result = run_cli("refine", "search", "-b", book, "--engine", engine, "--nodes", "100",
                     expect=2)
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if "answers from its own book" in line] == [
        "bookgen: engine 'FakeEngine 1.0' answers from its own book; its book moves are not "
        "stored as analyses (set --engine-option USI_OwnBook=false or --engine-option "
        "BookFile=no_book)"]
    assert lines[-1].startswith("bookgen: error: engine usi:") and "own book" in lines[-1]
    run_id, _c, status, _e, _p, counts = last_run(book)
    assert status == "failed" and analyses(book) == {}
    assert json.loads(counts)["failed"] >= 1
    result = run_cli("refine", "search", "-b", book, "--engine", engine, "--nodes", "100",
                     "--engine-option", "USI_OwnBook=false", "--json")
    summary = json.loads(result.output)
    assert summary["status"] == "done" and summary["failed"] == 0
    assert set(analyses(book)) == with_moves(book)
    assert "own book" not in result.stderr


def test_errors_are_one_line_and_write_nothing(grown, tmp_path):
    book = copy_of(grown, tmp_path)
    before = dump_book(book)
    for args, message in (
            (["--engine", "usi:/nonexistent/engine"], "cannot start engine"),
            (["--engine", f"usi:{FAIRY}", "--engine-option", "NoSuchOption=1"],
             "NoSuchOption"),
            (["--engine", "nonsense"], "unknown engine"),
            (["--byoyomi", "100"], "usi: engines only"),
            (["--select", "visits"], "--min-visits"),
            (["--engine-option", "novalue"], "NAME=VALUE")):
        result = run_cli("refine", "search", "-b", book, *args, expect=2)
        assert result.stderr.startswith("bookgen: error: ") and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert dump_book(book) == before
    result = run_cli("refine", "search", "-b", tmp_path / "missing.sqlite", expect=2)
    assert "no such book" in result.stderr
    assert not (tmp_path / "missing.sqlite").exists()
    result = run_cli("refine", "mistakes", "-b", book, expect=2)
    assert "no refine search analyses" in result.stderr


# ------------------------------------------------------------------ mistakes


def test_diff_eval_rule():
    # signs disagree beyond the margins and the difference is large
    assert classify(-1000, 300, None) == "diff"
    assert classify(100, 350, None) == "diff"          # book not clearly positive
    assert classify(200, 500, None) is None            # both clearly positive
    assert classify(-300, -800, None) is None          # both clearly negative
    assert classify(-100, 90, None) is None            # differ by less than --diff
    assert classify(-100, 90, None, diff=150) == "diff"
    assert classify(200, 500, None, thr=250) == "diff"  # book no longer clearly positive
    assert classify(200, 500, None, opp=600) == "diff"  # engine no longer clearly positive
    assert classify(0, 0, None, diff=0) is None
    # mates
    assert classify(2000, 29985, 15) == "missed_mate"   # the book missed the mate
    assert classify(29990, 29985, 15) is None           # the book has it too
    assert classify(29990, -29985, -15) == "missed_mate"
    assert classify(-50, -29999, -1) == "missed_mate"


def _book_values_from_analyses(book: Path) -> dict[int, tuple[int, str]]:
    """Set every analysed position's book moves to the engine's score (so that book
    and engine agree by construction); returns position id -> (score, sfen)."""
    rows = query(book, "SELECT a.position_id, a.score, p.sfen FROM analyses a "
                       "JOIN positions p ON p.id = a.position_id")
    conn = sqlite3.connect(book)
    with conn:
        for pid, score, _sfen in rows:
            conn.execute("UPDATE moves SET value = ? WHERE position_id = ?", (score, pid))
            conn.execute("UPDATE positions SET value = ?, minimax_value = NULL WHERE id = ?",
                         (score, pid))
    conn.close()
    return {pid: (score, sfen) for pid, score, sfen in rows}


def _corrupt(score: int) -> int:
    """A book value on the other side of zero, 500 cp beyond the engine's."""
    return -score - 500 if score >= 0 else -score + 500


def _corrupted_book(analysed: Path, tmp_path: Path) -> tuple[Path, dict[int, tuple[int, str]],
                                                             set[int], int, int]:
    book = copy_of(analysed, tmp_path)
    values = _book_values_from_analyses(book)
    chosen = sorted(values)
    corrupted = {chosen[1], chosen[3], chosen[5]}
    minimax_only, mate_pid = chosen[6], chosen[7]
    conn = sqlite3.connect(book)
    with conn:
        for pid in corrupted:
            conn.execute("UPDATE moves SET value = ? WHERE position_id = ?",
                         (_corrupt(values[pid][0]), pid))
        # minimax_value, when present, is the book's score: moves agree, minimax does not.
        conn.execute("UPDATE positions SET minimax_value = ? WHERE id = ?",
                     (_corrupt(values[minimax_only][0]), minimax_only))
        # An engine that announces a mate the book does not have.
        conn.execute("UPDATE moves SET value = 2000 WHERE position_id = ?", (mate_pid,))
        conn.execute("UPDATE analyses SET score = 29989, mate = 11 WHERE position_id = ?",
                     (mate_pid,))
    conn.close()
    return book, values, corrupted, minimax_only, mate_pid


def test_mistakes_are_exactly_the_corrupted_positions(analysed, tmp_path):
    book, values, corrupted, minimax_only, mate_pid = _corrupted_book(analysed, tmp_path)
    search_run = query(book, "SELECT id FROM runs WHERE command = 'refine search'")[0][0]
    result = run_cli("refine", "mistakes", "-b", book, "--json")
    report = json.loads(result.output)
    found = {m["position_id"]: m for m in report["mistakes"]}
    assert set(found) == corrupted | {minimax_only, mate_pid}
    assert report["compared"] == len(values) and report["status"] == "done"
    for pid in corrupted | {minimax_only}:
        score = values[pid][0]
        m = found[pid]
        assert (m["kind"], m["book_value"], m["engine_value"]) == ("diff", _corrupt(score),
                                                                   score)
        assert m["difference"] == score - _corrupt(score)
        assert m["analysis_run_id"] == search_run and m["sfen"] == values[pid][1]
    assert found[mate_pid]["kind"] == "missed_mate"
    assert found[mate_pid]["engine_mate"] == 11
    rows = query(book, "SELECT run_id, iteration, position_id, analysis_run_id, kind, "
                       "book_value, engine_value, difference FROM mistakes")
    assert {r[2] for r in rows} == set(found)
    assert {(r[0], r[1], r[3]) for r in rows} == {(report["run_id"], 0, search_run)}
    run = last_run(book)
    assert run[1:4] == ("refine mistakes", "done", f"usi:{FAIRY}")
    # The Python API agrees and writes nothing.
    assert {m.position_id for m in find_mistakes(book)} == set(found)
    # Uncorrupted, every position agrees: nothing is flagged.
    clean = tmp_path / "clean.sqlite"
    shutil.copy(analysed, clean)
    _book_values_from_analyses(clean)
    by_fairy = MistakesSettings(DetectionSettings(engine=f"usi:{FAIRY}"))
    assert mistakes(clean, by_fairy, progress=False).mistakes == []


def test_mistake_lines_replay_to_the_positions(analysed, tmp_path):
    book, values, corrupted, minimax_only, mate_pid = _corrupted_book(analysed, tmp_path)
    out = tmp_path / "mistakes.txt"
    result = run_cli("refine", "mistakes", "-b", book, "-o", out)
    assert "5 mistakes among 8 positions" in result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 5
    sfens = set()
    for line in lines:
        assert line.startswith("startpos")
        board = cshogi.Board()
        board.set_position(line)
        sfens.add(board.sfen().rsplit(" ", 1)[0])
    assert sfens == {values[pid][1] for pid in corrupted | {minimax_only, mate_pid}}
    # The lines are a roots file for grow.
    grow(book, small_grow(20, 2, roots=Roots.read(out)), progress=False)
    # Positions off the book's lines are written as sfen lines.
    board = cshogi.Board()
    for usi in ("2g2f", "8c8d", "2f2e"):
        board.push_usi(usi)
    lone = Mistake(0, board.sfen().rsplit(" ", 1)[0], 4, "diff", 0, 300, 300, None, None,
                   None, 1, "")
    line = position_line(lone)
    assert line == f"sfen {lone.sfen} 4"
    replay = cshogi.Board()
    replay.set_position(line)
    assert replay.sfen() == board.sfen()
    # --json to a file
    out_json = tmp_path / "mistakes.json"
    run_cli("refine", "mistakes", "-b", book, "--json", "-o", out_json)
    assert len(json.loads(out_json.read_text())["mistakes"]) == 5


def test_iterate_extends_the_book_at_the_mistakes(analysed, tmp_path):
    book, values, corrupted, minimax_only, mate_pid = _corrupted_book(analysed, tmp_path)
    positions_before = len(query(book, "SELECT id FROM positions"))
    settings = MistakesSettings(iterate=True, extension=ExtensionSettings(
        max_iterations=2, playouts=20, expand=1))
    summary = mistakes(book, settings, progress=False, extender=grow_extender)
    assert summary.status == "done"
    rounds = summary.rounds
    assert 2 <= len(rounds) <= 3 and rounds[0]["mistakes"] == 5 and rounds[0]["new"] == 5
    assert rounds[0]["roots"] == len(rounds[0]["grow_runs"]) >= 1
    assert rounds[-1]["new"] == 0 or len(rounds) == 3
    assert len(query(book, "SELECT id FROM positions")) > positions_before
    # Every root was grown: one grow run each, each expanded a position.
    grow_runs = [run for r in rounds for run in r.get("grow_runs", [])]
    per_run = dict(query(book, "SELECT expanded_run, count(*) FROM positions WHERE "
                               "expanded_run IS NOT NULL GROUP BY 1"))
    assert all(per_run.get(run) == 1 for run in grow_runs)
    # Each grow run records its root by the mistakes run, the extension and the root's
    # number (not a temporary file), with the seed derived from them.
    for iteration, round_ in enumerate(rounds, 1):
        for number, run in enumerate(round_.get("grow_runs", [])):
            params = json.loads(query(book, "SELECT params FROM runs WHERE id = ?", (run,))[0][0])
            assert params["roots"] == f"mistakes:{summary.run_id}:{iteration}:{number}"
            assert params["seed"] == iteration * 100_003 + number
            assert params["eval_threshold"] == 30000 and params["positions"] == 1
    # Every position the grow runs expanded was analysed with the same key.
    expanded = {r[0] for r in query(book, "SELECT id FROM positions WHERE expanded_run IN "
                                          f"({','.join('?' * len(grow_runs))})",
                                    tuple(grow_runs))}
    fairy = {r[0] for r in query(book, "SELECT a.position_id FROM analyses a JOIN runs r "
                                       "ON r.id = a.run_id WHERE json_extract(r.params, "
                                       "'$.key.nodes') = 5000")}
    assert expanded and expanded <= fairy
    # Where the book was too pessimistic the engine's move is now a book move, linked
    # to a position in the book; elsewhere the book's best move was followed.
    for pid in corrupted | {minimax_only}:
        score, sfen = values[pid]
        engine_move = query(book, "SELECT bestmove FROM analyses WHERE position_id = ?",
                            (pid,))[0][0]
        if score > _corrupt(score) or pid == minimax_only:
            child = query(book, "SELECT child_id FROM moves WHERE position_id = ? AND "
                                "move = ?", (pid, engine_move))
            assert child and child[0][0] is not None, "the engine's move is a book move"
            board = cshogi.Board(f"{sfen} 1")
            board.push_usi(engine_move)
            assert query(book, "SELECT sfen FROM positions WHERE id = ?",
                         (child[0][0],))[0][0] == board.sfen().rsplit(" ", 1)[0]
    iterations = {r[0] for r in query(book, "SELECT iteration FROM mistakes WHERE run_id = ?",
                                      (summary.run_id,))}
    assert iterations == set(range(len(rounds)))
    commands = [r[0] for r in query(book, "SELECT command FROM runs WHERE id > ? ORDER BY id",
                                    (summary.run_id,))]
    assert set(commands) == {"grow", "refine search", "refine minimax"}
    assert summary.as_dict()["notes"] == []
    assert integrity_ok(book)


def test_iterate_needs_an_extender(analysed, tmp_path):
    """refine does not import the grow stage: the grow runs of --iterate come from
    the extender the caller passes in (the CLI passes grow_extender, over bookgen.grow.grow)."""
    with pytest.raises(BookgenError, match="iterate needs an extender"):
        mistakes(copy_of(analysed, tmp_path), MistakesSettings(iterate=True), progress=False)


def test_iterate_counts_the_rows_it_writes(analysed, tmp_path):
    """The refine mistakes run's row counts the engine moves it made book moves
    and the positions it added for them (its grow and search runs count theirs)."""
    book = copy_of(analysed, tmp_path)
    values = _book_values_from_analyses(book)
    removed = 0
    conn = sqlite3.connect(book)
    with conn:  # too pessimistic books whose engine move is not a book move
        for pid, (score, _sfen) in sorted(values.items()):
            bestmove = conn.execute("SELECT bestmove FROM analyses WHERE position_id = ?",
                                    (pid,)).fetchone()[0]
            others = conn.execute("SELECT count(*) FROM moves WHERE position_id = ? AND "
                                  "move != ?", (pid, bestmove)).fetchone()[0]
            if score >= 0 and others:
                removed += conn.execute("DELETE FROM moves WHERE position_id = ? AND move = ?",
                                        (pid, bestmove)).rowcount
                conn.execute("UPDATE moves SET value = ? WHERE position_id = ?",
                             (_corrupt(score), pid))
    conn.close()
    assert removed > 0
    settings = MistakesSettings(iterate=True, extension=ExtensionSettings(
        max_iterations=1, playouts=20, expand=1))
    summary = mistakes(book, settings, progress=False, extender=grow_extender)
    engine_moves = summary.rounds[0]["engine_moves_added"]
    assert engine_moves >= removed
    added, moves, updated = query(book, "SELECT positions_added, moves_added, moves_updated "
                                        "FROM runs WHERE id = ?", (summary.run_id,))[0]
    assert moves + updated == engine_moves == len(query(
        book, "SELECT 1 FROM moves WHERE run_id = ?", (summary.run_id,)))
    assert added == len(query(book, "SELECT 1 FROM positions WHERE created_run = ?",
                              (summary.run_id,)))
    assert (summary.positions_added, summary.moves_added, summary.moves_updated) == \
        (added, moves, updated)


# ------------------------------------------------------------------ schema


def test_version_1_book_migrates_to_version_2(analysed, tmp_path):
    book = copy_of(analysed, tmp_path)
    mistakes(book, progress=False)
    conn = sqlite3.connect(book)
    with conn:
        conn.execute("DROP TABLE mistakes")
        conn.execute("DROP INDEX analyses_run")
        conn.execute("DROP TRIGGER links_new_node")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    before = dump_book(book)
    analyses_before = analyses(book)
    assert query(book, "PRAGMA user_version") == [(1,)]
    Book(book, create=False).close()
    assert query(book, "PRAGMA user_version") == [(4,)]     # (and on to version 4)
    assert dict(query(book, "SELECT key, value FROM meta"))["schema_version"] == "4"
    names = {r[0] for r in query(book, "SELECT name FROM sqlite_master")}
    assert {"mistakes", "mistakes_position", "analyses_run", "links_new_node"} <= names
    after = dump_book(book)
    assert after.pop("meta") != before.pop("meta")
    assert after == before and analyses(book) == analyses_before
    # The migrated book works with both commands.
    assert mistakes(book, progress=False).status == "done"
    assert search(book, fairy(5000), progress=False).analysed == 0
