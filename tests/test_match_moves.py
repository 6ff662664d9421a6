"""Per-move data in match results files: what real engines say of their moves, book
answers, the report's book exits, version-1 files, and kills in mid-game-write."""

from __future__ import annotations

import json
import shlex
import signal
import sqlite3
from pathlib import Path

import cshogi
import pytest

from bookgen.analysis.book_exits import exits_by_opening, read_book_exits
from bookgen.analysis.match import MatchSettings, match_player, run_match
from bookgen.analysis.ratings import RatingSettings
from bookgen.analysis.report import ReportSettings, build_report, render_markdown
from bookgen.engines.players import open_player
from bookgen.engines.protocols import MoveRecord
from bookgen.engines.usi.player import move_record
from bookgen.engines.usi.protocol import UsiSearch, parse_info
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules, play_game
from bookgen.store.results import (
    RESULTS_SCHEMA_VERSION,
    ResultsFile,
    read_game_moves,
)
from conftest import PYTHON, results_games, run_cli
from processes import Bookgen, stop_all

FAIRY = "usi:/usr/games/fairy-stockfish"
GPSUSI = "usi:/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"
OPENINGS = ["startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d"]


def fake(*args: object) -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in
                             (PYTHON, FAKES / "fake_engine.py", *args))


def write_openings(path: Path, lines: list[str] = OPENINGS) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def move_rows(results: Path) -> dict[int, list[sqlite3.Row]]:
    db = sqlite3.connect(results)
    db.row_factory = sqlite3.Row
    try:
        by_game: dict[int, list[sqlite3.Row]] = {}
        for row in db.execute("SELECT * FROM moves ORDER BY game_id, ply"):
            by_game.setdefault(row["game_id"], []).append(row)
        return by_game
    finally:
        db.close()


def check_rows_match_games(results: Path) -> dict[int, list[sqlite3.Row]]:
    """Every game has one row per move, in order, with the right mover."""
    moves = move_rows(results)
    for game in results_games(results):
        rows = moves.get(game["id"], [])
        assert [r["move"] for r in rows] == game["moves"].split(), game["game_key"]
        assert [r["ply"] for r in rows] == list(range(1, game["plies"] + 1))
        white_first = game["start_sfen"].split()[1] == "w"
        names = (game["white"], game["black"]) if white_first else (game["black"],
                                                                      game["white"])
        assert [r["mover"] for r in rows] == [names[i % 2] for i in range(len(rows))]
    assert set(moves) <= {g["id"] for g in results_games(results)}   # no orphan rows
    return moves


# --------------------------------------------------------------------------
# real engines


