"""The USI client (bookgen.engines.usi) and the USI evaluator against real and fake engines.

Real engines: /usr/games/fairy-stockfish and /usr/games/gpsusi (installed by
``make test``). Fake engines under tests/fake_engines/ inject faults: a
crash on the 2nd ``go``, a hang, garbage with an illegal move, a stderr flood.
Expected moves and legality come from cshogi, never from the code under test.
"""

from __future__ import annotations

import math
import shlex
import time
from pathlib import Path

import cshogi
import pytest

from bookgen.engines.factory import make_evaluator
from bookgen.engines.protocols import EvaluatorError, PositionFailed
from bookgen.engines.usi.analyser import UsiEvaluator, book_answer, parse_options
from bookgen.engines.usi.client import (
    EngineCrashed,
    EngineStartError,
    EngineTimeout,
    UsiEngine,
    UsiOptionError,
)
from bookgen.engines.usi.protocol import UsiSearch, parse_bestmove, parse_info, parse_option
from bookgen.errors import BookgenError
from conftest import PYTHON, legal_usis

FAIRY = "/usr/games/fairy-stockfish"
GPS = "/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"

MATE_IN_1 = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"  # G*5b mates
MATED = "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1"     # white is checkmated
MIDGAME_MOVES = "7g7f 3c3d 2g2f 4c4d 2f2e 2b3c 3i4h 8b4b 5i6h 3a3b 6h7h 5a6b".split()


def fake(script: str, *args: str) -> str:
    return " ".join(shlex.quote(str(part)) for part in (PYTHON, FAKES / script, *args))


def board_after(moves: list[str], sfen: str | None = None) -> cshogi.Board:
    board = cshogi.Board(sfen) if sfen else cshogi.Board()
    for usi in moves:
        move = board.move_from_usi(usi)
        assert move and board.is_legal(move), usi
        board.push(move)
    return board


def check_evaluation(board: cshogi.Board, evaluation, expect_moves: int | None = None) -> None:
    legal = set(legal_usis(board))
    assert evaluation.moves and set(evaluation.moves) <= legal
    assert len(set(evaluation.moves)) == len(evaluation.moves)
    if expect_moves is not None:
        assert len(evaluation.moves) == expect_moves
    assert len(evaluation.priors) == len(evaluation.moves)
    assert math.isclose(sum(evaluation.priors), 1.0, rel_tol=1e-9)
    assert all(p >= 0 for p in evaluation.priors)
    assert 0.0 <= evaluation.value <= 1.0
    assert evaluation.move_values is not None
    assert len(evaluation.move_values) == len(evaluation.moves)
    assert all(0.0 <= v <= 1.0 for v in evaluation.move_values)
    assert evaluation.value == evaluation.move_values[0]
    assert evaluation.pv[:1] == evaluation.moves[:1]
    assert evaluation.depth > 0 and evaluation.nodes > 0


# --------------------------------------------------------------------------
# parsers on handwritten lines


def test_parse_info_cp_line():
    info = parse_info("info depth 10 seldepth 15 multipv 2 score cp 123 nodes 5000 nps 100000 "
                      "hashfull 3 tbhits 0 time 50 pv 7g7f 3c3d 2g2f")
    assert (info.depth, info.seldepth, info.multipv) == (10, 15, 2)
    assert (info.cp, info.mate, info.bound, info.mate_estimated) == (123, None, None, False)
    assert (info.nodes, info.nps, info.time, info.hashfull) == (5000, 100000, 50, 3)
    assert info.pv == ["7g7f", "3c3d", "2g2f"]
    assert info.score == 123 and info.has_score and not info.is_mate


