"""bookgen match and USI engines: per-engine controls and go options, pondering,
gameover, and per-game USI transcripts (real engines and fake ones that log what
they receive)."""

from __future__ import annotations

import gzip
import io
import json
import re
import shlex
import sqlite3
from pathlib import Path

import cshogi
import cshogi.CSA
import numpy as np
import pytest

from bookgen.analysis.match import MatchSettings, match_player, parse_control
from bookgen.cli.support import error_text
from bookgen.engines.player_settings import PlayerSettings
from bookgen.engines.usi import client
from bookgen.engines.usi.client import UsiEngine
from bookgen.engines.usi.player import UsiPlayer
from bookgen.engines.usi.transcript import Transcript
from bookgen.errors import SettingsError
from bookgen.formats.records import write_csa_record
from bookgen.play.clock import ClockState, TimeControl
from bookgen.play.rules import GameState, Outcome, Reason, Result
from conftest import PYTHON, results_games, run_cli

FAIRY = "usi:/usr/games/fairy-stockfish"
GPSUSI = "usi:/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"
OPENING = "startpos moves 7g7f 3c3d"


def fake(*args: object, engine: str = "fake_engine.py") -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / engine, *args))


def openings(tmp_path: Path, lines: tuple[str, ...] = (OPENING,)) -> Path:
    path = tmp_path / "openings.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def match(tmp_path: Path, *args: object, expect: int = 0):
    out = run_cli("match", "-o", tmp_path / "r.sqlite", "--quiet", "--json",
                  "--openings", openings(tmp_path), *args, expect=expect)
    return json.loads(out.stdout) if expect == 0 else out


def received(log: Path, *commands: str) -> list[str]:
    """The lines an engine received (its --log), those starting with ``commands``."""
    lines = log.read_text().splitlines()
    return [line for line in lines if not commands or line.split()[0] in commands]


def transcripts(folder: Path) -> dict[str, str]:
    """Each transcript file's text by name (every file must be gzip)."""
    return {path.name: gzip.decompress(path.read_bytes()).decode()
            for path in sorted(folder.iterdir())}


def sent(text: str, name: str) -> list[str]:
    """The lines of a transcript that engine ``name`` was sent."""
    found = []
    for line in text.splitlines():
        parts = line.split(None, 3)
        if parts[0] != "#" and parts[1:3] == [name, ">"]:
            found.append(parts[3])
    return found


# --------------------------------------------------------------------------
# per-engine controls and go options


def test_clock_state_runs_each_sides_control():
    black, white = TimeControl(time=1000, inc=100), TimeControl(byoyomi=300)
    clocks = ClockState.start(black, {cshogi.BLACK: black, cshogi.WHITE: white})
    assert clocks.remaining_ms == {cshogi.BLACK: 1000, cshogi.WHITE: 0}
    assert (clocks.control_of(cshogi.BLACK), clocks.control_of(cshogi.WHITE)) == (black, white)
    assert clocks.spend(cshogi.BLACK, 400) is None and clocks.remaining_ms[cshogi.BLACK] == 700
    assert clocks.spend(cshogi.WHITE, 1200) is None and clocks.remaining_ms[cshogi.WHITE] == 0
    assert clocks.spend(cshogi.WHITE, 1301) is not None   # byoyomi 300 + margin 1000
    same = ClockState.start(black)
    assert same.controls is None and same.control_of(cshogi.WHITE) == black


