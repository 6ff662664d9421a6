"""``builtin``: the default evaluator, a small alpha-beta search that needs nothing installed.

For each position it searches every legal move (depth 1 plus quiescence by
default, about a millisecond), takes the best score as the value and turns
move-ordering heuristics blended with each move's search score into priors.
The search itself lives in :mod:`bookgen.engines.builtin.alphabeta`.
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi

from bookgen.engines.builtin.alphabeta import (
    MATE,
    MATE_BOUND,
    PLAY_DEPTH,
    PLAY_NODES,
    RootResult,
    Searcher,
    move_heuristics,
    softmax,
)
from bookgen.engines.protocols import Evaluation, EvaluatorBase
from bookgen.values import EVAL_COEF, cp_to_value

DEFAULT_DEPTH = 1


class BuiltinEvaluator(EvaluatorBase):
    """Material and placement evaluation with a small alpha-beta + quiescence search.

    ``depth`` and ``nodes`` limit the search behind ``evaluate`` (``nodes``
    applies from the second iteration on). Priors are a softmax over
    ``(heuristic + search_weight * (score - best score)) / temperature``,
    score differences clipped at ``-margin``; ``search_weight=0`` gives pure
    heuristic priors. ``coef`` converts centipawns to win probabilities.
    With ``priors=False`` (refine search) it gives the best line only: the
    best move with prior 1 and no heuristics. Every evaluation carries the
    search's score, best move and PV (bound exact).
    """

    spec = "builtin"

    def __init__(self, depth: int = DEFAULT_DEPTH, nodes: int | None = None,
                 temperature: float = 60.0, coef: float = EVAL_COEF,
                 search_weight: float = 1.0, margin: int = 300,
                 play_depth: int = PLAY_DEPTH, play_nodes: int | None = PLAY_NODES,
                 priors: bool = True) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        if temperature <= 0:
            raise ValueError("temperature must be positive")
        self.depth = depth
        self.nodes = nodes
        self.temperature = float(temperature)
        self.coef = float(coef)
        self.search_weight = float(search_weight)
        self.margin = int(margin)
        self.play_depth = play_depth
        self.play_nodes = play_nodes
        self.priors = priors
        self._searcher = Searcher()
        self.last_search: RootResult | None = None   # best_move's last root search

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        """Priors over all legal moves, value and search facts for each board."""
        return [self.evaluate_one(b) for b in boards]

    def evaluate_one(self, board: cshogi.Board) -> Evaluation:
        """The evaluation of one position (``board`` is not modified)."""
        r = self._searcher.search_root(board, self.depth, self.nodes, self.margin)
        if not r.moves:
            # No legal move: the side to move has lost (mate 0 = checkmated now).
            return Evaluation(moves=[], priors=[], value=0.0, depth=0, nodes=r.nodes, mate=0,
                              score=-MATE, bound="exact")
        best = cshogi.move_to_usi(r.best)
        pv = [cshogi.move_to_usi(m) for m in r.pv]
        value = cp_to_value(r.score, self.coef)
        if not self.priors:
            return Evaluation(moves=[best], priors=[1.0], value=value, depth=r.depth,
                              nodes=r.nodes, mate=r.mate, pv=pv, move_ints=[r.best],
                              score=r.score, bound="exact", bestmove=best)
        priors = self._priors(board, r)
        return Evaluation(
            moves=[cshogi.move_to_usi(m) for m in r.moves],
            priors=priors,
            value=value,
            move_values=None,
            depth=r.depth,
            nodes=r.nodes,
            mate=r.mate,
            pv=pv,
            move_ints=list(r.moves),
            score=r.score,
            bound="exact",
            bestmove=best,
        )

    def _priors(self, board: cshogi.Board, r: RootResult) -> list[float]:
        t = self.temperature
        heur = move_heuristics(board, r.moves, r.gives_check)
        best = r.score
        logits = []
        for h, s in zip(heur, r.scores):
            if best >= MATE_BOUND:
                # Mating moves: each extra ply to mate counts like a temperature;
                # anything else: practically never.
                rel = (s - best) * t if s >= MATE_BOUND else -self.margin - 10 * t
                rel = max(rel, -self.margin - 10 * t)
            else:
                rel = max(s - best, -self.margin)
                if s <= -MATE_BOUND:
                    rel -= 3 * t  # walks into a mate
            logits.append((h + self.search_weight * rel) / t)
        return softmax(logits)

    def best_move(self, board: cshogi.Board, depth: int | None = None,
                  nodes: int | None = None) -> tuple[str | None, int, list[str]]:
        """(best move USI, score in centipawns for the side to move, PV) at playing strength.

        ``depth``/``nodes`` default to ``play_depth``/``play_nodes``;
        ``nodes=0`` searches without a node budget. ``(None, -MATE, [])``
        when there is no legal move.
        """
        budget = self.play_nodes if nodes is None else (nodes or None)
        r = self._searcher.search_root(board, depth or self.play_depth, budget, margin=0)
        self.last_search = r
        if not r.best:
            return None, -MATE, []
        return cshogi.move_to_usi(r.best), r.score, [cshogi.move_to_usi(m) for m in r.pv]

    def search(self, board: cshogi.Board, depth: int | None = None,
               nodes: int | None = None) -> dict[str, int]:
        """Exact score (centipawns, side to move) of every legal move at ``depth``."""
        r = self._searcher.search_root(board, depth or self.depth, nodes, margin=None)
        return {cshogi.move_to_usi(m): s for m, s in zip(r.moves, r.scores)}