def test_parse_info_mate_scores():
    win = parse_info("info depth 5 score mate 3 pv G*5b 5a4a 5b4b")
    assert (win.mate, win.cp, win.mate_win) == (3, None, True)
    loss = parse_info("info depth 5 multipv 1 score mate -3 nodes 10 pv 5a4a")
    assert (loss.mate, loss.mate_win) == (-3, False)
    mated = parse_info("info depth 0 score mate 0")
    assert mated.mate == 0 and mated.mate_win is False
    assert win.score > 29000 and loss.score < -29000 and mated.score < loss.score
    # a quicker mate ranks higher, and any mate above any ordinary score
    assert parse_info("info score mate 1").score > win.score
    assert parse_info("info score cp 99999").score < win.score
    # mate of unknown length (YaneuraOu style): estimated from the PV
    plus = parse_info("info depth 9 score mate + pv 1a1b 2a2b 3a3b")
    assert (plus.mate, plus.mate_estimated) == (3, True)
    minus = parse_info("info depth 9 score mate - pv 1a1b 2a2b")
    assert (minus.mate, minus.mate_win) == (-2, False)


def test_parse_info_bounds():
    lower = parse_info("info depth 12 seldepth 20 multipv 1 score cp 50 lowerbound nodes 9 "
                       "pv 7g7f")
    assert (lower.cp, lower.bound, lower.nodes, lower.pv) == (50, "lower", 9, ["7g7f"])
    upper = parse_info("info depth 12 score cp -20 upperbound nodes 9 pv 3c3d")
    assert (upper.cp, upper.bound) == (-20, "upper")
    mate_bound = parse_info("info depth 12 score mate 5 lowerbound pv 7g7f")
    assert (mate_bound.mate, mate_bound.bound) == (5, "lower")
    assert parse_info("info depth 3 score cp 1 pv 7g7f").bound is None


def test_parse_info_pv_with_pass():
    info = parse_info("info depth 10 seldepth 18 time 137 score cp -5419 nodes 63193 nps 459701 "
                      "pv 9i8h 1a2b 4h5h pass pass")
    assert info.cp == -5419
    assert info.pv == ["9i8h", "1a2b", "4h5h", "pass", "pass"]


def test_parse_info_gpsusi_huge_cp_is_mate():
    win = parse_info("info depth 2 seldepth 1 time 1 score cp 1148897 nodes 4 nps 2963 pv G*5b")
    assert (win.cp, win.mate, win.mate_estimated, win.mate_win) == (None, 1, True, True)
    loss = parse_info("info depth 7 seldepth 8 time 847 score cp -870257 nodes 406324 "
                      "nps 479307 pv 5i6i 8h4h+ pass 9a9g+")
    assert (loss.mate, loss.mate_win) == (-4, False)
    no_pv = parse_info("info depth 2 score cp -100000")
    assert no_pv.mate == 0 and no_pv.mate_win is False
    assert parse_info("info score cp 99999").cp == 99999
    assert parse_info("info score cp 1148897", mate_cp_threshold=None).cp == 1148897


def test_parse_info_garbage_is_tolerated():
    info = parse_info("info depth x seldepth ? score cp abc nodes 12 junk multipv 0 pv")
    assert (info.depth, info.seldepth, info.cp, info.nodes, info.multipv) == (
        None, None, None, 12, 1)
    assert info.pv == [] and not info.has_score
    assert parse_info("info score mate").mate is None
    assert parse_info("info score").cp is None
    assert parse_info("info").depth is None
    assert parse_info("info depth 3 score centipawns 12 depth 4").depth == 4
    assert parse_info("info string hello world pv 7g7f").string == "hello world pv 7g7f"
    assert parse_info("info currmove 7g7f currmovenumber 1").currmove == "7g7f"
    assert parse_info("bestmove 7g7f") is None
    assert parse_info("informed") is None
    assert parse_info("") is None
    assert parse_info("\ufffd\ufffd binary") is None