def test_per_engine_controls_and_go_options_reach_the_engines(tmp_path):
    """Time odds (Fischer against byoyomi), node odds, and go options: each engine is
    sent its own limits, both games, whatever its colour."""
    logs = {name: tmp_path / f"{name}.log" for name in "abc"}
    summary = match(tmp_path, "--engine", f"a={fake('--log', logs['a'])}",
                    "--engine", f"b={fake('--log', logs['b'])}",
                    "--tc", "a:time=1000,inc=100", "--tc", "b:byoyomi=300",
                    "--go-option", "b:depth=3", "--margin", "60000", "--max-ply", "10",
                    "--pgn", tmp_path / "g.pgn", "--csa", tmp_path / "csa")
    assert summary["played"] == 2
    # a plays black in the first game: btime is its clock, binc its increment.
    gos_a, gos_b = received(logs["a"], "go"), received(logs["b"], "go")
    assert gos_a[0] == "go btime 1000 wtime 0 binc 100 winc 0"
    assert all(re.fullmatch(r"go btime \d+ wtime 0 binc 100 winc 0", g) for g in gos_a[:4])
    assert all(re.fullmatch(r"go btime 0 wtime \d+ binc 0 winc 100", g) for g in gos_a[4:])
    assert all(re.fullmatch(r"go btime \d+ wtime 0 byoyomi 300 depth 3", g)
               for g in gos_b[:4]), gos_b
    assert all(re.fullmatch(r"go btime 0 wtime \d+ byoyomi 300 depth 3", g)
               for g in gos_b[4:]), gos_b
    assert len(gos_a) == len(gos_b) == 8
    pgn = (tmp_path / "g.pgn").read_text()
    assert '[WhiteTimeControl "1 s +0.1 s"]\n[BlackTimeControl "byoyomi 0.3 s"]' in pgn
    # The CSA records name each side's control in comment lines after the game's,
    # and still read back (a is black in one game, white in the other).
    records = sorted((tmp_path / "csa").glob("*.csa"))
    assert len(records) == 2
    for path in records:
        parsed = cshogi.CSA.Parser.parse_file(str(path))[0]
        controls = {"a": "1 s +0.1 s", "b": "byoyomi 0.3 s"}
        black, white = parsed.names
        lines = path.read_text().splitlines()
        header = lines[:next(i for i, line in enumerate(lines) if line.startswith("P"))]
        assert header[:3] == ["V2.2", f"N+{black}", f"N-{white}"]
        assert header[3].startswith("'bookgen match ")
        assert header[4:] == [f"'time control + {black}: {controls[black]}",
                              f"'time control - {white}: {controls[white]}"]
        assert {black, white} == {"a", "b"} and parsed.moves
    db = sqlite3.connect(tmp_path / "r.sqlite")
    params = json.loads(db.execute("SELECT settings FROM matches").fetchone()[0])
    db.close()
    assert params["controls"]["a"]["inc"] == 100 and params["controls"]["b"]["byoyomi"] == 300

    # Node odds: a searches 500 nodes, b keeps the default byoyomi; both games again.
    for log in logs.values():
        log.unlink(missing_ok=True)
    summary = run_cli("match", "-o", tmp_path / "n.sqlite", "--quiet", "--json",
                      "--openings", openings(tmp_path),
                      "--engine", f"a={fake('--log', logs['a'])}",
                      "--engine", f"b={fake('--log', logs['b'])}", "--nodes", "a:500",
                      "--byoyomi", "200", "--margin", "60000", "--max-ply", "10")
    assert json.loads(summary.stdout)["played"] == 2
    assert set(received(logs["a"], "go")) == {"go nodes 500"}
    assert all(re.fullmatch(r"go btime 0 wtime 0 byoyomi 200", g)
               for g in received(logs["b"], "go"))


