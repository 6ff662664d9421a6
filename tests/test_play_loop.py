"""The one game loop (bookgen.play.loop.play_game): the order of each ply, and the same
games, records and times as the two loops it replaced (self-play's and the match
runner's, kept below as they were, on the new player interface)."""

from __future__ import annotations

import cshogi
import numpy as np
import pytest

from bookgen.engines.player_settings import MctsPlay, PlayerSettings
from bookgen.engines.players import open_player
from bookgen.engines.protocols import MoveChoice, PlayerFailure
from bookgen.play.clock import ClockState, TimeControl
from bookgen.play.loop import GameRules, play_game
from bookgen.play.rules import GameState, Reason, Result
from bookgen.selfplay.games import _Records
from bookgen.values import clip_score

DECLARATION_SFEN = "RRBBG4/GGSSK4/NN7/9/9/9/9/9/8k b 2P 1"
HCPE = cshogi.HuffmanCodedPosAndEval


class Scripted:
    """A player that does what ``script`` says at each of its turns: a move (USI), or
    ``resign``, ``declare``, ``time`` / ``crash`` (a PlayerFailure), with a score and
    an elapsed time; past the script it plays its first legal move."""

    engine_name = engine_author = None

    def __init__(self, name: str, script: list[tuple[str, int | None, int]] = (),
                 honours_clock: bool = True) -> None:
        self.name, self.script, self.honours_clock = name, list(script), honours_clock
        self.turns = 0
        self.games = 0
        self.seen: list[tuple[int, dict[int, int] | None]] = []

    def new_game(self) -> None:
        self.games += 1

    def choose(self, game, clock, rng) -> MoveChoice:
        self.seen.append((game.ply, dict(clock.remaining_ms) if clock else None))
        action, score, elapsed = (self.script[self.turns] if self.turns < len(self.script)
                                  else ("", 0, 0))
        self.turns += 1
        if action == "time":
            raise PlayerFailure(Reason.TIME_FORFEIT, "no bestmove in time")
        if action == "crash":
            raise PlayerFailure(Reason.ENGINE_FAILURE, "engine crashed")
        if action in ("resign", "declare"):
            return MoveChoice(score_cp=score, elapsed_ms=elapsed, **{action: True})
        move = action or cshogi.move_to_usi(next(iter(game.board.legal_moves)))
        return MoveChoice(move, move, score, elapsed_ms=elapsed)

    def close(self) -> None:
        pass


def sides(black, white) -> dict[int, object]:
    return {cshogi.BLACK: black, cshogi.WHITE: white}


# --------------------------------------------------------------------------
# the order of a ply


def test_a_failure_loses_before_anything_else():
    for action, reason in (("time", Reason.TIME_FORFEIT), ("crash", Reason.ENGINE_FAILURE)):
        game = play_game("startpos", sides(Scripted("a", [("7g7f", 0, 0), (action, 0, 0)]),
                                           Scripted("b")), GameRules())
        assert (game.outcome.result, game.outcome.reason) == (Result.WHITE_WIN, reason)
        assert len(game.moves) == 2 and game.moves[0] == "7g7f" and game.outcome.detail


def test_the_clock_charges_only_players_that_honour_it():
    control = TimeControl(time=1000, inc=100, margin=300)
    late = Scripted("a", [("7g7f", 0, 1200), ("6g6f", 0, 150), ("5g5f", 0, 401)])
    other = Scripted("b", [("", 0, 50)] * 3)
    game = play_game("startpos", sides(late, other), GameRules(), clock=control)
    assert (game.outcome.result, game.outcome.reason) == (Result.WHITE_WIN, Reason.TIME_FORFEIT)
    assert game.outcome.detail == "401 ms used, 150 ms allowed (margin included)"
    assert len(game.moves) == 4
    # Each choice saw the clocks left before it (lag within the margin runs below zero);
    # the move past its allowance counts in the time used, not on the clock.
    assert [seen for _, seen in late.seen] == [{0: 1000, 1: 1000}, {0: -100, 1: 1050},
                                               {0: -150, 1: 1100}]
    assert (game.black_ms, game.white_ms) == (1200 + 150 + 401, 100)
    # A player that does not honour the clock has its time recorded, never forfeited.
    slow = Scripted("a", [("7g7f", 0, 5000)], honours_clock=False)
    game = play_game("startpos", sides(slow, Scripted("b")), GameRules(max_ply=4),
                     clock=control)
    assert game.outcome.reason is Reason.MAX_PLY and game.black_ms == 5000