def test_parse_bestmove_and_option_lines():
    assert parse_bestmove("bestmove 7g7f ponder 3c3d") == ("7g7f", "3c3d")
    assert parse_bestmove("bestmove 7g7f") == ("7g7f", None)
    assert parse_bestmove("bestmove resign") == ("resign", None)
    assert parse_bestmove("bestmove win") == ("win", None)
    assert parse_bestmove("bestmove") == (None, None)
    assert parse_bestmove("bestmovement 1a1a") is None
    spin = parse_option("option name Move Overhead type spin default 30 min 0 max 5000")
    assert (spin.name, spin.type, spin.default, spin.min, spin.max) == (
        "Move Overhead", "spin", "30", 0, 5000)
    combo = parse_option("option name Analysis Contempt type combo default Both var Both "
                         "var Off var White var Black")
    assert combo.vars == ["Both", "Off", "White", "Black"]
    assert parse_option("option name CSAFile type string default <empty>").default == ""
    assert parse_option("option name Clear Hash type button").type == "button"
    assert parse_option("option name") is None
    assert parse_option("option type spin") is None


def test_parse_options_pairs():
    assert parse_options(["Threads=1", "Move Overhead = 50", "Debug Log File=", "A=b=c"]) == {
        "Threads": "1", "Move Overhead": "50", "Debug Log File": "", "A": "b=c"}
    assert parse_options(["Hash=16", "Hash=32"]) == {"Hash": "32"}
    for bad in (["Threads"], ["=1"], ["  =x"]):
        with pytest.raises(BookgenError, match="NAME=VALUE"):
            parse_options(bad)


# --------------------------------------------------------------------------
# fairy-stockfish


@pytest.fixture(scope="module")
def fairy():
    with UsiEngine(FAIRY) as engine:
        yield engine


def test_fairy_handshake_and_options(fairy):
    assert fairy.name.startswith("Fairy-Stockfish")
    assert fairy.author == "Fabian Fichter"
    multipv = fairy.options["MultiPV"]
    assert (multipv.type, multipv.min, multipv.default) == ("spin", 1, "1")
    assert fairy.options["UCI_Variant"].default == "shogi"
    # the banner line before "id name" is kept, not parsed
    assert any(line.startswith("Fairy-Stockfish") for line in fairy.handshake_lines)
    with pytest.raises(UsiOptionError, match="no option 'NoSuchOption'"):
        fairy.setoption("NoSuchOption", 3)
    with pytest.raises(UsiOptionError, match="outside"):
        fairy.setoption("MultiPV", 0)
    with pytest.raises(UsiOptionError, match="not an integer"):
        fairy.setoption("Hash", "lots")
    fairy.setoption("hash", 16)  # case-insensitive, applied with the declared name
    assert fairy.applied_options["Hash"] == "16"
    fairy.isready()


def test_fairy_multipv_nodes_search(fairy):
    board = board_after(MIDGAME_MOVES)
    fairy.setoption("MultiPV", 3)
    fairy.new_game()
    fairy.position(board.sfen())
    result = fairy.go(nodes=30000, timeout=30)
    fairy.setoption("MultiPV", 1)
    legal = set(legal_usis(board))
    lines = result.ranked()
    assert [info.multipv for info in lines] == [1, 2, 3]
    firsts = [info.pv[0] for info in lines]
    assert len(set(firsts)) == 3 and set(firsts) <= legal
    assert all(info.cp is not None and info.depth for info in lines)
    assert result.bestmove in legal and result.bestmove == result.best.pv[0]
    assert result.ponder == result.best.pv[1]
    assert 30000 <= result.nodes < 40000
    assert result.lines[-1].startswith("bestmove")


def test_fairy_time_and_depth_limits_and_infinite(fairy):
    fairy.position("startpos", ["7g7f"])
    legal = set(legal_usis(board_after(["7g7f"])))
    for limits in ({"depth": 4}, {"movetime": 100}, {"byoyomi": 100},
                   {"btime": 1000, "wtime": 1000, "binc": 100, "winc": 100}):
        result = fairy.go(**limits)
        assert result.bestmove in legal, limits
    fairy.go_infinite()
    result = fairy.stop()  # at once: the search may not have printed any info yet
    assert result.bestmove in legal and result.lines[-1].startswith("bestmove")
    assert fairy.go(depth=2).bestmove in legal  # still usable
    with pytest.raises(ValueError):
        fairy.go(nodes=-1)


