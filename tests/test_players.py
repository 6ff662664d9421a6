"""Players (bookgen.engines.players): one protocol, the built-in alpha-beta, MCTS and USI
engines, their settings per use, and what a USI engine's failure does under each policy."""

from __future__ import annotations

import pickle
import shlex
from dataclasses import replace
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.engines.builtin.analyser import BuiltinEvaluator
from bookgen.engines.builtin.player import BuiltinPlayer
from bookgen.engines.mcts_player import MctsPlayer
from bookgen.engines.player_settings import BuiltinPlay, MctsPlay, PlayerSettings, RandomOpening
from bookgen.engines.players import open_player
from bookgen.engines.protocols import EvaluatorError, MoveChoice, PlayerFailure
from bookgen.engines.restart import RestartPolicy, SearchLimits
from bookgen.engines.usi.player import UsiPlayer
from bookgen.errors import BookgenError
from bookgen.play.clock import ClockState, TimeControl
from bookgen.play.rules import GameState, Reason
from conftest import PYTHON

FAKES = Path(__file__).resolve().parent / "fake_engines"
DECLARATION_SFEN = "RRBBG4/GGSSK4/NN7/9/9/9/9/9/8k b 2P 1"
RNG = np.random.default_rng(0)
FORFEIT = RestartPolicy(on_failure="forfeit")


def fake(*args: object, engine: str = "fake_engine.py") -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / engine, *args))


def gos(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("go")]


# --------------------------------------------------------------------------
# settings and kinds


@pytest.mark.parametrize("text, kind", [
    ("builtin", BuiltinPlayer), ("mcts:builtin", MctsPlayer), (fake(), UsiPlayer)])
def test_a_spec_opens_its_kind_of_player(text, kind):
    settings = PlayerSettings.parse(
        text, mcts=MctsPlay(playouts=8, opening=RandomOpening(random_moves=0)))
    assert pickle.loads(pickle.dumps(settings)) == settings  # workers open their own
    player = open_player(settings)
    try:
        assert isinstance(player, kind)
        choice = player.choose(GameState("startpos"), None, RNG)
        assert isinstance(choice, MoveChoice) and choice.move is not None
        assert GameState("startpos").legal_move(choice.move) is not None
        assert choice.best == choice.move and isinstance(choice.score_cp, int)
    finally:
        player.close()


def test_bad_player_specs_are_clear_errors():
    with pytest.raises(BookgenError, match="unknown player 'nonsense'"):
        PlayerSettings.parse("nonsense")
    with pytest.raises(BookgenError, match="mcts: needs an evaluator"):
        PlayerSettings.parse("mcts:mcts:builtin")


# --------------------------------------------------------------------------
# the built-in alpha-beta player


@pytest.mark.parametrize("play", [BuiltinPlay(), BuiltinPlay(depth=64, nodes=300)])
def test_builtin_player_plays_the_evaluators_best_move(play):
    board = cshogi.Board("lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2")
    player = BuiltinPlayer(PlayerSettings.parse("builtin", builtin=play))
    evaluator = BuiltinEvaluator()
    try:
        choice = player.choose(GameState(board), None, RNG)
        move, score, _pv = evaluator.best_move(board, play.depth, play.nodes)
        assert (choice.move, choice.best, choice.score_cp) == (move, move, score)
        assert choice.elapsed_ms >= 0 and not (choice.resign or choice.declare)
    finally:
        player.close()
        evaluator.close()


def test_builtin_defaults_are_per_use_and_options_override_them():
    selfplay = BuiltinPlayer(PlayerSettings.parse("builtin"))
    assert (selfplay.depth, selfplay.nodes) == (4, 40_000)
    assert selfplay.name == "builtin alphabeta"
    from bookgen.analysis.match import match_player

    match = BuiltinPlayer(match_player("bi", "builtin"))
    assert (match.depth, match.nodes) == (64, 20_000) and match.name == "bi"
    assert match.engine_name == "bookgen builtin (depth 64, 20000 nodes)"
    tuned = BuiltinPlayer(match_player("bi", "builtin", (("nodes", "300"), ("depth", "2"))))
    assert (tuned.depth, tuned.nodes) == (2, 300)
    with pytest.raises(BookgenError, match="player bi: unknown built-in option 'speed'"):
        BuiltinPlayer(match_player("bi", "builtin", (("speed", "1"),)))
    with pytest.raises(BookgenError, match="player bi: option nodes must be a positive"):
        BuiltinPlayer(match_player("bi", "builtin", (("nodes", "0"),)))