@pytest.mark.timeout(600)
def test_fairy_stockfish_node_odds_and_gpsusi_byoyomi(tmp_path):
    """Real engines under their own limits: Fairy-Stockfish on a node budget with a go
    option, gpsusi (which aborts on go nodes) on byoyomi, seen in the transcripts."""
    summary = match(tmp_path, "--engine", f"fsf={FAIRY}", "--engine", f"gps={GPSUSI}",
                    "--option", "gps:BookDepth=0", "--nodes", "fsf:3000",
                    "--go-option", "fsf:depth=20", "--tc", "gps:byoyomi=200",
                    "--margin", "20000", "--max-ply", "14", "--transcripts", tmp_path / "t")
    assert summary["played"] == 2
    assert all(g["reason"] not in ("time forfeit", "engine failure", "illegal move")
               for g in results_games(tmp_path / "r.sqlite"))
    texts = transcripts(tmp_path / "t")
    assert len(texts) == 2
    for text in texts.values():
        fsf = [line for line in sent(text, "fsf") if line.startswith("go")]
        gps = [line for line in sent(text, "gps") if line.startswith("go")]
        assert fsf and set(fsf) == {"go nodes 3000 depth 20"}
        assert gps and all(re.fullmatch(r"go btime 0 wtime 0 byoyomi 200", g) for g in gps)
    # gpsusi refuses the go limits it aborts on, also as a go option.
    out = match(tmp_path, "--engine", f"gps={GPSUSI}", "--builtin", "b", "--go-option",
                "gps:depth=3", expect=2)
    assert "gpsshogi aborts on 'go depth'" in out.stderr


@pytest.mark.parametrize("args, message", [
    (["--tc", "c:byoyomi=100"], "--tc 'c:byoyomi=100': no player named 'c' (players: a, b)"),
    (["--nodes", "c:100"], "--nodes 'c:100': no player named 'c' (players: a, b)"),
    (["--tc", "a:speed=3"], "bad --tc 'a:speed=3': expected KEY=VALUE"),
    (["--tc", "a:byoyomi=x"], "bad --tc 'a:byoyomi=x': expected KEY=VALUE"),
    (["--tc", "a:nodes=5,byoyomi=100"], "--tc a: nodes excludes byoyomi, time and inc"),
    (["--tc", "a:inc=100"], "--tc a: give a time control"),
    (["--tc", "a:byoyomi=100", "--tc", "a:time=100"], "--tc: two controls for 'a'"),
    (["--tc", "byoyomi=100", "--byoyomi", "200"], "--tc CONTROL excludes --byoyomi"),
    (["--nodes", "a:many"], "bad --nodes 'a:many': expected N or NAME:N"),
    (["--go-option", "c:depth=1"], "--go-option 'c:depth=1': no player named 'c'"),
    (["--go-option", "a:depth"], "bad --go-option 'a:depth': expected NAME:KEY=VALUE"),
    (["--go-option", "a:btime=1"], "--go-option: 'btime' is set by the runner"),
    (["--go-option", "a:depth=1 2"], "--go-option: depth='1 2' needs one value"),
])
def test_bad_per_engine_specs_are_one_line_errors(tmp_path, args, message):
    out = match(tmp_path, "--engine", f"a={fake()}", "--engine", f"b={fake()}", *args,
                expect=2)
    assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_library_settings_name_the_per_engine_fields():
    with pytest.raises(SettingsError) as caught:
        MatchSettings(controls=(("a", parse_control("nodes=5,time=10")),))
    assert (caught.value.field, error_text(caught.value)) == (
        "controls", "--tc a: nodes excludes byoyomi, time and inc")
    with pytest.raises(SettingsError) as caught:
        MatchSettings(transcripts_on="sometimes")
    assert error_text(caught.value) == "--transcripts-on must be all or failure, not 'sometimes'"
    with pytest.raises(SettingsError) as caught:
        match_player("a", "usi:x", go_options=(("ponder", "1"),))
    assert caught.value.field == "go_options"
    assert MatchSettings(controls=(("a", TimeControl(nodes=9)),)).control_for("a").nodes == 9
    assert MatchSettings().control_for("b") == TimeControl(byoyomi=1000)


# --------------------------------------------------------------------------
# pondering


def ponder_player(tmp_path: Path, name: str, clock, *extra: object) -> UsiPlayer:
    command = fake("--ponder", "--clock-file", tmp_path / "clock", "--log",
                   tmp_path / f"{name}.log", *extra)
    settings = match_player(name, command)
    return UsiPlayer(PlayerSettings(settings.spec, name=name, restarts=settings.restarts,
                                    ponder=True), clock=clock)


