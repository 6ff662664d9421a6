"""Which moves of an expanded position become book moves.

:func:`select_book_moves` applies dlshogi's rule to the root moves of an MCTS
leaf search; :func:`choices_from_lines` keeps an evaluator's own lines (a USI
engine's MultiPV analysis) within the cutoff of the best one. Both give
:class:`BookMoveChoice` rows, which :mod:`bookgen.grow.book_graph` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bookgen.engines.mcts import MoveStats
from bookgen.engines.protocols import Evaluation
from bookgen.values import EVAL_COEF, value_to_cp


@dataclass
class BookMoveChoice:
    move: str
    count: int
    value: int
    win_rate: float
    visits: int
    prior: float
    depth: int = 0               # search depth behind the move (see MoveStats.depth)
    reply: str | None = None     # the reply the search expects (a ponder move)


def select_book_moves(stats: Sequence[MoveStats], visit_threshold: float = 0.005,
                      cutoff: float = 0.015, coef: float = EVAL_COEF,
                      min_visits: int = 1) -> list[BookMoveChoice]:
    """dlshogi's rule: in visit order keep moves whose visit share exceeds
    ``visit_threshold`` and whose win rate is within ``cutoff`` of the most
    visited move's; if none qualifies, the top ``(n + 2) // 3``. ``count`` is
    the visit share x 1000. ``min_visits`` adds an absolute floor, which keeps
    small playout budgets (where one visit is already a large share) from
    admitting every move tried once."""
    total = sum(s.visits for s in stats)
    if not stats or total == 0:
        return []
    ordered = sorted(stats, key=lambda s: -s.visits)
    best = ordered[0].win_rate
    kept = [s for s in ordered
            if s.visits / total > visit_threshold and s.visits >= min_visits
            and s.win_rate >= best - cutoff]
    if not kept:
        kept = ordered[:(len(ordered) + 2) // 3]
    return [BookMoveChoice(s.move, max(1, round(s.visits / total * 1000)),
                           value_to_cp(s.win_rate, coef), s.win_rate, s.visits, s.prior,
                           s.depth, s.reply)
            for s in kept]


def choices_from_lines(evaluation: Evaluation, cutoff: float = 0.015,
                       coef: float = EVAL_COEF) -> list[BookMoveChoice]:
    """Book moves from an evaluator's own lines; each keeps its line's depth
    (the engine's reported depth) and the line's second move as the reply."""
    assert evaluation.move_values is not None
    n = len(evaluation.moves)
    depths = evaluation.move_depths or [evaluation.depth or 0] * n
    pvs = evaluation.move_pvs or [[]] * n
    best = max(evaluation.move_values)
    kept = [(move, prior, value, depth, pv[1] if len(pv) > 1 and pv[0] == move else None)
            for move, prior, value, depth, pv in
            zip(evaluation.moves, evaluation.priors, evaluation.move_values, depths, pvs)
            if value >= best - cutoff]
    total = sum(k[1] for k in kept) or 1.0
    return [BookMoveChoice(move, max(1, round(prior / total * 1000)),
                           value_to_cp(value, coef), value, 0, prior, depth, reply)
            for move, prior, value, depth, reply in sorted(kept, key=lambda k: -k[2])]
