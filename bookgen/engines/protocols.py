"""The engines' two interfaces: "evaluate positions" and "choose a move".

An evaluator (:class:`Evaluator`) takes a batch of positions and returns, for
each, an :class:`Evaluation`: a prior over its legal moves and a value, the
win probability for the side to move. grow, MCTS (grow's and self-play's),
blend and refine search all use it. Evaluators that search by themselves (USI
engines, the built-in alpha-beta) may also return per-move values from their
own search (``move_values``), which the expander then uses directly instead
of running MCTS on top, and the best line of their search as the engine gave
it (``score``, ``bound``, ``seldepth``, ``bestmove``, ``pv``): refine search
stores that line.

A player (:class:`Player`) chooses a move in a game: it answers with a
:class:`MoveChoice`, or raises :class:`PlayerFailure` when its engine failed
and the game is lost. The game loop, :func:`bookgen.play.loop.play_game`,
asks it; :func:`bookgen.engines.players.open_player` opens one from its
settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

from bookgen.errors import BookgenError

if TYPE_CHECKING:  # cshogi (and numpy) stay unloaded for `bookgen --help`
    import cshogi
    import numpy as np

    from bookgen.play.clock import ClockState
    from bookgen.play.rules import GameState, Reason


AnalysisMode = Literal["multipv-lines", "best-line"]
"""How a searching evaluator analyses a position: ``multipv-lines`` gives
priors over several moves (grow, MCTS), ``best-line`` one best line as the
search reported it (refine search)."""


@dataclass
class Evaluation:
    """What an evaluator says about one position.

    ``moves`` are USI strings of legal moves and ``priors`` their
    probabilities (same order, summing to 1; every legal move for networks,
    possibly fewer for engines). ``value`` is the win probability for the
    side to move. ``move_values``, when not None, holds for each move of
    ``moves`` the win probability for the side to move after playing it, from
    the evaluator's own search. ``depth`` and ``nodes`` describe that search;
    ``mate`` is a mate distance in plies when one was found (positive: the
    side to move mates). ``move_ints`` optionally repeats ``moves`` as cshogi
    move integers, which spares the tree search converting them back. With
    ``move_values``, ``move_depths`` and ``move_pvs`` may hold each move's
    own search depth and its line (starting with the move, legal moves only).

    Searching evaluators also give their best line as the search reported
    it: ``score`` in centipawns for the side to move (a mate in n plies as
    ``+-(30000 - n)``), its ``bound``, the ``seldepth`` and the ``bestmove``.
    A best-line USI analysis leaves ``depth`` and ``nodes`` None where the
    engine did not report them.
    """

    moves: list[str]
    priors: list[float]
    value: float
    move_values: list[float] | None = None
    depth: int | None = 0
    nodes: int | None = 0
    mate: int | None = None
    pv: list[str] = field(default_factory=list)
    move_ints: list[int] | None = None  # cshogi moves for ``moves``, when at hand
    move_depths: list[int] | None = None  # search depth of each move's line
    move_pvs: list[list[str]] | None = None  # each move's line, from the move on
    score: int | None = None      # the best line's cp, side to move (mates: +-(30000 - plies))
    bound: str | None = None      # "exact", "lower" or "upper" (of score)
    seldepth: int | None = None
    bestmove: str | None = None   # what the search would play (None: resign, win, no move)
    restarts: int = 0             # engine restarts this evaluation took


class EvaluatorError(BookgenError):
    """The evaluator failed (engine crashed and could not be restarted, bad model)."""


class PositionFailed(EvaluatorError):
    """A best-line USI analysis gave up on one position after its restarts.

    ``error`` is the last attempt's error, ``restarts`` the engine restarts
    tried. The evaluator itself still works: refine search records the
    failure and goes on with the next position.
    """

    def __init__(self, message: str, error: str, restarts: int) -> None:
        super().__init__(message)
        self.error = error
        self.restarts = restarts


@runtime_checkable
class Evaluator(Protocol):
    """A batched position evaluator.

    ``spec`` is the string that names it on the command line (``builtin``,
    ``usi:/usr/games/fairy-stockfish``, ``torch:model.pt``, ...). ``evaluate``
    must not modify the boards it is given. ``close`` releases processes and
    models; evaluators are also context managers.
    """

    spec: str

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class EvaluatorBase:
    """Context-manager plumbing for evaluator classes."""

    spec = "base"

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MOVE_SOURCES = ("book", "search", "runner")
"""Where a move came from: the engine's own book, a search, or the runner itself."""


@dataclass(slots=True)
class MoveRecord:
    """What a player said about one of its moves, as the match results file keeps it.

    ``cp``/``mate`` are the score of the position before the move for the
    side to move (the mover), at most one set (``mate`` in plies, positive:
    the mover mates); ``bound`` is ``"lower"``, ``"upper"`` or ``"exact"``
    for a score, None without one. ``depth``, ``seldepth``, ``nodes`` and
    ``pv`` describe the search (None, empty: not reported). ``source`` is
    one of :data:`MOVE_SOURCES`: ``"book"`` when a USI engine answered from
    its own book (:func:`bookgen.engines.usi.analyser.book_answer`).
    """

    source: str = "search"
    cp: int | None = None
    mate: int | None = None
    bound: str | None = None
    depth: int | None = None
    seldepth: int | None = None
    nodes: int | None = None
    pv: tuple[str, ...] = ()


@dataclass
class MoveChoice:
    """What a player does in a position: play a move, resign or declare.

    ``move`` is the move to play (USI). ``best`` is the player's best move,
    the training target of self-play (an MCTS player's most visited move,
    also when it sampled another ``move``; None: no target). ``score_cp`` is
    the player's value of the position in centipawns for the side to move
    (None: not given). ``elapsed_ms`` is the time the choice took, as the
    player measured it (what a clock is charged). ``record`` is what the
    player said about the move beyond that (None: nothing), kept per move by
    the game loop (``records`` of :class:`bookgen.play.loop.PlayedGame`).
    """

    move: str | None = None
    best: str | None = None
    score_cp: int | None = None
    resign: bool = False
    declare: bool = False
    elapsed_ms: int = 0
    record: MoveRecord | None = None


class PlayerFailure(Exception):
    """The player's engine failed during a game; the game is lost with ``reason``
    (a time forfeit, or an engine failure) and ``detail``."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Player(Protocol):
    """Something that plays games: the built-in alpha-beta, MCTS over an
    evaluator, or a USI engine.

    ``name`` names it in game records. ``engine_name`` and ``engine_author``
    are what its engine says of itself (USI ``id``; None when unknown).
    ``honours_clock``: whether its moves are charged to a clock and can lose
    on time (USI engines); the others are limited by their own budgets, and
    their time is recorded but never forfeited. ``new_game`` is called before
    each game it plays (once per game, also when it plays both sides).
    ``choose`` answers the position of ``game`` (which it must not change);
    ``clock`` is the game's clocks (None: no clock), ``rng`` the game's
    random numbers (MCTS samples its opening moves with it).
    """

    @property
    def name(self) -> str: ...

    @property
    def engine_name(self) -> str | None: ...

    @property
    def engine_author(self) -> str | None: ...

    @property
    def honours_clock(self) -> bool: ...

    def new_game(self) -> None: ...

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice: ...

    def close(self) -> None: ...