@pytest.mark.parametrize("text", ["builtin", "mcts:builtin"])
def test_builtin_and_mcts_players_declare(text):
    player = open_player(PlayerSettings.parse(text, mcts=MctsPlay(playouts=4)))
    try:
        assert player.choose(GameState(f"sfen {DECLARATION_SFEN}"), None, RNG).declare
        assert not player.honours_clock
    finally:
        player.close()


def test_mcts_player_is_named_after_its_evaluator_and_plays_mate_in_one():
    player = open_player(PlayerSettings.parse("mcts:builtin", mcts=MctsPlay(playouts=8)))
    try:
        assert player.name == "builtin mcts 8"
        choice = player.choose(GameState("sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1"), None, RNG)
        assert choice.move == choice.best == "G*5b"
    finally:
        player.close()


# --------------------------------------------------------------------------
# USI engines: limits


def test_usi_limits_come_from_the_clock_or_the_settings(tmp_path):
    log = tmp_path / "log"
    fixed = UsiPlayer(PlayerSettings.parse(fake("--log", log),
                                           limits=SearchLimits(nodes=500)))
    try:
        assert fixed.honours_clock and fixed.name == "FakeEngine 1.0"
        fixed.choose(GameState("startpos"), None, RNG)
        fixed.choose(GameState("startpos"), ClockState.start(TimeControl(nodes=77)), RNG)
        fischer = ClockState(TimeControl(time=1000, inc=100), {0: -20, 1: 900})
        fixed.choose(GameState("startpos"), fischer, RNG)
        fixed.choose(GameState("startpos"),
                     ClockState.start(TimeControl(time=2000, byoyomi=300)), RNG)
    finally:
        fixed.close()
    assert gos(log) == ["go nodes 500", "go nodes 77",
                        "go btime 0 wtime 900 binc 100 winc 100",
                        "go btime 2000 wtime 2000 byoyomi 300"]
    (tmp_path / "default").write_text("")
    default = UsiPlayer(PlayerSettings.parse(fake("--log", tmp_path / "default")))
    try:
        default.choose(GameState("startpos"), None, RNG)
    finally:
        default.close()
    assert gos(tmp_path / "default") == ["go byoyomi 1000"]


def test_usi_answers_resign_and_win(tmp_path):
    script = tmp_path / "script"
    script.write_text("resign")
    player = open_player(PlayerSettings.parse(fake("--script", script, "--score", "-900")))
    try:
        choice = player.choose(GameState("startpos"), None, RNG)
        assert choice.resign and choice.score_cp == -900
        script.write_text("win")
        player.close()
        player = open_player(PlayerSettings.parse(fake("--script", script)))
        assert player.choose(GameState("startpos"), None, RNG).declare
    finally:
        player.close()


def test_usi_start_failures_name_the_engine_or_the_player():
    with pytest.raises(EvaluatorError, match="cannot start USI engine '/nonexistent/x'"):
        open_player(PlayerSettings.parse("usi:/nonexistent/x"))
    with pytest.raises(EvaluatorError, match="player a: cannot start '/nonexistent/x'"):
        open_player(PlayerSettings.parse("usi:/nonexistent/x", name="a",
                                         restarts=FORFEIT))
    with pytest.raises(EvaluatorError, match="USI engine .*NoSuchOption"):
        open_player(PlayerSettings.parse(fake(), options=(("NoSuchOption", "1"),)))
    with pytest.raises(EvaluatorError, match="player a: .*NoSuchOption"):
        open_player(PlayerSettings.parse(fake(), name="a", options=(("NoSuchOption", "1"),)))


# --------------------------------------------------------------------------
# USI engines: failures under each policy


def test_retry_restarts_a_crashed_engine_and_searches_again(tmp_path):
    once = tmp_path / "once"
    player = open_player(PlayerSettings.parse(fake("--crash-on-go", "1", "--once-file", once)))
    try:
        player.new_game()
        choice = player.choose(GameState("startpos"), None, RNG)
        assert once.exists() and choice.move is not None
    finally:
        player.close()