def test_ponderhit_charges_from_the_ponderhit_and_a_miss_is_stopped(tmp_path):
    """On a fake clock: the time before ``ponderhit`` is the opponent's, the time after it
    the engine's; a miss is stopped (its wait charged) and searched afresh; the ponder
    search's clocks are those after the move is charged."""
    (tmp_path / "clock").write_text("0")

    def clock() -> float:
        return int((tmp_path / "clock").read_text()) / 1000

    def advance(ms: int) -> None:
        path = tmp_path / "clock"
        path.write_text(str(int(path.read_text()) + ms))

    rng = np.random.default_rng(0)
    for miss in (False, True):
        name = "miss" if miss else "hit"
        extra = ("--spend", "200,300,40", *(["--ponder-miss"] if miss else []))
        player = ponder_player(tmp_path, name, clock, *extra)
        try:
            player.new_game()
            game = GameState("startpos", max_ply=None)
            control = TimeControl(time=10_000, inc=500)
            clocks = ClockState.start(control)
            first = player.choose(game, clocks, rng)
            assert first.elapsed_ms == 200
            assert clocks.spend(cshogi.BLACK, first.elapsed_ms) is None  # as the loop does
            game.push(first.move)
            advance(5000)   # the opponent thinks; the engine ponders
            reply = [cshogi.move_to_usi(m) for m in game.board.legal_moves][0]
            assert clocks.spend(cshogi.WHITE, 5000) is None
            game.push(reply)
            second = player.choose(game, clocks, rng)
            player.game_over("draw")
        finally:
            player.close()
        lines = received(tmp_path / f"{name}.log", "go", "ponderhit", "stop", "position",
                         "gameover", "setoption")
        assert lines[0] == "setoption name USI_Ponder value true"
        assert lines[1] == "position sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/" \
                           "LNSGKGSNL b - 1"
        assert lines[2] == "go btime 10000 wtime 10000 binc 500 winc 500"
        # The ponder search: the clocks after the move (10000 - 200 + 500), white's as is.
        assert lines[3].startswith(f"{lines[1]} moves {first.move} ")
        assert lines[4] == "go ponder btime 10300 wtime 10000 binc 500 winc 500"
        if not miss:
            assert lines[3].split()[-1] == reply
            assert lines[5] == "ponderhit"
            assert second.elapsed_ms == 300   # the 5000 ms before ponderhit are not charged
            rest = lines[6:]
        else:
            assert lines[3].split()[-1] != reply
            assert lines[5:7] == ["stop", f"{lines[1]} moves {first.move} {reply}"]
            assert lines[7] == "go btime 10300 wtime 5500 binc 500 winc 500"
            assert second.elapsed_ms == 300 + 40    # the stop's answer and the new search
            rest = lines[8:]
        # The second answer ponders too; the game's end stops it before gameover.
        assert rest[0].startswith(f"{lines[1]} moves {first.move} {reply} {second.move} ")
        assert rest[1].startswith("go ponder ") and rest[2:] == ["stop", "gameover draw"]
        (tmp_path / "clock").write_text("0")