def test_infinite_search_collects_its_lines_until_stop():
    """An infinite search's output, up to the bestmove that answers ``stop``, is the
    result (the engine prints it only once told to stop)."""
    with UsiEngine(fake("fake_engine.py", "--multipv", "--until-stop-on-go", "1")) as engine:
        engine.setoption("MultiPV", 2)
        engine.position("startpos")
        engine.go_infinite()
        result = engine.stop()
    assert [info.multipv for info in result.ranked()] == [1, 2]
    assert result.best.depth == 3 and result.bestmove == result.best.pv[0]
    assert result.lines[-1] == f"bestmove {result.bestmove}"


def test_fairy_mate_in_one(fairy):
    fairy.position(MATE_IN_1)
    result = fairy.go(nodes=5000)
    assert result.bestmove == "G*5b"
    assert (result.best.mate, result.best.mate_estimated) == (1, False)
    fairy.position(MATED)
    result = fairy.go(nodes=100)
    assert result.resign and result.bestmove is None


# --------------------------------------------------------------------------
# gpsusi


@pytest.fixture(scope="module")
def gps():
    with UsiEngine(GPS, {"BookDepth": 0}) as engine:
        yield engine


def test_gps_handshake_and_options(gps):
    assert gps.name.startswith("gpsshogi")
    assert gps.author == "teamgps"
    assert gps.options["BookDepth"].type == "spin"
    assert "MultiPV" not in gps.options  # only MultiPVWidth
    assert gps.applied_options == {"BookDepth": "0"}
    with pytest.raises(UsiOptionError, match="no option 'MultiPV'"):
        gps.setoption("MultiPV", 2)


def test_gps_twelve_byoyomi_searches_do_not_hang(gps):
    """cshogi.usi.Engine hangs at the 8th search: gpsusi's stderr pipe fills up."""
    board = cshogi.Board()
    gps.new_game()
    for _ in range(12):
        gps.position(board.sfen())
        result = gps.go(byoyomi=1000, timeout=15)
        assert result.bestmove in legal_usis(board), result.lines
        assert result.best is not None and result.best.has_score
        board.push_usi(result.bestmove)
    assert gps.alive


def test_gps_huge_cp_mate(gps):
    gps.position(MATE_IN_1)
    result = gps.go(byoyomi=1000, timeout=15)
    assert result.bestmove == "G*5b"
    assert result.best.mate_estimated and result.best.mate == 1
    reported_cp = int(result.best.raw.split("score cp ")[1].split()[0])
    assert reported_cp >= 100000


def test_gps_exits_on_go_nodes():
    with UsiEngine(GPS, {"BookDepth": 0}) as engine:
        engine.position("startpos")
        with pytest.raises(EngineCrashed) as caught:
            engine.go(nodes=1000, timeout=20)
        assert caught.value.returncode is not None and caught.value.returncode != 0
        assert not engine.alive


# --------------------------------------------------------------------------
# the evaluator on real engines


@pytest.fixture(scope="module")
def fairy_evaluator():
    with UsiEvaluator(FAIRY, {"Threads": "1"}, nodes=20000, multipv=4, multipv_margin=100,
                      max_multipv=16, timeout=30) as evaluator:
        yield evaluator


def test_evaluator_fairy_startpos_and_midgame(fairy_evaluator):
    boards = [cshogi.Board(), board_after(MIDGAME_MOVES)]
    sfens = [b.sfen() for b in boards]
    evaluations = fairy_evaluator.evaluate(boards)
    assert [b.sfen() for b in boards] == sfens  # boards untouched
    assert len(evaluations) == 2
    for board, evaluation in zip(boards, evaluations):
        check_evaluation(board, evaluation)
        assert len(evaluation.moves) % 4 == 0 or len(evaluation.moves) == 16
        assert evaluation.mate is None
    assert fairy_evaluator.spec == "usi:" + FAIRY


