"""bookgen match: schedules, real engine matches, rule adjudication, faults, resume."""

from __future__ import annotations

import json
import os
import pickle
import re
import shlex
import signal
import sqlite3
from functools import partial
from pathlib import Path

import cshogi
import cshogi.CSA
import pytest

from bookgen.analysis.match import MatchSettings, MatchSprt, match_player, run_match
from bookgen.analysis.pairstats import SprtSettings
from bookgen.analysis.results import load_games
from bookgen.analysis.schedule import schedule
from bookgen.cli.support import error_text
from bookgen.engines.protocols import MoveChoice
from bookgen.engines.usi.player import UsiPlayer
from bookgen.errors import BookgenError, SettingsError
from bookgen.play.clock import ClockState, TimeControl
from bookgen.play.loop import GameRules, play_game
from bookgen.play.rules import GameState, Reason, Result
from conftest import PYTHON, ROOT, results_games, run_cli
from processes import Bookgen, stop_all

FAIRY = "usi:/usr/games/fairy-stockfish"
GPSUSI = "usi:/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"
OPENINGS = ["startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d",
            "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"]
DECLARATION_SFEN = "RRBBG4/GGSSK4/NN7/9/9/9/9/9/8k b 2P 1"


def fake(*args: object, engine: str = "fake_engine.py") -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / engine, *args))


def write_openings(path: Path, lines: list[str] = OPENINGS) -> Path:
    path.write_text("# test openings\n\n" + "\n".join(lines) + "\n")
    return path


def match(tmp_path: Path, *args: object, expect: int = 0, results: str = "r.sqlite"):
    out = run_cli("match", "-o", tmp_path / results, "--quiet", "--json", *args, expect=expect)
    return json.loads(out.stdout) if expect == 0 else out


def check_games(results: Path) -> list[sqlite3.Row]:
    """Every game replays legally from its start, and its result agrees with its reason."""
    games = results_games(results)
    for game in games:
        state = GameState(game["start_sfen"], max_ply=None)
        moves = game["moves"].split()
        for move in moves:
            assert state.push(move) is None or state.ply == len(moves), game["game_key"]
        assert game["plies"] == len(moves)
        loser_to_move = {"black": cshogi.WHITE, "white": cshogi.BLACK}.get(game["result"])
        reason = game["reason"]
        if reason == "checkmate":
            assert state.outcome is not None and state.board.is_check()
            assert state.board.turn == loser_to_move
        elif reason in ("repetition draw", "max ply"):
            assert game["result"] == "draw"
        elif reason in ("resign", "illegal move", "time forfeit", "engine failure",
                        "illegal declaration"):
            assert state.outcome is None and state.board.turn == loser_to_move, game["game_key"]
        elif reason == "declaration":
            assert state.can_declare() and game["result"] == (
                "black" if state.board.turn == cshogi.BLACK else "white")
        elif reason == "perpetual check":
            assert state.outcome is not None and str(state.outcome.reason) == reason
            assert game["result"] == str(state.outcome.result.name).split("_")[0].lower()
        else:
            pytest.fail(f"unexpected reason {reason}")
    return games


def check_pairs(games: list[sqlite3.Row]) -> None:
    by_pair: dict[int, list[sqlite3.Row]] = {}
    for game in games:
        by_pair.setdefault(game["pair"], []).append(game)
    for pair, members in by_pair.items():
        assert len(members) == 2, pair
        first, second = members
        assert first["opening"] == second["opening"]
        assert first["start_sfen"] == second["start_sfen"]
        assert (first["black"], first["white"]) == (second["white"], second["black"])


# --------------------------------------------------------------------------
# schedules


def test_schedule_pairs_swap_colours_and_keys_are_stable():
    openings = list(enumerate(["a", "b", "c"]))
    short = schedule(["x", "y", "z"], openings, "round-robin", pairs_per_pairing=2)
    long = schedule(["x", "y", "z"], openings, "round-robin", pairs_per_pairing=5)
    assert len(short) == 3 * 2 * 2 and len(long) == 3 * 5 * 2
    assert long[:len(short)] == short  # extending a match keeps every key and pair number
    assert len({t.key for t in long}) == len(long)
    for first, second in zip(long[::2], long[1::2]):
        assert first.pair == second.pair and first.opening == second.opening
        assert (first.black, first.white) == (second.white, second.black)
        assert not first.swapped and second.swapped
    # Openings cycle once every pairing used them all.
    assert [t.opening for t in long if {t.black, t.white} == {"x", "y"}][::2] == \
        ["a", "b", "c", "a", "b"]
    gauntlet = schedule(["x", "y", "z"], openings, "gauntlet", pairs_per_pairing=1)
    assert {frozenset((t.black, t.white)) for t in gauntlet} == {frozenset("xy"),
                                                                  frozenset("xz")}
    with pytest.raises(BookgenError, match="exactly 2"):
        schedule(["x", "y", "z"], openings, "pairs", pairs_per_pairing=1)