@pytest.mark.parametrize("args, error", [
    (("--crash-on-go", "1"), "exit code 3"),       # crashes at its first go, every start
    (("--hang-on-go", "1"), "no bestmove"),        # never answers
])
def test_retry_gives_up_after_its_restarts(args, error):
    player = open_player(PlayerSettings.parse(fake(*args), restarts=RestartPolicy(retries=1),
                                              engine_timeout_s=0.5))
    try:
        with pytest.raises(EvaluatorError, match=f"failed 2 times .*restarted up to 1 "
                                                 f"times.*{error}"):
            player.choose(GameState("startpos"), None, RNG)
    finally:
        player.close()


def test_forfeit_loses_the_game_and_restarts_before_the_next(tmp_path):
    log = tmp_path / "log"
    player = UsiPlayer(PlayerSettings.parse(fake("--crash-on-go", "2", "--log", log),
                                            name="c", restarts=FORFEIT))
    nodes = ClockState.start(TimeControl(nodes=10))
    try:
        player.new_game()
        player.choose(GameState("startpos"), nodes, RNG)
        with pytest.raises(PlayerFailure) as failure:
            player.choose(GameState("startpos moves 7g7f"), nodes, RNG)
        assert failure.value.reason is Reason.ENGINE_FAILURE
        assert failure.value.detail.startswith("engine crashed")
        assert player.broken and player.engine.restarts == 0   # no retry within the game
        player.new_game()                                      # the next game: restarted
        assert not player.broken and player.engine.restarts == 1
        assert player.choose(GameState("startpos"), nodes, RNG).move is not None
    finally:
        player.close()


@pytest.mark.parametrize("control, reason", [
    (TimeControl(byoyomi=100, margin=100), Reason.TIME_FORFEIT),
    (TimeControl(nodes=10, engine_timeout=0.3), Reason.ENGINE_FAILURE),
])
def test_forfeit_a_hung_engine(control, reason):
    player = UsiPlayer(PlayerSettings.parse(fake(engine="hang_engine.py"), name="h",
                                            restarts=FORFEIT))
    try:
        with pytest.raises(PlayerFailure) as failure:
            player.choose(GameState("startpos"), ClockState.start(control), RNG)
        assert failure.value.reason is reason
        assert failure.value.detail.startswith("no bestmove in time")
    finally:
        player.close()


def test_garbage_is_skipped_and_an_illegal_move_is_returned_for_the_rules_to_judge():
    player = UsiPlayer(PlayerSettings.parse(fake(engine="garbage_engine.py"), name="g",
                                            restarts=FORFEIT))
    try:
        choice = player.choose(GameState("startpos"), ClockState.start(TimeControl(nodes=1)),
                               RNG)
        assert choice.move == "9a9a" and GameState("startpos").legal_move("9a9a") is None
    finally:
        player.close()


def test_gpsshogi_is_refused_under_limits_it_aborts_on():
    gpsusi = "usi:/usr/games/gpsusi"
    with pytest.raises(EvaluatorError, match=r"^gpsshogi.*: gpsusi aborts on 'go nodes' and "
                                             r"'go movetime'; use byoyomi$"):
        open_player(PlayerSettings.parse(gpsusi, limits=SearchLimits(movetime_ms=100)))
    from bookgen.analysis.match import match_player

    with pytest.raises(EvaluatorError, match=r"^player g: gpsshogi aborts on 'go nodes'; use "
                                             r"--byoyomi or --time$"):
        open_player(replace(match_player("g", gpsusi), limits=SearchLimits(nodes=100)))
    player = open_player(match_player("g", gpsusi))   # under a clock: fine
    try:
        assert player.engine_name.startswith("gpsshogi")
    finally:
        player.close()


def test_close_players_closes_each_once_and_ignores_errors():
    from bookgen.engines.players import close_players

    class Closing:
        def __init__(self, fail: bool) -> None:
            self.closed, self.fail = 0, fail

        def close(self) -> None:
            self.closed += 1
            if self.fail:
                raise RuntimeError("already dead")

    both, broken = Closing(False), Closing(True)
    close_players([both, broken, both])
    assert (both.closed, broken.closed) == (1, 1)