def test_match_ponders_and_stops_pondering_at_the_end(tmp_path):
    """Two pondering fakes under a clock: every ``go ponder`` ends in ``ponderhit`` or
    ``stop``, ``stop`` before ``gameover`` when the game ends during a ponder search; an
    engine without USI_Ponder is told so once and never ponders."""
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b", "c")}
    out = run_cli("match", "-o", tmp_path / "r.sqlite", "--quiet", "--json", "--openings",
                  openings(tmp_path), "--engine", f"a={fake('--ponder', '--log', logs['a'])}",
                  "--engine", f"b={fake('--ponder', '--log', logs['b'])}",
                  "--engine", f"c={fake('--log', logs['c'])}", "--format", "gauntlet",
                  "--ponder", "--time", "60000", "--inc", "100", "--max-ply", "9")
    assert json.loads(out.stdout)["played"] == 4
    assert out.stderr.count("plays without pondering") == 1
    assert "player c plays without pondering" in out.stderr
    assert not [line for line in received(logs["c"]) if "ponder" in line.lower()]
    a = received(logs["a"], "go", "ponderhit", "stop", "gameover", "usinewgame")
    ponders = [i for i, line in enumerate(a) if line.startswith("go ponder")]
    assert ponders
    for i in ponders:   # never a gameover (or another go) into a ponder search
        assert a[i + 1] in ("ponderhit", "stop"), a[i:i + 2]
    assert "ponderhit" in a   # b and c play the reply a expects (the first legal move)
    # Both sides are pondering when a game ends (the side to move on its opponent's
    # last move, the last mover on the reply it expects): a is stopped before gameover.
    ends = [a[i - 2:i + 1] for i, line in enumerate(a) if line.startswith("gameover")]
    assert len(ends) == 4 and a.count("usinewgame") == 4
    assert all(end[0].startswith("go ponder") and end[1:] == ["stop", "gameover draw"]
               for end in ends), ends


def test_an_engine_that_dies_while_pondering_loses_and_is_not_written_to(tmp_path):
    """The engine crashes on its ``go ponder`` (its second go): at its next move the
    ``ponderhit`` or the wait for its answer finds it dead, the game is its loss by
    engine failure, and it gets no ``gameover``; the failed games keep transcripts."""
    log = tmp_path / "dies.log"
    dies = fake("--ponder", "--crash-on-go", 2, "--log", log)
    summary = match(tmp_path, "--engine", f"dies={dies}", "--engine", f"ok={fake('--ponder')}",
                    "--ponder", "--time", "60000", "--inc", "100", "--max-ply", "40",
                    "--transcripts", tmp_path / "t", "--transcripts-on", "failure")
    assert summary["played"] == 2 and summary["points"] == {"ok": 2.0, "dies": 0.0}
    assert summary["reasons"] == {"engine failure": 2}
    lines = received(log, "go", "ponderhit", "stop", "gameover", "usi")
    for i, line in enumerate(lines):
        if line.startswith("go ponder"):   # it died here: next, a restart or nothing
            assert lines[i + 1:i + 2] in ([], ["usi"]), lines[i:i + 2]
    # The transcripts show what bookgen sent, also to a dead engine: no gameover to it,
    # while ok gets its win.
    kept = transcripts(tmp_path / "t")
    assert len(kept) == 2
    for text in kept.values():
        assert "(engine failure: " in text and "dies > go ponder" in text
        assert "gameover" not in " ".join(sent(text, "dies"))
        assert sent(text, "ok")[-1] == "gameover win"


@pytest.mark.timeout(600)
def test_fairy_stockfish_ponders_and_gpsusi_does_not(tmp_path):
    """Fairy-Stockfish declares ``Ponder`` (not USI_Ponder): it is set to true and
    ponders; gpsusi declares neither and plays without."""
    out = run_cli("match", "-o", tmp_path / "r.sqlite", "--quiet", "--json", "--openings",
                  openings(tmp_path), "--engine", f"fsf={FAIRY}", "--engine", f"gps={GPSUSI}",
                  "--option", "gps:BookDepth=0", "--tc", "fsf:time=3000,inc=100",
                  "--tc", "gps:byoyomi=200", "--ponder", "--margin", "20000",
                  "--max-ply", "14", "--transcripts", tmp_path / "t")
    assert json.loads(out.stdout)["played"] == 2
    assert "player gps plays without pondering" in out.stderr
    assert all(g["reason"] not in ("time forfeit", "engine failure", "illegal move")
               for g in results_games(tmp_path / "r.sqlite"))
    for text in transcripts(tmp_path / "t").values():
        fsf, gps = sent(text, "fsf"), sent(text, "gps")
        assert any(line.startswith("go ponder") for line in fsf)
        assert any(line in ("ponderhit", "stop") for line in fsf)
        assert not any("ponder" in line for line in gps)
        assert fsf[-1].startswith("gameover") and gps[-1].startswith("gameover")