def test_evaluator_widens_while_lines_are_close():
    board = board_after(MIDGAME_MOVES)
    with UsiEvaluator(FAIRY, nodes=5000, multipv=4, multipv_margin=100000,
                      max_multipv=8) as wide:
        [evaluation] = wide.evaluate([board])
        check_evaluation(board, evaluation, expect_moves=8)
        assert wide.searches == 2  # MultiPV 4, then 8
        # priors follow the scores: a softmax over cp / temperature
        best = max(range(8), key=lambda i: evaluation.move_values[i])
        assert evaluation.priors[best] == max(evaluation.priors)
    with UsiEvaluator(FAIRY, nodes=5000, multipv=4, multipv_margin=-1) as narrow:
        [evaluation] = narrow.evaluate([board])
        check_evaluation(board, evaluation, expect_moves=4)
        assert narrow.searches == 1


def test_evaluator_fairy_mates_and_checkmated(fairy_evaluator):
    searches = fairy_evaluator.searches
    [mated] = fairy_evaluator.evaluate([cshogi.Board(MATED)])
    assert (mated.moves, mated.priors, mated.value, mated.mate) == ([], [], 0.0, 0)
    assert fairy_evaluator.searches == searches  # no engine call
    board = cshogi.Board(MATE_IN_1)
    [mating] = fairy_evaluator.evaluate([board])
    check_evaluation(board, mating)
    assert mating.moves[0] == "G*5b" and mating.value == 1.0 and mating.mate == 1
    assert mating.priors[0] > 0.99


def test_evaluator_gps_single_move():
    board = board_after(MIDGAME_MOVES)
    with make_evaluator("usi:" + GPS, options={"BookDepth": "0"}, byoyomi=1000,
                        timeout=15) as evaluator:
        assert evaluator.multipv_option is None
        [evaluation] = evaluator.evaluate([board])
        check_evaluation(board, evaluation, expect_moves=1)
        assert evaluation.priors == [1.0]
        assert all(m != "pass" for m in evaluation.pv)
        [mate] = evaluator.evaluate([cshogi.Board(MATE_IN_1)])
        assert (mate.moves, mate.value) == (["G*5b"], 1.0) and mate.mate >= 1


def test_evaluator_configuration_errors():
    with pytest.raises(EvaluatorError, match="NoSuchOption"):
        UsiEvaluator(FAIRY, {"NoSuchOption": "1"}, nodes=100)
    with pytest.raises(EvaluatorError, match="cannot start"):
        UsiEvaluator("/nonexistent/engine --flag", nodes=100)
    with pytest.raises(EvaluatorError, match="positive"):
        UsiEvaluator(FAIRY, nodes=0)
    evaluator = UsiEvaluator(FAIRY, nodes=100)
    evaluator.close()
    assert evaluator.engine.returncode is not None
    with pytest.raises(EvaluatorError, match="closed"):
        evaluator.evaluate([cshogi.Board()])


def test_evaluator_refuses_nodes_for_gps():
    with pytest.raises(EvaluatorError, match="go nodes.*use byoyomi"):
        UsiEvaluator(GPS, {"BookDepth": "0"}, nodes=1000)


# --------------------------------------------------------------------------
# fault injection with fake engines


def test_crash_is_reported_with_exit_code_and_stderr_then_restart():
    with UsiEngine(fake("crash_engine.py"), {"Threads": 2}) as engine:
        assert engine.name == "FakeEngine 1.0"
        engine.position("startpos")
        assert engine.go(nodes=1, timeout=10).bestmove in legal_usis(cshogi.Board())
        with pytest.raises(EngineCrashed, match="exit code 3") as caught:
            engine.go(nodes=1, timeout=10)
        assert caught.value.returncode == 3
        assert "simulated crash" in str(caught.value)
        assert not engine.alive
        with pytest.raises(EngineCrashed):
            engine.isready()
        engine.restart()
        assert engine.restarts == 1 and engine.alive
        assert engine.applied_options == {"Threads": "2"}
        engine.position("startpos")
        assert engine.go(nodes=1, timeout=10).bestmove is not None


