"""Values: win probabilities and centipawns, as dlshogi converts them.

A win probability ``p`` is for the side to move. ``cp = -ln(1/p - 1) * coef``
and back ``p = 1 / (1 + exp(-cp / coef))`` with dlshogi's ``Eval_Coef`` 756
as the default coefficient. Mate scores are stored as +-30000 (dlshogi);
scores beyond :data:`MATE_BOUND` are mates. Draw values (dlshogi's
``Book_Draw_Value_*``) are given per mille of a win; :func:`draw_cp` turns one
into centipawns.
"""

from __future__ import annotations

import math

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


def draw_cp(per_mille: int) -> int:
    """The draw value in cp for a draw value given per mille of a win."""
    return value_to_cp(per_mille / 1000)
