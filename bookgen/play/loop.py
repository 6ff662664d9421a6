"""The game loop: one game between two players, under the runner's rules.

Self-play (:mod:`bookgen.selfplay.games`) and matches
(:mod:`bookgen.analysis.match`) play every game here. The runner, not the
players, decides how a game ends (:mod:`bookgen.play.rules`). At each ply the
player to move is asked for a :class:`~bookgen.engines.protocols.MoveChoice`,
and then, in this order:

1. a :class:`~bookgen.engines.protocols.PlayerFailure` (its engine crashed,
   hung or broke the protocol) loses the game: on time when it was a time
   forfeit, else as an engine failure;
2. under a clock, a player that honours it is charged the time it took; past
   its allowance (margin included) it loses on time;
3. a declaration ends the game (a win if the position meets the declaration
   rule, else a loss);
4. a resignation ends it;
5. ``on_decision`` sees the position and the choice (self-play records its
   training data here);
6. score adjudication (``resign_cp``): a side whose own score stayed at or
   below ``-resign_cp`` for ``resign_moves`` of its moves resigns;
7. the score is kept and the move played: an illegal move loses, and
   checkmate, repetition, perpetual check and ``max_ply`` end the game.

When the game is over, each player that has a ``game_over`` method (USI
engines: ``gameover win|lose|draw``) is told its result.

:func:`playing_game` is the loop itself, as a resumable game
(:data:`GameSteps`): with ``searching`` set, a player that can search
resumably (``choosing``, as :class:`bookgen.engines.mcts_player.MctsPlayer`)
yields its leaves to whoever drives the game, so that one evaluator can
serve many games at once (``selfplay --parallel-games``,
:class:`bookgen.engines.batching.SearchBatcher`). :func:`play_game` drives
it without ``searching``: every player chooses by itself and nothing is
yielded.

This module sits above the engines layer (it asks players), the rest of
:mod:`bookgen.play` below it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field

import cshogi
import numpy as np

from bookgen.engines.protocols import Evaluation, MoveChoice, MoveRecord, Player, PlayerFailure
from bookgen.errors import SettingsError
from bookgen.play.clock import ClockState, TimeControl
from bookgen.play.rules import DECLARATION_RULES, GameState, Outcome, Reason, Result
from bookgen.timestamps import utc_now

__all__ = ["GameRules", "GameSteps", "PlayedGame", "play_game", "playing_game"]


@dataclass(frozen=True)
class GameRules:
    """How a game ends besides checkmate, repetition and illegal moves.

    ``max_ply``: a draw at this ply, counted from the initial position (the
    opening moves of a ``startpos moves ...`` start included; a start given
    as a board or sfen counts from its move number). ``declaration_rule``:
    ``"27"`` or ``"24"``. ``resign_cp`` (None: off) and ``resign_moves``:
    score adjudication. Checked when made (:class:`bookgen.errors.SettingsError`
    names the field as nested settings hold it: ``rules.max_ply``).
    """

    max_ply: int = 320
    declaration_rule: str = "27"
    resign_cp: int | None = None
    resign_moves: int = 3

    def __post_init__(self) -> None:
        for name in ("max_ply", "resign_moves"):
            if getattr(self, name) < 1:
                raise SettingsError(f"rules.{name}", "must be at least 1")
        if self.resign_cp is not None and self.resign_cp <= 0:
            raise SettingsError("rules.resign_cp", "must be a positive number of centipawns")
        if self.declaration_rule not in DECLARATION_RULES:
            raise SettingsError("rules.declaration_rule",
                                f"must be {' or '.join(DECLARATION_RULES)}, "
                                f"not {self.declaration_rule!r}")


@dataclass
class PlayedGame:
    """A finished game: where it started, who played, its moves, its end and its times.

    ``scores`` holds each mover's score of the position before its move (its
    own view, None: not given), one per move; ``records`` what the mover said
    of each move beyond that (:class:`~bookgen.engines.protocols.MoveRecord`,
    None: nothing) and ``move_ms`` the time each took. ``black_ms``/``white_ms`` are
    the times the players reported (clocked or not); ``engine_seconds`` the
    wall time spent in the players' choices, ``wall_seconds`` the whole game's.
    """

    start_sfen: str
    names: tuple[str, str]
    moves: list[str]
    scores: list[int | None]
    outcome: Outcome
    black_ms: int
    white_ms: int
    started_at: str
    finished_at: str
    wall_seconds: float
    engine_seconds: float
    records: list[MoveRecord | None] = field(default_factory=list)
    move_ms: list[int] = field(default_factory=list)

    @property
    def plies(self) -> int:
        return len(self.moves)


GameSteps = Generator[list[cshogi.Board], list[Evaluation], PlayedGame]
"""A game as a resumable game (:func:`playing_game`): it yields the batches of
leaves its players' searches need evaluated, is sent their evaluations, in
order, and returns the :class:`PlayedGame` (the form of
:data:`bookgen.engines.mcts.SearchSteps`)."""


def play_game(start: cshogi.Board | str, players: Mapping[int, Player], rules: GameRules, *,
              clock: TimeControl | None = None, rng: np.random.Generator | None = None,
              on_decision: Callable[[GameState, MoveChoice], None] | None = None,
              side_controls: Mapping[int, TimeControl] | None = None) -> PlayedGame:
    """Play one game from ``start`` (a board, or a ``startpos``/``sfen`` position line)
    between ``players`` (by colour: ``cshogi.BLACK``, ``cshogi.WHITE``; one object
    may play both) under ``rules`` (see the module docstring for the order of
    each ply).

    ``clock`` is the time control (None: no clock); ``side_controls`` (by
    colour, with a ``clock``) gives each side its own (time or node odds).
    ``rng`` is given to the players (None: a fixed seed). Each distinct
    player's ``new_game`` is called once, black's first, and its ``game_over``
    (when it has one) once at the end with its result (``win``, ``lose`` or
    ``draw``; a player playing both sides gets black's).
    """
    steps = playing_game(start, players, rules, clock=clock, rng=rng, on_decision=on_decision,
                         side_controls=side_controls)
    try:
        next(steps)
    except StopIteration as stop:
        played: PlayedGame = stop.value
        return played
    raise AssertionError("a game played without searching yields no leaves")


def playing_game(start: cshogi.Board | str, players: Mapping[int, Player], rules: GameRules, *,
                 clock: TimeControl | None = None, rng: np.random.Generator | None = None,
                 on_decision: Callable[[GameState, MoveChoice], None] | None = None,
                 side_controls: Mapping[int, TimeControl] | None = None,
                 searching: bool = False) -> GameSteps:
    """:func:`play_game` as a resumable game (:data:`GameSteps`). With
    ``searching``, a player with a ``choosing`` method (a resumable
    ``choose``: it yields its search's leaves and returns the choice) chooses
    through it, and its leaves are yielded to the driver; the others choose
    by themselves. The time a choice took then includes whatever the driver
    did in between (other games' searches)."""
    started_at, wall_start = utc_now(), time.perf_counter()
    game = GameState(start, max_ply=None, declaration_rule=rules.declaration_rule,
                     resign=rules.resign_cp, resign_moves=rules.resign_moves)
    game.max_ply = max(1, rules.max_ply - (game.board.move_number - 1))
    distinct = {id(p): (colour, p) for colour, p in ((cshogi.WHITE, players[cshogi.WHITE]),
                                                      (cshogi.BLACK, players[cshogi.BLACK]))}
    for _colour, player in reversed(distinct.values()):
        player.new_game()
    clocks = ClockState.start(clock, side_controls) if clock is not None else None
    rng = rng if rng is not None else np.random.default_rng(0)
    used = {cshogi.BLACK: 0, cshogi.WHITE: 0}
    scores: list[int | None] = []
    records: list[MoveRecord | None] = []
    move_ms: list[int] = []
    engine_seconds = 0.0
    while game.outcome is None:
        turn = game.turn
        player = players[turn]
        move_start = time.perf_counter()
        try:
            choosing = getattr(player, "choosing", None) if searching else None
            choice = (player.choose(game, clocks, rng) if choosing is None
                      else (yield from choosing(game, clocks, rng)))
        except PlayerFailure as failure:
            engine_seconds += time.perf_counter() - move_start
            if failure.reason is Reason.TIME_FORFEIT:
                game.forfeit_time(failure.detail)
            else:
                game.forfeit_failure(failure.detail)
            break
        engine_seconds += time.perf_counter() - move_start
        used[turn] += choice.elapsed_ms
        if clocks is not None and clocks.control_of(turn).clocked and player.honours_clock:
            late = clocks.spend(turn, choice.elapsed_ms)
            if late is not None:
                game.forfeit_time(late)
                break
        if choice.declare:
            game.declare()
            break
        if choice.resign:
            game.resign("resigned")
            break
        if on_decision is not None:
            on_decision(game, choice)
        if game.adjudicate(choice.score_cp) is not None:
            break
        scores.append(choice.score_cp)
        records.append(choice.record)
        move_ms.append(choice.elapsed_ms)
        game.push(choice.move or "")
    outcome = game.outcome
    assert outcome is not None
    plies = len(game.moves)
    for colour, player in reversed(distinct.values()):
        game_over = getattr(player, "game_over", None)
        if game_over is not None:
            game_over(_result_for(outcome.result, colour))
    return PlayedGame(game.start_sfen, (players[cshogi.BLACK].name, players[cshogi.WHITE].name),
                      list(game.moves), scores[:plies], outcome,
                      used[cshogi.BLACK], used[cshogi.WHITE], started_at, utc_now(),
                      time.perf_counter() - wall_start, engine_seconds,
                      records[:plies], move_ms[:plies])


def _result_for(result: Result, colour: int) -> str:
    """``win``, ``lose`` or ``draw``: the game's result as ``colour`` saw it."""
    if result is Result.DRAW:
        return "draw"
    winner = cshogi.BLACK if result is Result.BLACK_WIN else cshogi.WHITE
    return "win" if winner == colour else "lose"