# --------------------------------------------------------------------------
# gameover


def test_every_engine_gets_gameover_but_a_crashed_one(tmp_path):
    """win/lose/draw from each engine's side, before the next usinewgame; the engine
    that crashed is not written to (its restarted self gets the next games')."""
    logs = {name: tmp_path / f"{name}.log" for name in ("ok", "quits", "crash")}
    script = tmp_path / "resign.txt"
    script.write_text("7g7f 3c3d resign resign resign resign")
    summary = match(tmp_path, "--engine", f"ok={fake('--log', logs['ok'])}",
                    "--engine", f"quits={fake('--script', script, '--log', logs['quits'])}",
                    "--engine", f"crash={fake('--crash-on-go', 2, '--log', logs['crash'])}",
                    "--format", "gauntlet", "--byoyomi", "100", "--margin", "5000",
                    "--max-ply", "12", "--transcripts", tmp_path / "t")
    assert summary["played"] == 4
    rows = results_games(tmp_path / "r.sqlite")
    seen = {name: received(log, "usinewgame", "gameover", "go", "usi")
            for name, log in logs.items()}
    # quits resigns at its first move: it lost, ok won; both games.
    assert [line for line in seen["quits"] if line.startswith("gameover")] == \
        ["gameover lose"] * 2
    results_ok = []
    for row in rows:
        colour = "black" if row["black"] == "ok" else "white"
        results_ok.append("draw" if row["result"] == "draw" else
                          "win" if row["result"] == colour else "lose")
    assert [line for line in seen["ok"] if line.startswith("gameover")] == \
        [f"gameover {r}" for r in results_ok]
    assert results_ok.count("win") >= 2   # the resignations and the crashes
    # ok: every game's usinewgame comes after the previous game's gameover.
    marks = [line.split()[0] for line in seen["ok"] if line.split()[0] in
             ("usinewgame", "gameover")]
    assert marks == ["usinewgame", "gameover"] * 4
    # crash died at its second go, in each game: nothing written after that go until
    # its restart (usi); no gameover at all.
    crash = seen["crash"]
    gos = [i for i, line in enumerate(crash) if line.startswith("go")]
    assert crash[gos[1] + 1] == "usi"
    # What bookgen sent (a dead engine logs nothing): no gameover to the crashed engine.
    texts = [text for name, text in transcripts(tmp_path / "t").items() if "crash" in name]
    assert len(texts) == 2
    for text in texts:
        assert "(engine failure: " in text
        assert not [line for line in sent(text, "crash") if line.startswith("gameover")]
        assert sent(text, "ok")[-1] == "gameover win"


# --------------------------------------------------------------------------
# transcripts


def test_the_client_writes_every_line_to_its_transcript(tmp_path):
    transcript = Transcript()
    engine = UsiEngine(fake().removeprefix("usi:"))
    try:
        engine.transcript = transcript.sink("e")
        engine.isready()
        engine.position("startpos")
        search = engine.go(byoyomi=100)
        engine.transcript = None
        engine.isready()
    finally:
        engine.close()
    entries = [(name, direction, line) for _ms, name, direction, line in transcript.entries]
    assert entries[:2] == [("e", ">", "isready"), ("e", "<", "readyok")]
    assert ("e", ">", "go byoyomi 100") in entries
    assert entries[-1] == ("e", "<", f"bestmove {search.bestmove}")
    assert [ms for ms, *_ in transcript.entries] == sorted(ms for ms, *_ in transcript.entries)
    transcript.save(tmp_path / "t.usi.gz")
    text = gzip.decompress((tmp_path / "t.usi.gz").read_bytes()).decode()
    assert text.splitlines()[0].startswith("# started ")
    assert re.search(r"^ +\d+ e > go byoyomi 100$", text, re.M)


