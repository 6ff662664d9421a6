"""The one interface for analysing positions: the built-in search, USI engines, networks.

An evaluator takes a batch of positions and returns, for each, an
:class:`Evaluation`: a prior over its legal moves and a value, the win
probability for the side to move. grow, MCTS (grow's and self-play's),
blend and refine search all use it.

Evaluators that search by themselves (USI engines, the built-in alpha-beta)
may also return per-move values from their own search (``move_values``),
which the expander then uses directly instead of running MCTS on top, and
the best line of their search as the engine gave it (``score``, ``bound``,
``seldepth``, ``bestmove``, ``pv``): refine search stores that line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

from bookgen.errors import BookgenError

if TYPE_CHECKING:  # cshogi (and numpy) stay unloaded for `bookgen --help`
    import cshogi


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