def test_hanging_engine_times_out_and_is_killed():
    engine = UsiEngine(fake("hang_engine.py"), stop_grace=0.5, quit_grace=0.5)
    try:
        engine.position("startpos")
        with pytest.raises(EngineTimeout, match="no bestmove within 1.0 s"):
            engine.go(nodes=1, timeout=1.0)
        assert not engine.alive
        with pytest.raises(EngineCrashed, match="killed after"):
            engine.go(nodes=1, timeout=1.0)
    finally:
        engine.close()
    assert engine.returncode is not None


def test_messages_say_what_happened_in_user_terms():
    """Not a Python API hint ("restart() to continue") but what happened."""
    engine = UsiEngine(fake("hang_engine.py"), stop_grace=0.5, quit_grace=0.5)
    try:
        engine.position("startpos")
        with pytest.raises(EngineTimeout) as timeout:
            engine.go(nodes=1, timeout=0.5)
        with pytest.raises(EngineCrashed) as crashed:
            engine.go(nodes=1, timeout=0.5)
    finally:
        engine.close()
    for message in (str(timeout.value), str(crashed.value)):
        assert "restart()" not in message and "call " not in message, message
    assert str(timeout.value).endswith("nor 0.5 s after stop; killed it")
    assert str(crashed.value) == ("engine 'FakeEngine 1.0' is not running (killed after no "
                                  "bestmove in 0.5 s)")


def _assert_escaped(message: str, *expected: str) -> None:
    """One printable line quoting the engine's bytes as escapes, never as mojibake."""
    assert "\ufffd" not in message and not any(ord(c) < 32 or 127 <= ord(c) < 160
                                               for c in message), repr(message)
    for text in expected:
        assert text in message, (text, message)


def test_garbage_engine_output_is_quoted_escaped():
    engine = UsiEngine(fake("fake_engine.py", "--garbage-stderr", "--crash-on-go", "1"))
    try:
        engine.position("startpos")
        with pytest.raises(EngineCrashed) as crashed:
            engine.go(nodes=1, timeout=10)
    finally:
        engine.close()
    _assert_escaped(str(crashed.value), "exit code 3",
                    r"stderr tail: \xff\xfe garbage \x1b[31m\x00 on stderr \x80 | "
                    "fake engine: simulated crash")
    with UsiEvaluator(fake("fake_engine.py", "--no-bestmove"), nodes=1, restarts=0,
                      timeout=10) as evaluator:
        with pytest.raises(EvaluatorError) as failed:
            evaluator.evaluate([cshogi.Board()])
    _assert_escaped(str(failed.value), r"(last lines: info string \xff\xfe\x00 binary "
                                       r"\x1b[2J garbage | bestmove)")


def test_default_search_timeouts_scale_with_the_limits(monkeypatch):
    from bookgen.engines.usi.client import default_search_timeout

    assert default_search_timeout(nodes=100_000) == 20.0
    assert default_search_timeout(nodes=1_000_000) == 110.0
    assert default_search_timeout(time_ms=1000) == 11.5
    assert default_search_timeout(depth=20) == 10 + 2 ** 10 / 16
    assert default_search_timeout(nodes=100, depth=30) == 10.01  # the first limit reached
    assert default_search_timeout() is None
    waits = []
    original = UsiEngine.wait_bestmove

    def spy(self, timeout, *args, **kwargs):
        waits.append(timeout)
        return original(self, timeout, *args, **kwargs)

    monkeypatch.setattr(UsiEngine, "wait_bestmove", spy)
    with UsiEvaluator(fake("fake_engine.py"), nodes=200_000) as evaluator:
        evaluator.evaluate([cshogi.Board()])
    with UsiEvaluator(fake("fake_engine.py"), depth=16) as evaluator:
        evaluator.evaluate([cshogi.Board()])
    with UsiEvaluator(fake("fake_engine.py"), byoyomi=2000) as evaluator:
        evaluator.evaluate([cshogi.Board()])
    assert waits == [30.0, 26.0, 13.0]