def test_csa_records_name_each_sides_control_only_when_given(tmp_path):
    """write_csa_record: without side controls the header is as before; with them,
    one comment line per side (also when there is no game comment), read back."""
    start = cshogi.Board().sfen()
    outcome = Outcome(Result.DRAW, Reason.MAX_PLY, 2)
    common = dict(start_sfen=start, names=("s", "g"), moves=["7g7f", "3c3d"],
                  scores=[None, 12], outcome=outcome)
    write_csa_record(tmp_path / "same.csa", comment="game", **common)
    assert (tmp_path / "same.csa").read_text().splitlines()[:5] == [
        "V2.2", "N+s", "N-g", "'game", "PI"]
    write_csa_record(tmp_path / "odds.csa", side_controls=("10 s", "500 nodes"), **common)
    assert (tmp_path / "odds.csa").read_text().splitlines()[:6] == [
        "V2.2", "N+s", "N-g", "'time control + s: 10 s", "'time control - g: 500 nodes", "PI"]
    parsed = cshogi.CSA.Parser.parse_file(str(tmp_path / "odds.csa"))[0]
    assert [cshogi.move_to_usi(m) for m in parsed.moves] == ["7g7f", "3c3d"]


def test_the_transcript_has_the_engines_stderr_lines_escaped(tmp_path):
    """stderr lines are in the transcript, marked ``!``, undecodable bytes and
    control characters escaped (close() waits for the stderr reader to finish)."""
    transcript = Transcript()
    engine = UsiEngine(fake("--garbage-stderr", "--stderr-bytes", 200).removeprefix("usi:"))
    try:
        engine.transcript = transcript.sink("e")
        engine.position("startpos")
        engine.go(byoyomi=100)
    finally:
        engine.close()
    errors = [line for _ms, name, direction, line in transcript.entries if direction == "!"]
    assert errors == ["x" * 99, "x" * 99, "end of search 1",
                      "\\xff\\xfe garbage \\x1b[31m\\x00 on stderr \\x80"]
    assert engine.stderr_bytes > 200   # the tail for error messages is kept as before
    transcript.save(tmp_path / "t.usi.gz")
    text = gzip.decompress((tmp_path / "t.usi.gz").read_bytes()).decode()
    assert re.search(r"^ +\d+ e ! end of search 1$", text, re.M)
    assert "e ! \\xff\\xfe garbage \\x1b[31m" in text


def trickle(data: bytes, size: int) -> io.BufferedReader:
    """A stream of ``data`` whose reads return at most ``size`` bytes, as a pipe may."""
    source = io.BytesIO(data)

    class Raw(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, target) -> int:
            chunk = source.read(min(size, len(target)))
            target[:len(chunk)] = chunk
            return len(chunk)

    return io.BufferedReader(Raw(), buffer_size=size)


def test_stderr_lines_go_to_the_transcript_only_while_one_is_on():
    """The stderr reader: lines split across reads are joined, a line over the limit
    comes in pieces, the last words without a newline count, nothing goes to a tap
    without a sink, and the ring buffer (the error messages' tail) gets everything."""
    data = b"first li" + b"ne\r\nsecond\n" + b"y" * (client._STDERR_LINE_LIMIT + 5) + b"\nlast"
    seen: list[tuple[str, str]] = []
    tap = client._Tap()
    tap.sink = lambda direction, line: seen.append((direction, line))
    buffer = client._RingBuffer(1 << 20)
    client._drain_stderr(trickle(data, 7), buffer, tap)
    assert seen == [("!", "first line"), ("!", "second"),
                    ("!", "y" * client._STDERR_LINE_LIMIT), ("!", "yyyyy"), ("!", "last")]
    assert buffer.total == len(data)
    for size in (1, 3, 8192, 8193, 1 << 16):   # however the reads cut it
        seen.clear()
        client._drain_stderr(trickle(data, size), client._RingBuffer(100), tap)
        assert [line for _direction, line in seen][2:4] == ["y" * client._STDERR_LINE_LIMIT,
                                                           "yyyyy"]

    class Off(client._Tap):
        def write(self, direction: str, line: str) -> None:
            seen.append((direction, line))

    seen.clear()
    client._drain_stderr(trickle(data, 5), client._RingBuffer(100), Off())
    assert seen == []


