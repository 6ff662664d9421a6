"""Values: win probabilities and centipawns, as dlshogi converts them.

A win probability ``p`` is for the side to move. ``cp = -ln(1/p - 1) * coef``
and back ``p = 1 / (1 + exp(-cp / coef))`` with dlshogi's ``Eval_Coef`` 756
as the default coefficient. Mate scores are stored as +-30000 (dlshogi);
scores beyond :data:`MATE_BOUND` are mates. Draw values (dlshogi's
``Book_Draw_Value_*``) are per mille of a win everywhere (:class:`DrawValues`):
MCTS takes them as win probabilities, refine minimax and export as
centipawns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bookgen.errors import SettingsError

EVAL_COEF = 756.0
MATE_VALUE = 30000
MATE_BOUND = MATE_VALUE - 1000  # scores beyond this are mates
_P_EPSILON = 1e-12


def value_to_cp(p: float, coef: float = EVAL_COEF) -> int:
    """Centipawns for a win probability, clipped to +-MATE_VALUE."""
    if p >= 1.0 - _P_EPSILON:
        return MATE_VALUE
    if p <= _P_EPSILON:
        return -MATE_VALUE
    cp = -math.log(1.0 / p - 1.0) * coef
    return int(round(max(-MATE_VALUE, min(MATE_VALUE, cp))))


def cp_to_value(cp: float, coef: float = EVAL_COEF) -> float:
    """Win probability for a centipawn score (mate scores give 0 or 1)."""
    if cp >= MATE_VALUE:
        return 1.0
    if cp <= -MATE_VALUE:
        return 0.0
    x = cp / coef
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def clip_score(score: int | None) -> int:
    """A score as game records store it (hcpe ``eval``, CSA ``'**`` comments):
    clipped to +-MATE_VALUE, 0 for none."""
    if score is None:
        return 0
    return max(-MATE_VALUE, min(MATE_VALUE, int(score)))


@dataclass(frozen=True)
class DrawValues:
    """What a repetition draw is worth to each side, per mille of a win (dlshogi's
    ``Book_Draw_Value_Black``/``_White``; 500 is an even game)."""

    black: int = 500
    white: int = 500

    def __post_init__(self) -> None:
        for name in ("black", "white"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
                raise SettingsError(f"draws.{name}",
                                    f"is per mille of a win, between 0 and 1000 (got {value})")

    def per_mille(self, color: int) -> int:
        """The draw value of ``color`` (``cshogi.BLACK`` 0 or ``cshogi.WHITE`` 1)."""
        return self.white if color else self.black

    def probability(self, color: int) -> float:
        """The draw value of ``color`` as a win probability (500 -> 0.5): what MCTS uses."""
        return self.per_mille(color) / 1000

    def cp(self, color: int) -> int:
        """The draw value of ``color`` in centipawns (500 -> 0): what refine and export use."""
        return value_to_cp(self.probability(color))