def test_declare_resign_and_the_decision_hook():
    seen: list[tuple[int, str | None]] = []

    def hook(game: GameState, choice: MoveChoice) -> None:
        seen.append((game.ply, choice.move))

    win = play_game(f"sfen {DECLARATION_SFEN}", sides(Scripted("a", [("declare", 0, 0)]),
                                                      Scripted("b")), GameRules(),
                    on_decision=hook)
    assert (win.outcome.result, win.outcome.reason) == (Result.BLACK_WIN, Reason.DECLARATION)
    false = play_game("startpos", sides(Scripted("a", [("declare", 0, 0)]), Scripted("b")),
                      GameRules(), on_decision=hook)
    assert false.outcome.reason is Reason.ILLEGAL_DECLARATION
    assert false.outcome.result is Result.WHITE_WIN
    resigned = play_game("startpos", sides(Scripted("a", [("7g7f", 0, 0)]),
                                           Scripted("b", [("resign", -50, 0)])),
                         GameRules(), on_decision=hook)
    assert (resigned.outcome.reason, resigned.moves) == (Reason.RESIGN, ["7g7f"])
    assert seen == [(0, "7g7f")]   # declarations and resignations are not decisions


def test_adjudication_comes_after_the_hook_and_before_the_move():
    seen: list[int] = []
    low = [("", -600, 0)] * 5
    game = play_game("startpos", sides(Scripted("a", low), Scripted("b")),
                     GameRules(resign_cp=500, resign_moves=2),
                     on_decision=lambda game, choice: seen.append(game.ply))
    # Black reports -600 at plies 0 and 2 and resigns at its second report, which the
    # hook saw (self-play records that position); its move is not played.
    assert (game.outcome.result, game.outcome.reason) == (Result.WHITE_WIN, Reason.RESIGN)
    assert game.plies == 2 and seen == [0, 1, 2] and game.scores == [-600, 0]


def test_illegal_move_and_max_ply_from_the_initial_position():
    illegal = play_game("startpos", sides(Scripted("a", [("9a9a", 7, 0)]), Scripted("b")),
                        GameRules())
    assert (illegal.outcome.reason, illegal.outcome.result) == (Reason.ILLEGAL_MOVE,
                                                                Result.WHITE_WIN)
    assert illegal.moves == [] and illegal.scores == []
    opening = play_game("startpos moves 7g7f 3c3d", sides(Scripted("a"), Scripted("b")),
                        GameRules(max_ply=8))
    assert (opening.outcome.reason, opening.plies) == (Reason.MAX_PLY, 6)
    board = cshogi.Board()
    board.push_usi("7g7f")
    hcp = np.zeros(1, cshogi.HuffmanCodedPos)
    board.to_hcp(hcp[0]["hcp"])
    board.set_hcp(hcp[0]["hcp"])   # a start from hcp records counts from move 1
    assert play_game(board, sides(Scripted("a"), Scripted("b")), GameRules(max_ply=8)).plies == 8


def test_new_game_once_per_player_and_names():
    one = Scripted("solo")
    game = play_game("startpos", sides(one, one), GameRules(max_ply=4))
    assert one.games == 1 and game.names == ("solo", "solo")
    black, white = Scripted("b"), Scripted("w")
    play_game("startpos", sides(black, white), GameRules(max_ply=2))
    assert (black.games, white.games) == (1, 1)


# --------------------------------------------------------------------------
# the same games as the two old loops


def old_match_loop(opening, players, rules: GameRules, control: TimeControl):
    """analysis/match.py: play_game before the loops were one."""
    game = GameState(opening, max_ply=None, declaration_rule=rules.declaration_rule,
                     resign=rules.resign_cp, resign_moves=rules.resign_moves)
    game.max_ply = max(1, rules.max_ply - (game.board.move_number - 1))
    for player in players.values():
        player.new_game()
    clock = ClockState.start(control)
    used = {cshogi.BLACK: 0, cshogi.WHITE: 0}
    scores = []
    while game.outcome is None:
        turn = game.turn
        player = players[turn]
        try:
            reply = player.choose(game, clock, np.random.default_rng(0))
        except PlayerFailure as failure:
            if failure.reason is Reason.TIME_FORFEIT:
                game.forfeit_time(failure.detail)
            else:
                game.forfeit_failure(failure.detail)
            break
        used[turn] += reply.elapsed_ms
        if control.clocked and player.honours_clock:
            late = clock.spend(turn, reply.elapsed_ms)
            if late is not None:
                game.forfeit_time(late)
                break
        if reply.declare:
            game.declare()
            break
        if reply.resign:
            game.resign("resigned")
            break
        if game.adjudicate(reply.score_cp) is not None:
            break
        scores.append(reply.score_cp)
        game.push(reply.move or "")
    return (game.start_sfen, game.outcome, list(game.moves), scores[:len(game.moves)],
            used[cshogi.BLACK], used[cshogi.WHITE])