def test_clocks_fischer_lag_accumulates_and_byoyomi_resets():
    from bookgen.play.clock import TimeControl

    fischer = TimeControl(time=1000, inc=100, margin=300)
    clocks = {cshogi.BLACK: 1000, cshogi.WHITE: 1000}
    assert fischer.spend(clocks, cshogi.BLACK, 1200) is None   # 200 ms of the 300 of lag
    assert clocks[cshogi.BLACK] == -200 + 100
    assert fischer.spend(clocks, cshogi.BLACK, 150) is None    # allowed: -100 + 300
    assert clocks[cshogi.BLACK] == -250 + 100
    assert "150 ms allowed" in fischer.spend(clocks, cshogi.BLACK, 151)
    byoyomi = TimeControl(time=500, byoyomi=1000, margin=300)
    clocks = {cshogi.BLACK: 500, cshogi.WHITE: 500}
    assert byoyomi.spend(clocks, cshogi.BLACK, 1700) is None   # main time + byoyomi + lag
    assert clocks[cshogi.BLACK] == 0
    assert byoyomi.spend(clocks, cshogi.BLACK, 1300) is None   # byoyomi is per move
    assert clocks[cshogi.BLACK] == 0
    assert byoyomi.spend(clocks, cshogi.BLACK, 1301) is not None
    assert clocks[cshogi.WHITE] == 500


# --------------------------------------------------------------------------
# real engines


