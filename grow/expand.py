"""Expanding one position: the leaf search and the choice of book moves.

With an evaluator that only scores positions (built-in, networks) the leaf
search is MCTS and dlshogi's rule picks the book moves. With an evaluator that
searches by itself (a USI engine's MultiPV analysis) its lines are used
directly: moves within the cutoff of the best line, count from its priors.
:func:`make_backend` runs :func:`expand_position` in this process, in
worker processes or in the actors of a Ray cluster, each with its own
evaluator, behind one :data:`ExpansionBackend` interface
(:class:`bookgen.workers.pool.TaskRunner`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cshogi

from bookgen.engines.factory import make_evaluator
from bookgen.engines.mcts import Mcts, MctsSettings
from bookgen.engines.protocols import Evaluation, Evaluator, EvaluatorBase
from bookgen.grow.book_moves import BookMoveChoice, choices_from_lines, select_book_moves
from bookgen.grow.settings import BookMoveRule
from bookgen.values import MATE_VALUE, value_to_cp
from bookgen.workers.cluster import ClusterSettings, RayRunner
from bookgen.workers.pool import LocalRunner, PoolRunner, TaskRunner

ExpansionSettings = tuple[MctsSettings, BookMoveRule]
"""The leaf search and the book-move rule of an expansion."""


@dataclass
class ExpansionResult:
    sfen: str                     # with move number
    choices: list[BookMoveChoice]
    value: int                    # the position's value for the side to move, cp
    win_rate: float
    visits: int
    evaluations: int
    eval_seconds: float
    seconds: float


class _TimedEvaluator(EvaluatorBase):
    """Counts the time spent inside the evaluator (the rest is our overhead)."""

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.seconds = 0.0

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        start = time.perf_counter()
        try:
            return self.inner.evaluate(boards)
        finally:
            self.seconds += time.perf_counter() - start


def expand_position(evaluator: Evaluator, sfen: str, settings: ExpansionSettings
                    ) -> ExpansionResult:
    start = time.perf_counter()
    mcts, rule = settings
    timed = _TimedEvaluator(evaluator)
    board = cshogi.Board(sfen)
    root = timed.evaluate([board])[0]
    evaluations = 1
    if not root.moves:
        choices: list[BookMoveChoice] = []
        visits = 0
    elif root.move_values is not None:
        choices = choices_from_lines(root, rule.win_rate_cutoff, rule.eval_coef)
        visits = root.nodes or 0
    else:
        search = Mcts(timed, mcts).search(board, root)
        choices = select_book_moves(search.moves, rule.visit_share_threshold,
                                    rule.win_rate_cutoff, rule.eval_coef, rule.min_visits)
        visits = search.playouts
        evaluations += search.evaluations
    win_rate = max((c.win_rate for c in choices), default=root.value if root.moves else 0.0)
    value = value_to_cp(win_rate, rule.eval_coef) if root.moves else -MATE_VALUE
    return ExpansionResult(sfen, choices, value, win_rate, visits, evaluations, timed.seconds,
                           time.perf_counter() - start)


ExpansionBackend = TaskRunner[str, ExpansionResult]
"""Runs expansions (tasks are sfens); results come back in any order."""


_worker_state: dict[str, Any] = {}


def _worker_init(spec: str, options: dict[str, Any], settings: ExpansionSettings) -> None:
    _worker_state["evaluator"] = make_evaluator(spec, **options)
    _worker_state["settings"] = settings


def _worker_expand(sfen: str) -> ExpansionResult:
    return expand_position(_worker_state["evaluator"], sfen, _worker_state["settings"])


def make_backend(spec: str, options: dict[str, Any], settings: ExpansionSettings,
                 workers: int, cluster: ClusterSettings | None = None) -> ExpansionBackend:
    """Expansions in this process (``workers`` 1), or in ``workers`` processes
    each with its own evaluator (engine or model), or in the actors of a Ray
    ``cluster`` (each with its own evaluator too)."""
    if cluster is not None:
        return RayRunner(cluster, _worker_expand, _worker_init, (spec, options, settings))
    if workers <= 1:
        evaluator = make_evaluator(spec, **options)
        return LocalRunner(lambda sfen: expand_position(evaluator, sfen, settings),
                           evaluator.close)
    return PoolRunner(workers, _worker_expand, _worker_init, (spec, options, settings))