def old_selfplay_loop(board, players, rules: GameRules, rng):
    """selfplay/games.py: play_game's loop before the loops were one."""
    game = GameState(board, max_ply=rules.max_ply, declaration_rule=rules.declaration_rule,
                     resign=rules.resign_cp, resign_moves=rules.resign_moves)
    for player in {id(p): p for p in players.values()}.values():
        player.new_game()
    records = np.zeros(min(rules.max_ply, 1024), HCPE)
    count = 0
    scores = []
    while game.outcome is None:
        decision = players[game.turn].choose(game, None, rng)
        if decision.declare:
            game.declare()
            break
        if decision.resign:
            game.resign("resigned")
            break
        best = game.legal_move(decision.best) if decision.best else None
        if best is not None:
            if count == len(records):
                records = np.concatenate([records, np.zeros(len(records), HCPE)])
            game.board.to_hcp(records["hcp"][count])
            records["eval"][count] = clip_score(decision.score_cp)
            records["bestMove16"][count] = cshogi.move16(best)
            count += 1
        if game.adjudicate(decision.score_cp) is not None:
            break
        scores.append(decision.score_cp)
        game.push(decision.move or "")
    records = records[:count].copy()
    records["gameResult"] = int(game.outcome.result)
    return game.start_sfen, game.outcome, list(game.moves), scores[:len(game.moves)], records


def random_script(seed: int) -> list[tuple[str, int | None, int]]:
    """Mostly first legal moves, with now and then a resignation, a declaration, a
    failure, an illegal move, a low or missing score and a slow move."""
    rng = np.random.default_rng(seed)
    script: list[tuple[str, int | None, int]] = []
    for _ in range(60):
        roll = rng.random()
        action = ("resign" if roll < 0.01 else "declare" if roll < 0.02 else
                  "crash" if roll < 0.03 else "time" if roll < 0.035 else
                  "9a9a" if roll < 0.04 else "")
        score = None if rng.random() < 0.1 else int(rng.integers(-900, 300))
        script.append((action, score, int(rng.integers(0, 700))))
    return script


@pytest.mark.parametrize("seed", range(40))
def test_match_games_are_the_old_loops(seed):
    rng = np.random.default_rng(seed)
    opening = ["startpos", "startpos moves 7g7f 3c3d",
               f"sfen {DECLARATION_SFEN}"][seed % 3]
    rules = GameRules(max_ply=int(rng.integers(4, 40)),
                      resign_cp=[None, 400][seed % 2], resign_moves=int(rng.integers(1, 3)))
    control = [TimeControl(time=2000, inc=100, margin=200), TimeControl(nodes=10),
               TimeControl(byoyomi=300, margin=100)][seed % 3]

    def players():
        return sides(Scripted("a", random_script(seed)),
                     Scripted("b", random_script(seed + 1000), honours_clock=seed % 4 != 0))

    old = old_match_loop(opening, players(), rules, control)
    new = play_game(opening, players(), rules, clock=control)
    assert (new.start_sfen, new.outcome, new.moves, new.scores, new.black_ms,
            new.white_ms) == old


@pytest.mark.parametrize("seed", range(40))
def test_selfplay_games_and_records_are_the_old_loops(seed):
    rng = np.random.default_rng(seed)
    rules = GameRules(max_ply=int(rng.integers(4, 40)),
                      resign_cp=[None, 400][seed % 2], resign_moves=int(rng.integers(1, 3)))
    board = cshogi.Board()
    for move in ["7g7f", "3c3d", "2g2f"][:seed % 4]:
        board.push_usi(move)
    hcp = np.zeros(1, cshogi.HuffmanCodedPos)
    board.to_hcp(hcp[0]["hcp"])
    board.set_hcp(hcp[0]["hcp"])

    def players():
        black = Scripted("a", [s for s in random_script(seed) if s[0] not in ("time", "crash")])
        return sides(black, black if seed % 5 == 0 else Scripted("b"))

    old = old_selfplay_loop(board, players(), rules, np.random.default_rng(seed))
    records = _Records(min(rules.max_ply, 1024))
    new = play_game(board, players(), rules, rng=np.random.default_rng(seed),
                    on_decision=records)
    new_records = records.finish(new.outcome)
    assert (new.start_sfen, new.outcome, new.moves, new.scores) == old[:4]
    assert new_records.tobytes() == old[4].tobytes()


@pytest.mark.parametrize("seed", range(3))
def test_mcts_and_builtin_games_are_the_old_selfplay_loops(seed):
    """Real players (MCTS sampling its opening moves, the alpha-beta): the same games and
    records from the same random numbers."""
    rules = GameRules(max_ply=16, resign_cp=300, resign_moves=2)

    def players():
        mcts = open_player(PlayerSettings.parse("mcts:builtin", mcts=MctsPlay(playouts=4)))
        alphabeta = open_player(PlayerSettings.parse("builtin"))
        return sides(mcts, alphabeta) if seed % 2 else sides(mcts, mcts)

    old = old_selfplay_loop(cshogi.Board(), players(), rules, np.random.default_rng(seed))
    records = _Records(16)
    new = play_game(cshogi.Board(), players(), rules, rng=np.random.default_rng(seed),
                    on_decision=records)
    assert (new.start_sfen, new.outcome, new.moves, new.scores) == old[:4]
    assert records.finish(new.outcome).tobytes() == old[4].tobytes()