def test_silent_engine_times_out_at_startup():
    with pytest.raises(EngineTimeout, match="usiok"):
        UsiEngine(fake("fake_engine.py", "--silent-start"), startup_timeout=1.0)


def test_missing_command_and_engine_dying_at_start():
    with pytest.raises(EngineStartError, match="cannot start"):
        UsiEngine("/nonexistent/engine")
    with pytest.raises(EngineCrashed, match="exit code 7"):
        UsiEngine(f"{shlex.quote(PYTHON)} -c 'import sys; sys.exit(7)'")


def test_garbage_lines_are_kept_not_parsed():
    with UsiEngine(fake("garbage_engine.py")) as engine:
        engine.position("startpos")
        result = engine.go(nodes=1, timeout=10)
        assert result.bestmove == "9a9a"  # the client does not judge legality
        assert "hello, this is not USI" in result.lines
        assert "bestmovement 1a1a" in result.lines
        assert any("binary garbage" in line for line in result.lines)
        assert result.best.cp == 10
        engine.isready()


def test_stderr_flood_does_not_block():
    with UsiEngine(fake("stderr_engine.py"), stderr_limit=10000) as engine:
        for _ in range(12):
            engine.position("startpos")
            assert engine.go(nodes=1, timeout=10).bestmove is not None
        # The drain thread may still be reading the last search's stderr: wait for it.
        deadline = time.monotonic() + 30
        while engine.stderr_bytes < 12 * 262000 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.stderr_bytes >= 12 * 262000
        tail = engine.stderr_tail(100000)
        assert len(tail) <= 10000 and tail.endswith("end of search 12\n")


def test_evaluator_recovers_from_one_time_crash(tmp_path):
    once = tmp_path / "crashed-once"
    command = fake("fake_engine.py", "--multipv", "--crash-on-go", "2", "--once-file", once)
    boards = [cshogi.Board(), board_after(MIDGAME_MOVES)]
    with UsiEvaluator(command, nodes=1, multipv=3, multipv_margin=-1, timeout=10) as evaluator:
        evaluations = evaluator.evaluate(boards)
        assert once.exists() and evaluator.engine_restarts == 1
    for board, evaluation in zip(boards, evaluations):
        check_evaluation(board, evaluation, expect_moves=3)
        assert evaluation.moves == legal_usis(board)[:3]


def test_evaluator_gives_up_after_repeated_failures():
    board = cshogi.Board()
    with UsiEvaluator(fake("fake_engine.py", "--crash-on-go", "1"), nodes=1, restarts=2,
                      timeout=10) as evaluator:
        with pytest.raises(EvaluatorError, match=r"failed 3 times.*exit code 3"):
            evaluator.evaluate([board])
        assert evaluator.engine_restarts == 2
    with UsiEvaluator(fake("garbage_engine.py"), nodes=1, restarts=1, timeout=10) as evaluator:
        with pytest.raises(EvaluatorError, match="illegal bestmove '9a9a'"):
            evaluator.evaluate([board])
        assert evaluator.engine_restarts == 1
    with UsiEvaluator(fake("hang_engine.py"), nodes=1, restarts=1, timeout=0.5) as evaluator:
        with pytest.raises(EvaluatorError, match="no bestmove"):
            evaluator.evaluate([board])


def test_evaluator_survives_garbage_with_legal_moves():
    board = board_after(MIDGAME_MOVES)
    with UsiEvaluator(fake("fake_engine.py", "--garbage"), nodes=1) as evaluator:
        [evaluation] = evaluator.evaluate([board])
        check_evaluation(board, evaluation, expect_moves=1)
        assert evaluator.engine_restarts == 0