def test_fairy_stockfish_against_the_builtin_player(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    summary = match(tmp_path, "--engine", f"fsf={FAIRY}", "--option", "fsf:USI_Hash=16",
                    "--builtin", "bi", "--option", "bi:nodes=2000", "--openings", openings,
                    "--nodes", "3000", "--max-ply", "100", "--pgn", tmp_path / "games.pgn",
                    "--csa", tmp_path / "csa")
    assert summary["played"] == summary["scheduled"] == 6
    assert sum(summary["points"].values()) == 6
    games = check_games(tmp_path / "r.sqlite")
    check_pairs(games)
    assert {g["opening_index"] for g in games} == {0, 1, 2}
    # The PGN holds the same games, sente as White, with colour-swapped pairs.
    pgn = load_games([tmp_path / "games.pgn"])
    assert [(g.black, g.white, g.result, g.reason, g.plies) for g in pgn] == \
        [(g["black"], g["white"], g["result"], g["reason"], g["plies"]) for g in games]
    assert len({g.pair for g in pgn}) == 3
    # CSA records replay to the same moves and results.
    records = sorted((tmp_path / "csa").glob("*.csa"))
    assert len(records) == 6
    by_names = {(g["pair"], g["black"]): g for g in games}
    for path in records:
        parser = cshogi.CSA.Parser.parse_file(str(path))[0]
        pair = int(path.name.split("-")[1])
        game = by_names[(pair, parser.names[0])]
        assert [cshogi.move_to_usi(m) for m in parser.moves] == game["moves"].split()
        expected = {"black": cshogi.BLACK_WIN, "white": cshogi.WHITE_WIN, "draw": cshogi.DRAW}
        assert parser.win == expected[game["result"]]
    db = sqlite3.connect(tmp_path / "r.sqlite")
    players = dict(db.execute("SELECT name, engine FROM players").fetchall())
    assert players["fsf"].lower().startswith("fairy-stockfish")
    assert players["bi"].startswith("bookgen builtin")
    db.close()


class Recorded:
    """A player whose moves are written down as the runner sees them: the clocks it
    was given, its reply (with the time the runner measured) and the commands sent
    to its engine, in one log shared by both players."""

    def __init__(self, player: UsiPlayer, log: list[tuple[str, object]]) -> None:
        self.player, self.log = player, log
        send = player.engine.send
        player.engine.send = lambda command: (log.append(("sent", (self.name, command))),
                                              send(command))[1]

    def __getattr__(self, name: str) -> object:
        return getattr(self.player, name)

    def choose(self, game: GameState, clock: ClockState | None, rng: object) -> MoveChoice:
        assert clock is not None
        before = dict(clock.remaining_ms)
        choice = self.player.choose(game, clock, rng)
        self.log.append(("move", (self.name, game.turn, before, choice)))
        return choice


def go_line(clocks: dict[int, int], inc: int) -> str:
    """The ``go`` the runner owes an engine under a Fischer clock (never a negative time)."""
    return (f"go btime {max(0, clocks[cshogi.BLACK])} wtime {max(0, clocks[cshogi.WHITE])} "
            f"binc {inc} winc {inc}")


def test_fischer_clock_rules_on_a_fake_clock(tmp_path):
    """The runner's clock rules, timed by a fake clock that the fake engines advance
    by the milliseconds they are told to spend: what each engine is sent, what each
    move is charged, lag forgiven within the margin, and a time forfeit at the first
    move past it, whatever the machine's load."""
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")

    def clock() -> float:
        return int(clock_file.read_text()) / 1000

    def player(name: str, spend: str, *extra: object) -> UsiPlayer:
        command = fake("--clock-file", clock_file, "--spend", spend, "--log",
                       tmp_path / f"{name}.log", *extra)
        return UsiPlayer(match_player(name, command), clock=clock)

    control = TimeControl(time=1000, inc=100, margin=300)
    # b: 1200 ms (200 of lag, allowed up to 1300), then 150 (allowed: -100 + 300), then
    # 400 where 150 are allowed: it overruns and answers only when told to stop.
    players = {"b": player("b", "1200,150,400", "--until-stop-on-go", "3"),
               "w": player("w", "50,50")}
    try:
        game = play_game("startpos", {cshogi.BLACK: players["b"], cshogi.WHITE: players["w"]},
                         GameRules(max_ply=40), clock=control)
    finally:
        for one in players.values():
            one.close()
    outcome = game.outcome
    assert (outcome.result, outcome.reason, len(game.moves)) == (
        Result.WHITE_WIN, Reason.TIME_FORFEIT, 4)
    assert "no bestmove in time" in outcome.detail
    assert (game.black_ms, game.white_ms) == (1200 + 150, 50 + 50)  # the forfeit is not charged

    def commands(name: str) -> list[str]:
        lines = (tmp_path / f"{name}.log").read_text().splitlines()
        return [line for line in lines if line.split()[0] in ("go", "stop")]

    assert commands("b") == ["go btime 1000 wtime 1000 binc 100 winc 100",
                             "go btime 0 wtime 1050 binc 100 winc 100",   # -100 sent as 0
                             "go btime 0 wtime 1100 binc 100 winc 100",
                             "stop"]
    assert commands("w") == ["go btime 0 wtime 1000 binc 100 winc 100",
                             "go btime 0 wtime 1050 binc 100 winc 100"]


def test_fairy_stockfish_plays_under_a_fischer_clock(tmp_path):
    """Two Fairy-Stockfish play a game under a real Fischer clock. Its facts do not
    depend on the machine's load: every ``go`` carries the clocks that follow from
    the times the runner measured, and the game's times are their sums. The margin
    is far beyond any lag, so no forfeit is left to load (the clock rules themselves
    are tested on a fake clock above)."""
    log: list[tuple[str, object]] = []
    spec = "usi:/usr/games/fairy-stockfish"
    options = (("Move Overhead", "300"),)
    players = {name: Recorded(UsiPlayer(match_player(name, spec, options)), log)
               for name in ("a", "b")}
    control = TimeControl(time=1000, inc=200, margin=60_000)
    try:
        game = play_game(OPENINGS[0], {cshogi.BLACK: players["a"], cshogi.WHITE: players["b"]},
                         GameRules(max_ply=30), clock=control)
    finally:
        for one in players.values():
            one.close()
    reason = game.outcome.reason
    assert reason not in (Reason.TIME_FORFEIT, Reason.ENGINE_FAILURE, Reason.ILLEGAL_MOVE), game
    moves = [entry for kind, entry in log if kind == "move"]
    gos = [entry for kind, entry in log if kind == "sent" and entry[1].startswith("go ")]
    assert len(moves) == len(gos) >= len(game.moves) > 0
    assert reason != Reason.MAX_PLY or len(game.moves) == 28
    clocks = {cshogi.BLACK: 1000, cshogi.WHITE: 1000}
    used = {cshogi.BLACK: 0, cshogi.WHITE: 0}
    for (name, turn, given, reply), (sent_to, line) in zip(moves, gos, strict=True):
        assert sent_to == name == ("a" if turn == cshogi.BLACK else "b")
        assert given == clocks and line == go_line(clocks, 200)
        assert reply.elapsed_ms >= 0
        clocks[turn] += 200 - reply.elapsed_ms
        used[turn] += reply.elapsed_ms
    assert (game.black_ms, game.white_ms) == (used[cshogi.BLACK], used[cshogi.WHITE])


def test_match_sends_the_fischer_clock(tmp_path):
    """``bookgen match --time --inc`` reaches the engines as ``go btime wtime binc winc``."""
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    summary = match(tmp_path, "--engine", f"a={fake('--log', tmp_path / 'a.log')}",
                    "--engine", f"b={fake('--log', tmp_path / 'b.log')}", "--openings",
                    openings, "--time", "1000", "--inc", "200", "--margin", "60000",
                    "--max-ply", "8")
    assert summary["played"] == 2
    for name, first_as_black in (("a", 0), ("b", 3)):  # a has black in the first game
        gos = [line for line in (tmp_path / f"{name}.log").read_text().splitlines()
               if line.startswith("go ")]
        assert len(gos) == 6  # three moves in each of its two games
        assert gos[first_as_black] == "go btime 1000 wtime 1000 binc 200 winc 200"
        assert all(re.fullmatch(r"go btime \d+ wtime \d+ binc 200 winc 200", g) for g in gos)


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
def test_fairy_stockfish_against_gpsusi(tmp_path):
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    # gpsusi rounds byoyomi up to whole seconds; the margin covers that with room for
    # any load (this test is about the two engines playing, not their timing).
    summary = match(tmp_path, "--engine", f"fsf={FAIRY}", "--engine", f"gps={GPSUSI}",
                    "--option", "gps:BookDepth=0", "--option", "fsf:USI_Hash=16",
                    "--openings", openings, "--byoyomi", "200", "--margin", "20000",
                    "--max-ply", "26")
    assert summary["played"] == 2
    games = check_games(tmp_path / "r.sqlite")
    check_pairs(games)
    assert all(g["reason"] != "time forfeit" and g["reason"] != "engine failure"
               for g in games), [dict(g) for g in games]
    assert all(g["black_ms"] > 0 and g["white_ms"] > 0 for g in games)


def test_resume_and_extend_play_only_missing_games(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    common = ["--builtin", "a", "--builtin", "b", "--option", "a:nodes=300",
              "--option", "b:nodes=600", "--openings", openings, "--nodes", "1",
              "--max-ply", "40", "--seed", "7"]
    first = match(tmp_path, *common, "--games", "2")
    assert (first["played"], first["previously_played"]) == (2, 0)
    again = match(tmp_path, *common, "--games", "2")
    assert (again["played"], again["previously_played"]) == (0, 2)
    more = match(tmp_path, *common, "--games", "6")
    assert (more["played"], more["previously_played"]) == (4, 2)
    games = check_games(tmp_path / "r.sqlite")
    assert len(games) == 6 and len({g["game_key"] for g in games}) == 6
    check_pairs(games)
    # --seed shuffles the openings but every opening is used once per cycle.
    assert sorted({g["opening_index"] for g in games}) == [0, 1, 2]
    # A different setting is a different match in the same file.
    other = match(tmp_path, *common[:-2], "--games", "2")
    assert other["match_id"] != first["match_id"] and other["played"] == 2


def test_concurrency_plays_the_same_schedule(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    common = ["--engine", f"f={fake()}", "--builtin", "b", "--option", "b:nodes=200",
              "--openings", openings, "--nodes", "1", "--max-ply", "30"]
    one = match(tmp_path, *common, results="one.sqlite")
    two = match(tmp_path, *common, "--concurrency", "2", "--pgn", tmp_path / "two.pgn",
                results="two.sqlite")
    assert one["played"] == two["played"] == 6
    # Games reach the PGN in completion order; its Pair tags keep the pairs.
    from bookgen.analysis.pairstats import count_games
    from_pgn = count_games(load_games([tmp_path / "two.pgn"]), "f", "b")
    from_results = count_games(load_games([tmp_path / "two.sqlite"]), "f", "b")
    assert from_pgn == from_results and from_pgn.unpaired == 0

    def key_results(name: str):
        return sorted((g["game_key"], g["result"], g["moves"])
                      for g in results_games(tmp_path / name))

    # Deterministic players: the same games, whatever the order they finished in.
    assert key_results("one.sqlite") == key_results("two.sqlite")


# --------------------------------------------------------------------------
# the rules, on scripted games


def scripted(tmp_path: Path, name: str, moves: str, *extra: object) -> str:
    script = tmp_path / f"{name}.script"
    script.write_text(moves)
    return fake("--script", script, *extra)


def play_scripted(tmp_path: Path, opening: str, moves: str, *args: object,
                  engine_args: tuple = ()) -> sqlite3.Row:
    """Both sides play the scripted moves; returns the first game (black = 'one')."""
    openings = write_openings(tmp_path / "openings.txt", [opening])
    engine = scripted(tmp_path, "game", moves, *engine_args)
    match(tmp_path, "--engine", f"one={engine}", "--engine", f"two={engine}",
          "--openings", openings, "--nodes", "1", *args)
    games = check_games(tmp_path / "r.sqlite")
    assert games[0]["black"] == "one"
    return games[0]


def test_fourfold_repetition_is_a_draw(tmp_path):
    game = play_scripted(tmp_path, "startpos", "2h3h 8b7b 3h2h 7b8b " * 3)
    assert (game["result"], game["reason"], game["plies"]) == ("draw", "repetition draw", 12)


def test_perpetual_check_loses_for_the_checker(tmp_path):
    game = play_scripted(tmp_path, "sfen k8/9/9/9/9/9/9/9/1R2K4 b - 1",
                         "8i9i 9a8a 9i8i 8a9a " * 3)
    assert (game["result"], game["reason"], game["plies"]) == ("white", "perpetual check", 12)


def test_declaration_win_and_false_declaration(tmp_path):
    game = play_scripted(tmp_path, f"sfen {DECLARATION_SFEN}", "win")
    assert (game["result"], game["reason"], game["plies"]) == ("black", "declaration", 0)
    (tmp_path / "false").mkdir()
    false = play_scripted(tmp_path / "false", "startpos", "7g7f win")
    assert (false["result"], false["reason"], false["plies"]) == ("black",
                                                                  "illegal declaration", 1)


def test_builtin_player_declares(tmp_path):
    openings = write_openings(tmp_path / "openings.txt", [f"sfen {DECLARATION_SFEN}"])
    match(tmp_path, "--builtin", "a", "--builtin", "b", "--openings", openings, "--nodes", "1")
    games = check_games(tmp_path / "r.sqlite")
    assert [(g["black"], g["result"], g["reason"]) for g in games] == [
        ("a", "black", "declaration"), ("b", "black", "declaration")]


def test_max_ply_counts_from_the_initial_position(tmp_path):
    moves = "5i5h 5a5b 5h5i 5b5a 6i5h 4a4b 5h6i 4b4a 4i5h 6a5b"
    game = play_scripted(tmp_path, "startpos moves 7g7f 3c3d", moves, "--max-ply", "8")
    # Two opening plies, so six plies are played before ply 8.
    assert (game["result"], game["reason"], game["plies"]) == ("draw", "max ply", 6)


def test_checkmate_and_score_resignation(tmp_path):
    # Fool's-mate style: black mates with the gold after white's blunders.
    mate = play_scripted(tmp_path, "sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1", "G*5b")
    assert (mate["result"], mate["reason"], mate["plies"]) == ("black", "checkmate", 1)
    (tmp_path / "r.sqlite").unlink()
    resigned = play_scripted(tmp_path, "startpos", "2h3h 8b7b 3h2h 7b8b 2g2f", "--resign",
                             "500", "--resign-moves", "2", engine_args=("--score", "-900"))
    # Black reports -900 twice (plies 0 and 2) and resigns at its second report.
    assert (resigned["result"], resigned["reason"], resigned["plies"]) == ("white", "resign", 2)


# --------------------------------------------------------------------------
# faults


def test_faulty_engines_lose_and_the_match_goes_on(tmp_path):
    openings = write_openings(tmp_path / "openings.txt", OPENINGS[:1])
    summary = match(tmp_path, "--engine", "ok=builtin", "--option", "ok:nodes=200",
                    "--engine", f"crash={fake(engine='crash_engine.py')}",
                    "--engine", f"hang={fake(engine='hang_engine.py')}",
                    "--engine", f"bad={fake(engine='garbage_engine.py')}",
                    "--engine", f"noisy={fake('--garbage')}",
                    "--format", "gauntlet", "--openings", openings,
                    # A margin that the fake engines' instant replies never need, even
                    # on a loaded machine; hang's games cost it (twice).
                    "--byoyomi", "100", "--margin", "2000", "--max-ply", "30")
    assert summary["played"] == summary["scheduled"] == 4 * 2
    games = check_games(tmp_path / "r.sqlite")
    check_pairs(games)
    by_opponent: dict[str, list[sqlite3.Row]] = {}
    for game in games:
        opponent = game["white"] if game["black"] == "ok" else game["black"]
        by_opponent.setdefault(opponent, []).append(game)

    def losses(name: str) -> list[tuple[str, str]]:
        return [(g["reason"], g["detail"]) for g in by_opponent[name]
                if g["result"] == ("white" if g["black"] == name else "black")]

    # crash_engine dies on its second search; it was restarted for its second game,
    # where it again played one move before dying.
    crashes = losses("crash")
    assert [reason for reason, _ in crashes] == ["engine failure"] * 2
    assert all("crash" in detail for _, detail in crashes)
    assert sorted(g["plies"] for g in by_opponent["crash"]) == [2, 3]
    # hang never answers: a time forfeit at its first move.
    assert [reason for reason, _ in losses("hang")] == ["time forfeit"] * 2
    # bad prints garbage, then an illegal move.
    assert losses("bad") == [("illegal move", "9a9a")] * 2
    # noisy prints the same garbage but plays legal moves: its games end normally.
    assert all(g["reason"] not in ("engine failure", "time forfeit", "illegal move")
               for g in by_opponent["noisy"])


def test_engine_that_cannot_start_stops_the_match_before_any_game(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    out = match(tmp_path, "--engine", "x=usi:/nonexistent/engine", "--builtin", "b",
                "--openings", openings, expect=2)
    assert "player x" in out.stderr and "/nonexistent/engine" in out.stderr
    assert not (tmp_path / "r.sqlite").exists()


# --------------------------------------------------------------------------
# interruption


@pytest.mark.parametrize("how", ["SIGINT", "kill"])
def test_interrupted_match_resumes(tmp_path, how):
    """Ctrl-C (or kill -9) once the third game is recorded: exactly three games are
    kept, and the rerun plays the other five."""
    openings = write_openings(tmp_path / "openings.txt")
    results = tmp_path / "r.sqlite"
    args = ["--builtin", "a", "--builtin", "b", "--option", "a:nodes=1000",
            "--option", "b:nodes=1000", "--openings", openings, "--nodes", "1",
            "--games", "8", "--max-ply", "40", "-o", results]
    fault = "match-game-recorded@3" + (":SIGINT" if how == "SIGINT" else "")
    process = Bookgen(tmp_path, "match", "--quiet", *args, env={"BOOKGEN_FAULT": fault})
    try:
        code, stdout, stderr = process.finish(deadline=120)
    finally:
        stop_all(process, {})
    if how == "SIGINT":
        assert code == 130, stderr
        assert "interrupted" in stdout and "rerun the same command" in stderr
        db = sqlite3.connect(results)
        assert db.execute("SELECT status FROM matches").fetchone()[0] == "interrupted"
        db.close()
    else:
        assert code == -signal.SIGKILL
    assert len(results_games(results)) == 3
    summary = match(tmp_path, *args[:-2])
    assert (summary["previously_played"], summary["played"]) == (3, 5)
    games = check_games(results)
    assert len(games) == 8
    check_pairs(games)


# --------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("args, message", [
    (["--engine", "nousi=/usr/games/fairy-stockfish"], "expected NAME=usi:COMMAND"),
    (["--builtin", "a", "--builtin", "b", "--option", "c:nodes=1"], "no player named 'c'"),
    (["--builtin", "a", "--builtin", "b", "--option", "a:speed=1"], "unknown built-in option"),
    (["--builtin", "a", "--builtin", "a"], "two players are named 'a'"),
    (["--builtin", "a", "--builtin", "b", "--games", "3"], "even"),
    (["--builtin", "a", "--builtin", "b", "--nodes", "10", "--byoyomi", "10"],
     "--nodes excludes"),
    (["--builtin", "a", "--builtin", "b", "--games", "2", "--rounds", "1"], "exclude"),
    (["--builtin", "a", "--builtin", "b", "--builtin", "c", "--format", "pairs"],
     "exactly 2"),
    (["--engine", f"gps={GPSUSI}", "--builtin", "b", "--nodes", "100"], "go nodes"),
    (["--engine", f"fsf={FAIRY}", "--option", "fsf:NoSuchOption=1", "--builtin", "b"],
     "NoSuchOption"),
])
def test_bad_arguments_are_clear_errors(tmp_path, args, message):
    openings = write_openings(tmp_path / "openings.txt")
    out = match(tmp_path, *args, "--openings", openings, expect=2)
    assert message in out.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_bad_openings_name_the_line(tmp_path):
    openings = tmp_path / "openings.txt"
    openings.write_text("startpos moves 7g7f\nstartpos moves 7g7f 7g7f\n")
    out = match(tmp_path, "--builtin", "a", "--builtin", "b", "--openings", openings, expect=2)
    assert f"{openings}:2" in out.stderr
    openings = write_openings(tmp_path / "good.txt")
    book = tmp_path / "book.sqlite"
    run_cli("import", ROOT / "data" / "sample.db", "-b", book)
    out = match(tmp_path, "--builtin", "a", "--builtin", "b", "--openings", openings,
                "--games", "2", expect=2, results="book.sqlite")
    assert "book.sqlite" in out.stderr
    assert os.path.getsize(book) > 0


def test_sprt_stops_the_match_when_the_test_ends(tmp_path):
    openings = write_openings(tmp_path / "openings.txt")
    summary = match(tmp_path, "--engine", f"bad={fake(engine='garbage_engine.py')}",
                    "--engine", "ok=builtin", "--option", "ok:nodes=100", "--openings",
                    openings, "--byoyomi", "100", "--games", "100", "--sprt", "0,100")
    # The first player is the engine under test when --sprt names none.
    assert summary["stopped_by"].startswith(
        "SPRT for bad vs ok: H0 accepted: bad is not stronger than ok by 100 normalized Elo")
    assert summary["played"] < 100 and summary["played"] % 2 == 0
    db = sqlite3.connect(tmp_path / "r.sqlite")
    status, settings = db.execute("SELECT status, settings FROM matches").fetchone()
    assert status == "stopped"
    db.close()
    recorded = json.loads(settings)["sprt"]
    assert (recorded["engine"], recorded["opponent"], recorded["elo0"], recorded["elo1"]) == \
        ("bad", "ok", 0, 100)
    assert recorded["last"]["verdict"] == "H0" == summary["sprt"]["verdict"]
    verdict = json.loads(run_cli("sprt", tmp_path / "r.sqlite", "--engine", "bad", "--vs", "ok",
                                 "--elo0", "0", "--elo1", "100", "--json").stdout)
    assert verdict["verdict"] == "H0"
    # One pair fewer would not have ended the test.
    games = load_games([tmp_path / "r.sqlite"])[:-2]
    from bookgen.analysis.pairstats import SprtSettings, sprt
    assert sprt(games, "bad", "ok", SprtSettings(elo0=0, elo1=100)).verdict is None


def test_sprt_names_the_engine_under_test(tmp_path):
    """With the stronger player listed second, --sprt ENGINE:ELO0,ELO1 tests ENGINE; the
    output, the results file and the report say which engine was tested."""
    openings = write_openings(tmp_path / "openings.txt")
    players = ["--engine", "ok=builtin", "--option", "ok:nodes=100", "--engine",
               f"bad={fake(engine='garbage_engine.py')}", "--openings", openings,
               "--byoyomi", "100", "--games", "100"]
    out = run_cli("match", "-o", tmp_path / "h1.sqlite", "--quiet", *players,
                  "--sprt", "ok:0,100")
    assert "bookgen: SPRT for ok (engine under test) vs bad: H0 0, H1 100" in out.stderr
    assert "stopped: SPRT for ok vs bad: H1 accepted: ok is stronger than bad" in out.stdout
    out = run_cli("match", "-o", tmp_path / "h0.sqlite", "--quiet", *players,
                  "--sprt", "bad:0,100")
    assert ("stopped: SPRT for bad vs ok: H0 accepted: bad is not stronger than ok by 100 "
            "normalized Elo") in out.stdout
    # Without a name the first player is tested, and the first line says so.
    out = run_cli("match", "-o", tmp_path / "first.sqlite", "--quiet", *players,
                  "--sprt", "0,100")
    assert ("SPRT for ok (engine under test) vs bad: H0 0, H1 100 normalized Elo, alpha "
            "0.05, beta 0.05 (the first player; name another with --sprt bad:0,100)"
            in out.stderr)
    assert "H1 accepted: ok is stronger than bad" in out.stdout
    # The results file records the test; the report shows it from the tested side.
    db = sqlite3.connect(tmp_path / "h0.sqlite")
    recorded = json.loads(db.execute("SELECT settings FROM matches").fetchone()[0])["sprt"]
    db.close()
    assert (recorded["engine"], recorded["last"]["verdict"]) == ("bad", "H0")
    report = tmp_path / "report.md"
    run_cli("report", tmp_path / "h0.sqlite", "-o", tmp_path / "report.html", "--markdown",
            report, "-s", "0")
    text = report.read_text()
    assert "SPRT: bad (engine under test) vs ok" in text
    assert "recorded by bookgen match" in text
    assert "H0 accepted: bad is not stronger than ok" in text
    # Bad names are clear errors.
    for bad, message in (("nobody:0,5", "no player named 'nobody'"),
                         ("ok:5,0", "ELO0 must be below ELO1"), ("ok:x", "ENGINE:ELO0,ELO1")):
        error = run_cli("match", "-o", tmp_path / "e.sqlite", "--quiet", *players,
                        "--sprt", bad, expect=2)
        assert message in error.stderr



# --------------------------------------------------------------------------
# the library: MatchSettings


@pytest.mark.parametrize("fields, field, library, cli", [
    ({"games": 2, "rounds": 1}, "games", "games and rounds exclude each other",
     "--games and --rounds exclude each other"),
    ({"games": 3}, "games", "games must be a positive even number (games come in "
     "colour-swapped pairs), got 3", "--games must be a positive even number (games come in "
     "colour-swapped pairs), got 3"),
    ({"control": TimeControl(nodes=5, byoyomi=100)}, "control.nodes",
     "control.nodes excludes control.byoyomi, control.time and control.inc",
     "--nodes excludes --byoyomi, --time and --inc"),
    ({"control": TimeControl(inc=100)}, "control",
     "give a time control: control.byoyomi MS, control.time MS [control.inc MS] or "
     "control.nodes N", "give a time control: --byoyomi MS, --time MS [--inc MS] or --nodes N"),
    ({"rules": partial(GameRules, resign_cp=0)}, "rules.resign_cp",
     "rules.resign_cp must be a positive number of centipawns",
     "--resign must be a positive number of centipawns"),
    ({"rules": partial(GameRules, max_ply=0)}, "rules.max_ply", "rules.max_ply must be at least 1",
     "--max-ply must be at least 1"),
    ({"concurrency": 0}, "concurrency", "concurrency must be at least 1",
     "--concurrency must be at least 1"),
])
def test_match_settings_name_their_fields(fields, field, library, cli):
    with pytest.raises(SettingsError) as caught:  # the rules check themselves when made
        MatchSettings(**{k: v() if isinstance(v, partial) else v for k, v in fields.items()})
    assert (caught.value.field, str(caught.value), error_text(caught.value)) == \
        (field, library, cli)


def test_run_match_takes_settings_and_keys_the_match_as_the_cli(tmp_path):
    """A match played through the library is the one the command line would play:
    rerunning it as a command finds every game there."""
    openings = write_openings(tmp_path / "openings.txt")
    players = [match_player("a", "builtin", (("nodes", "50"),)),
               match_player("b", "builtin", (("nodes", "50"),))]
    test = MatchSprt("b", "a", SprtSettings(0.0, 100.0))
    settings = MatchSettings(control=TimeControl(nodes=1), rules=GameRules(max_ply=24),
                             games=4, seed=2, sprt=test)
    assert pickle.loads(pickle.dumps(settings)) == settings  # sent to the workers
    summary = run_match(players, openings, tmp_path / "r.sqlite", settings, progress=False)
    assert summary.played == 4
    db = sqlite3.connect(tmp_path / "r.sqlite")
    recorded = json.loads(db.execute("SELECT settings FROM matches").fetchone()[0])["sprt"]
    db.close()
    assert {k: v for k, v in recorded.items() if k != "last"} == test.as_json()
    again = match(tmp_path, "--builtin", "a", "--builtin", "b", "--option", "a:nodes=50",
                  "--option", "b:nodes=50", "--openings", openings, "--nodes", "1",
                  "--max-ply", "24", "--games", "4", "--seed", "2", "--sprt", "b:0,100")
    assert (again["played"], again["previously_played"]) == (0, 4)
    # An SPRT of players not in the match: the library names the setting.
    other = MatchSettings(control=TimeControl(nodes=1), games=2,
                          sprt=MatchSprt("a", "c", SprtSettings(0.0, 5.0)))
    with pytest.raises(SettingsError) as caught:
        run_match(players, openings, tmp_path / "x.sqlite", other, progress=False)
    assert str(caught.value) == "sprt: a vs c is not this match's pair (a, b)"
    assert error_text(caught.value) == "--sprt: a vs c is not this match's pair (a, b)"
    assert not (tmp_path / "x.sqlite").exists()


def test_bad_sprt_error_rates_stop_the_match_before_it_starts(tmp_path):
    """--sprt-alpha/--sprt-beta are checked with the test (before, a test no SPRT can
    have let the match run on to the end)."""
    openings = write_openings(tmp_path / "openings.txt")
    for args, message in ((("--sprt-alpha", "2"), "--sprt-alpha must be in (0, 1), not 2"),
                          (("--sprt-alpha", "0.6", "--sprt-beta", "0.5"),
                           "--sprt-alpha + --sprt-beta must be below 1")):
        error = match(tmp_path, "--builtin", "a", "--builtin", "b", "--openings", openings,
                      "--nodes", "1", "--sprt", "0,5", *args, expect=2)
        assert error.stderr == f"bookgen: error: {message}\n"
    assert not (tmp_path / "r.sqlite").exists()