def test_fairy_stockfish_and_the_builtin_player_record_every_move(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    results = tmp_path / "r.sqlite"
    out = run_cli("match", "--engine", f"fsf={FAIRY}", "--option", "fsf:USI_Hash=16",
                  "--builtin", "bi", "--option", "bi:nodes=500", "--openings", openings,
                  "--nodes", "3000", "--max-ply", "40", "-o", results, "--quiet", "--json")
    assert json.loads(out.stdout)["played"] == 4
    moves = check_rows_match_games(results)
    rows = [r for game in moves.values() for r in game]
    fsf = [r for r in rows if r["mover"] == "fsf"]
    builtin = [r for r in rows if r["mover"] == "bi"]
    assert fsf and builtin
    read = read_game_moves(results)
    assert [[(m.ply, m.move, m.mover, m.nodes, m.pv) for m in g.moves] for g in read] == \
        [[(r["ply"], r["move"], r["mover"], r["nodes"], r["pv"]) for r in moves[g.game_id]]
         for g in read]
    assert {g.game_id for g in read} == set(moves)
    for row in fsf:
        assert row["source"] == "search"
        assert row["depth"] >= 1 and row["seldepth"] >= 1
        assert 0 < row["nodes"] <= 3000 * 1.5          # go nodes 3000 (engines overshoot)
        assert (row["score_cp"] is None) != (row["score_mate"] is None)
        assert row["bound"] in ("exact", "lower", "upper")
        assert row["pv"].split()[0] == row["move"]
        assert row["time_ms"] is not None and row["time_ms"] >= 0
    for row in builtin:
        assert row["source"] == "search" and row["depth"] >= 1 and row["nodes"] > 0
        assert row["pv"].split()[0] == row["move"] and row["bound"] == "exact"
    # The mover's score is the one score adjudication and CSA comments use: the same
    # sign convention, from the mover's side. A mate row has no cp.
    assert all(r["score_cp"] is None or abs(r["score_cp"]) < 30000 for r in rows)


def test_gpsusi_moves_carry_depth_nodes_and_pv(tmp_path):
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    results = tmp_path / "r.sqlite"
    run_cli("match", "--engine", f"gps={GPSUSI}", "--option", "gps:BookDepth=0",
            "--builtin", "bi", "--option", "bi:nodes=300", "--openings", openings,
            "--byoyomi", "100", "--margin", "20000", "--max-ply", "14", "--games", "2",
            "-o", results, "--quiet", "--json")
    moves = check_rows_match_games(results)
    gps = [r for game in moves.values() for r in game if r["mover"] == "gps"]
    assert gps
    assert all(r["source"] == "search" and r["depth"] and r["nodes"] and r["pv"]
               for r in gps), [dict(r) for r in gps]


def test_no_record_moves_writes_no_rows_and_plays_the_same_games(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    players = [match_player("a", "builtin", (("nodes", "300"),)),
               match_player("b", "builtin", (("nodes", "600"),))]
    base = MatchSettings(control=TimeControl(nodes=1), rules=GameRules(max_ply=30))
    on = run_match(players, openings, tmp_path / "on.sqlite", base, progress=False)
    off = run_match(players, openings, tmp_path / "off.sqlite",
                    MatchSettings(control=TimeControl(nodes=1), rules=GameRules(max_ply=30),
                                  record_moves=False), progress=False)
    assert on.played == off.played == 4
    assert len(move_rows(tmp_path / "off.sqlite")) == 0
    assert len(move_rows(tmp_path / "on.sqlite")) == 4
    assert [g["moves"] for g in results_games(tmp_path / "on.sqlite")] == \
        [g["moves"] for g in results_games(tmp_path / "off.sqlite")]
    # The flag is not part of the match: rerunning with recording on finds it complete.
    again = run_match(players, openings, tmp_path / "off.sqlite", base, progress=False)
    assert again.previously_played == 4 and again.played == 0


# --------------------------------------------------------------------------
# book answers


def test_book_answers_are_recorded_as_book_and_the_report_shows_the_exit(tmp_path):
    """A YaneuraOu-like engine answers from its book in the game's first 6 plies
    (depth 0 / nodes 0 lines), then searches; the other answers with info strings about
    its book in the first 8. Each move's source says which, and the report finds each
    exit (plies from the initial position: the openings play two moves first)."""
    openings = write_openings(tmp_path / "openings.txt")
    results = tmp_path / "r.sqlite"
    run_cli("match", "--engine", f"yane={fake('--book', 'depth0', '--book-plies', '6')}",
            "--engine", f"str={fake('--book', 'string', '--book-plies', '8')}",
            "--openings", openings, "--nodes", "100", "--max-ply", "20", "-o", results,
            "--quiet", "--json")
    moves = check_rows_match_games(results)
    by_ply = {"yane": 6, "str": 8}
    for rows in moves.values():
        for row in rows:
            expected = "book" if row["ply"] <= by_ply[row["mover"]] else "search"
            assert row["source"] == expected, dict(row)
            if row["source"] == "book" and row["mover"] == "yane":
                assert (row["depth"], row["nodes"], row["score_cp"]) == (0, 0, 37)
            if row["source"] == "search":
                assert (row["depth"], row["nodes"]) == (3, 100)
    count, exits = read_book_exits([results])
    assert count == 4
    for found in exits:
        # Its first searched move: the first ply past its book it was to move at.
        limit = 2 + by_ply[found.engine]
        assert found.ply is not None and limit < found.ply <= limit + 2, found
        assert found.score_cp == 50 and found.score_mate is None   # the fake's searched score
        assert found.book_moves >= 1
    assert {(e.opening, e.engine) for e in exits} == {
        (o, n) for o in OPENINGS for n in ("yane", "str")}
    report = build_report(ReportSettings((results,), rating=RatingSettings(simulations=0)))
    assert report.move_games == 4
    table = [r for r in report.book_exits if r.engine == "yane"
             and r.opening == OPENINGS[0]][0]
    assert table.games == 2 and sorted(e.ply or 0 for e in table.exits) == [9, 10]
    text = render_markdown(report, "files")
    assert "Leaving the book" in text
    assert "9 (black)" in text and "10 (white)" in text and "11 (black)" in text
    out = run_cli("report", results, "-o", tmp_path / "r.html", "-s", "0", "--json")
    summary = json.loads(out.stdout)
    assert {(r["opening"], r["engine"]) for r in summary["book_exits"]} == {
        (o, n) for o in OPENINGS for n in ("yane", "str")}
    assert "Leaving the book" in (tmp_path / "r.html").read_text()


def test_move_record_tells_book_answers_from_searches():
    def search(*lines: str, bestmove: str = "7g7f") -> UsiSearch:
        result = UsiSearch(bestmove, lines=list(lines))
        for line in lines:
            info = parse_info(line)
            if info is not None and (info.has_score or info.pv):
                result.infos[info.multipv] = info
            if info is not None and info.nodes is not None:
                result.nodes = max(result.nodes or 0, info.nodes)
        return result

    book = move_record(search("info depth 0 seldepth 0 score cp 12 nodes 0 pv 7g7f"))
    assert book == MoveRecord("book", 12, None, "exact", 0, 0, 0, ("7g7f",))
    assert move_record(search("info string book hit")).source == "book"
    searched = move_record(search("info string book miss, searching",
                                  "info depth 5 seldepth 7 score cp -30 upperbound "
                                  "nodes 900 pv 7g7f 3c3d",
                                  "info depth 6 seldepth 8 score mate 3 nodes 2000 "
                                  "pv 7g7f 3c3d 2g2f"))
    assert searched == MoveRecord("search", None, 3, "exact", 6, 8, 2000,
                                  ("7g7f", "3c3d", "2g2f"))
    assert move_record(search("info depth 4 score cp 5 lowerbound nodes 10 pv 7g7f")
                       ).bound == "lower"
    assert move_record(search()) == MoveRecord("search")


def test_book_exits_from_the_engines_own_side(tmp_path):
    """Exits are per engine and colour, read from a results file; a game from an sfen
    counts plies from its move number; an engine that never left its book has no exit
    ply; a game without per-move data has none."""
    start = "lnsgkgsnl/9/9/9/9/9/9/9/LNSGKGSNL w - 5"   # white (b) moves first, move 5

    def row(ply: int, mover: str, source: str, cp: int | None = None,
            mate: int | None = None) -> tuple:
        return (ply, f"m{ply}", mover, source, cp, mate, None, None, None, None, 1, None)

    path = tmp_path / "r.sqlite"
    with ResultsFile(path) as store:
        match_id = store.begin_match("k" * 16, {}, 4)
        games = [[row(1, "b", "book"), row(2, "a", "search", -40), row(3, "b", "book"),
                  row(4, "a", "search", 10), row(5, "b", "search", None, -3)],
                 [row(1, "b", "book"), row(2, "a", "book")],
                 []]
        for index, rows in enumerate(games):
            store.add_game(match_id, rows, game_key=f"g{index}", round=0, pair=index,
                           opening_index=0, opening="sfen X", start_sfen=start, black="a",
                           white="b", result="draw", reason="max ply", plies=len(rows),
                           moves=" ".join(r[1] for r in rows))
    count, exits = read_book_exits([path])
    assert count == 2
    first = {e.engine: e for e in exits if e.game_id == 1}
    assert (first["a"].colour, first["a"].book_moves, first["a"].ply, first["a"].move,
            first["a"].score_cp) == ("black", 0, 6, "m2", -40)
    assert (first["b"].colour, first["b"].book_moves, first["b"].ply, first["b"].move,
            first["b"].score_cp, first["b"].score_mate) == ("white", 2, 9, "m5", None, -3)
    grouped = exits_by_opening(exits)
    assert [(g.opening, g.engine) for g in grouped] == [("sfen X", "a"), ("sfen X", "b")]
    b = grouped[1]
    assert b.games == 2 and len(b.left) == 1 and b.median_ply == 9 and b.mean_cp is None
    assert [(e.ply, e.book_moves) for e in b.exits] == [(9, 2), (None, 1)]
    assert grouped[0].mean_cp == -40 and grouped[0].book_moves == 0.5


# --------------------------------------------------------------------------
# the file: version 1, kills


def make_v1(path: Path) -> None:
    """A version-1 results file with one game, as bookgen wrote it before per-move data."""
    with ResultsFile(path) as store:
        match_id = store.begin_match("k" * 16, {}, 2)
        store.add_player("a", "builtin")
        store.add_player("b", "builtin")
        store.add_game(match_id, game_key="a|b/0/0/0", round=0, pair=0, opening_index=0,
                       opening="startpos", start_sfen=cshogi.Board().sfen(), black="a",
                       white="b", result="black", reason="resign", plies=1, moves="7g7f",
                       black_ms=1, white_ms=0)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE moves")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()


def test_version_1_files_are_read_and_migrated_when_written(tmp_path):
    results = tmp_path / "v1.sqlite"
    make_v1(results)
    # Read as it is: its game counts, it has no per-move data, nothing is changed.
    assert read_game_moves(results) == []
    report = build_report(ReportSettings((results,), rating=RatingSettings(simulations=0)))
    assert report.games == 1 and report.move_games == 0 and report.book_exits == []
    assert all(s.id != "book-exits" for s in report.sections)
    db = sqlite3.connect(results)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.close()
    # A match writing to it migrates it; its old game stays, without moves.
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    run_cli("match", "--builtin", "a", "--builtin", "b", "--option", "a:nodes=300",
            "--option", "b:nodes=300", "--openings", openings, "--nodes", "1",
            "--max-ply", "20", "-o", results, "--quiet", "--json")
    db = sqlite3.connect(results)
    assert db.execute("PRAGMA user_version").fetchone()[0] == RESULTS_SCHEMA_VERSION == 2
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    assert meta["schema_version"] == "2" and "migrated_from_1_at" in meta
    db.close()
    games = results_games(results)
    assert len(games) == 3
    moves = move_rows(results)
    assert games[0]["id"] not in moves and all(g["id"] in moves for g in games[1:])
    report = build_report(ReportSettings((results,), rating=RatingSettings(simulations=0)))
    assert report.games == 3 and report.move_games == 2
    out = run_cli("rate", results, "--json")
    assert '"name": "a"' in out.stdout


def test_kill_while_a_game_is_written_leaves_no_half_game(tmp_path):
    """kill -9 inside the third game's transaction, after its games row and before its
    moves: the file holds two whole games, and the rerun plays the rest, each game
    with all its moves."""
    openings = write_openings(tmp_path / "openings.txt")
    results = tmp_path / "r.sqlite"
    args = ["--builtin", "a", "--builtin", "b", "--option", "a:nodes=300",
            "--option", "b:nodes=300", "--openings", openings, "--nodes", "1",
            "--games", "4", "--max-ply", "30", "-o", results]
    process = Bookgen(tmp_path, "match", "--quiet", *args,
                      env={"BOOKGEN_FAULT": "results-game-writing@3"})
    try:
        code, _stdout, stderr = process.finish(deadline=120)
    finally:
        stop_all(process, {})
    assert code == -signal.SIGKILL, stderr
    assert len(results_games(results)) == 2
    check_rows_match_games(results)
    out = run_cli("match", "--quiet", "--json", *args)
    assert json.loads(out.stdout)["played"] == 2
    assert len(results_games(results)) == 4
    assert len(check_rows_match_games(results)) == 4


def test_selfplay_loop_output_is_unchanged_by_records():
    """The loop carries the records beside the scores: the moves, scores and outcome
    of a game are those of the players' choices, records or not."""
    player = open_player(match_player("x", "builtin", (("nodes", "200"),)))
    game = play_game("startpos", {cshogi.BLACK: player, cshogi.WHITE: player},
                     GameRules(max_ply=12))
    assert len(game.records) == len(game.moves) == len(game.move_ms) == len(game.scores)
    for record, move, score in zip(game.records, game.moves, game.scores):
        assert record is not None and record.pv[0] == move
        assert score == (record.cp if record.mate is None else score)


@pytest.mark.parametrize("flag, expected", [("--record-moves", True),
                                            ("--no-record-moves", False)])
def test_record_moves_flag(tmp_path, flag, expected):
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    results = tmp_path / "r.sqlite"
    run_cli("match", "--builtin", "a", "--builtin", "b", "--option", "a:nodes=200",
            "--option", "b:nodes=200", "--openings", openings, "--nodes", "1",
            "--max-ply", "10", "-o", results, "--quiet", "--json", flag)
    assert bool(move_rows(results)) is expected