def test_evaluator_refuses_moves_without_score():
    """An engine answering from its book gives no score: a configuration error, no retries."""
    for extra in ([], ["--multipv"]):
        with UsiEvaluator(fake("fake_engine.py", "--no-info", *extra), nodes=1) as evaluator:
            with pytest.raises(EvaluatorError, match="without any score"):
                evaluator.evaluate([cshogi.Board()])
            assert evaluator.engine_restarts == 0


# ------------------------------------------------------------ engines answering from a book


@pytest.mark.parametrize("style", ["depth0", "string"])
def test_book_answers_are_not_analyses_and_said_once(style, capsys):
    """A YaneuraOu-like engine answering from its book: no evaluation in either mode,
    no retries, one stderr line naming the engine and the options that turn it off;
    with USI_OwnBook false the same engine is analysed."""
    boards = [cshogi.Board(), board_after(MIDGAME_MOVES)]
    with UsiEvaluator(fake("fake_engine.py", "--book", style), nodes=1,
                      mode="best-line") as evaluator:
        for board in boards:
            with pytest.raises(PositionFailed, match="from its own book") as failed:
                evaluator.evaluate([board])
            assert failed.value.restarts == 0
        assert evaluator.engine_restarts == 0
    with UsiEvaluator(fake("fake_engine.py", "--book", style, "--multipv"), nodes=1) as evaluator:
        with pytest.raises(EvaluatorError, match="from its own book"):
            evaluator.evaluate([boards[1]])
    warnings = [line for line in capsys.readouterr().err.splitlines() if "own book" in line]
    assert len(warnings) == 2, warnings   # once per evaluator, not once per position
    assert "'FakeEngine 1.0'" in warnings[0]
    assert "--engine-option USI_OwnBook=false or --engine-option BookFile=no_book" in warnings[0]
    for off in ({"USI_OwnBook": "false"}, {"BookFile": "no_book"}):
        for mode in ("best-line", "multipv-lines"):
            with UsiEvaluator(fake("fake_engine.py", "--book", style), off, nodes=1,
                              mode=mode) as evaluator:
                [evaluation] = evaluator.evaluate([boards[1]])
                assert evaluation.moves and (evaluation.depth or 0) > 0
    assert "own book" not in capsys.readouterr().err


def test_book_answer_rule():
    """Only answers without a searched line are book answers; resign/win never are."""
    def search(*lines: str, bestmove: str | None = "7g7f") -> UsiSearch:
        return UsiSearch(bestmove, lines=list(lines), resign=bestmove is None)

    assert book_answer(search("info depth 0 score cp 10 nodes 0 pv 7g7f")) is not None
    assert book_answer(search("info score cp 10 nodes 0 pv 7g7f")) is not None
    assert book_answer(search("info string book hit", "info depth 0 score cp 3 pv 7g7f"))
    assert book_answer(search("info string BookFile: standard_book.db")) is not None
    assert book_answer(search("info depth 1 score cp 10 nodes 40 pv 7g7f")) is None
    assert book_answer(search("info depth 3 score cp 10 pv 7g7f")) is None   # nodes not sent
    assert book_answer(search("info string no book move", "info depth 0 score cp 1 nodes 0",
                              "info depth 1 score cp 5 nodes 90 pv 7g7f")) is None
    assert book_answer(search()) is None                                      # no info: no score
    assert book_answer(search("info depth 0 score mate -0", bestmove=None)) is None


@pytest.mark.parametrize("mode", ["best-line", "multipv-lines"])
def test_fairy_stockfish_is_not_taken_for_a_book(mode, capsys):
    boards = [cshogi.Board(), board_after(MIDGAME_MOVES), cshogi.Board(MATE_IN_1)]
    with UsiEvaluator(FAIRY, {"Threads": "1"}, depth=2, mode=mode) as evaluator:
        evaluations = evaluator.evaluate(boards)
    assert all(e.moves for e in evaluations)
    assert "own book" not in capsys.readouterr().err