def test_a_failed_games_transcript_ends_with_the_engines_last_stderr_words(tmp_path):
    """The engine crashes at its second go after writing garbage and a last line to
    stderr: the failed game's transcript has both, escaped, and the match goes on."""
    crash = fake("--garbage-stderr", "--crash-on-go", 2)
    summary = match(tmp_path, "--engine", f"crash={crash}", "--engine", f"ok={fake()}",
                    "--byoyomi", "100", "--max-ply", "12", "--transcripts", tmp_path / "t",
                    "--transcripts-on", "failure")
    assert summary["reasons"] == {"engine failure": 2}
    kept = transcripts(tmp_path / "t")
    assert len(kept) == 2
    for text in kept.values():
        errors = [line.split(None, 3)[3] for line in text.splitlines()
                  if line.split(None, 3)[1:3] == ["crash", "!"]]
        assert errors[-2:] == ["\\xff\\xfe garbage \\x1b[31m\\x00 on stderr \\x80",
                               "fake engine: simulated crash"]
        assert not [line for line in text.splitlines() if line.split(None, 3)[1:3] == ["ok", "!"]]


def test_transcripts_of_all_games_or_only_failed_ones(tmp_path):
    """One compressed file per game, named after the match, pair, colours and players,
    with both engines' lines; ``--transcripts-on failure`` keeps only the failed games'
    (here the crashed engine's), whose file says how the game ended."""
    ok, crash = f"ok={fake()}", f"crash={fake('--crash-on-go', 2)}"
    other = f"other={fake()}"
    summary = match(tmp_path, "--engine", ok, "--engine", other, "--byoyomi", "100",
                    "--margin", "5000", "--max-ply", "8", "--transcripts", tmp_path / "all")
    assert summary["played"] == 2
    texts = transcripts(tmp_path / "all")
    assert len(texts) == 2
    assert all(re.fullmatch(r"[0-9a-f]{8}-000000-[01]-(ok-vs-other|other-vs-ok)\.usi\.gz",
                            name) for name in texts), texts
    for text in texts.values():
        assert sent(text, "ok") and sent(text, "other")
        assert "# result: draw (max ply)" in text
        assert re.search(r"^ +\d+ ok < bestmove ", text, re.M)
    out = run_cli("match", "-o", tmp_path / "f.sqlite", "--quiet", "--json", "--openings",
                  openings(tmp_path), "--engine", ok, "--engine", other, "--engine", crash,
                  "--format", "round-robin", "--byoyomi", "100", "--margin", "5000",
                  "--max-ply", "8", "--transcripts", tmp_path / "failed",
                  "--transcripts-on", "failure")
    assert json.loads(out.stdout)["played"] == 6
    kept = transcripts(tmp_path / "failed")
    assert len(kept) == 4 and all("crash" in name for name in kept)
    for text in kept.values():
        assert "# result: " in text and "(engine failure: engine crashed" in text
        assert "fake engine: simulated crash" in text


def test_transcript_directory_that_cannot_be_made_stops_before_any_game(tmp_path):
    (tmp_path / "file").write_text("x")
    out = match(tmp_path, "--engine", f"a={fake()}", "--engine", f"b={fake()}",
                "--transcripts", tmp_path / "file" / "t", expect=2)
    assert "cannot create" in out.stderr
    assert not (tmp_path / "r.sqlite").exists()
