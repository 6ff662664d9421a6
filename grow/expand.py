"""Expanding one position: the leaf search and the choice of book moves.

With an evaluator that only scores positions (built-in, networks) the leaf
search is MCTS and dlshogi's rule picks the book moves. With an evaluator that
searches by itself (a USI engine's MultiPV analysis) its lines are used
directly: moves within the cutoff of the best line, count from its priors.
:func:`make_backend` runs :func:`expand_positions` in this process, in
worker processes or in the actors of a Ray cluster, each with its own
evaluator, behind one :data:`ExpansionBackend` interface
(:class:`bookgen.workers.pool.TaskRunner`). A worker expands several
positions at once (``--parallel-searches``): their searches run interleaved
in one thread (:func:`expanding` is an expansion as a resumable search) and
their leaves go to the evaluator together
(:class:`bookgen.engines.batching.SearchBatcher`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import cshogi

from bookgen.engines.batching import SearchBatcher, search_batch
from bookgen.engines.factory import make_evaluator
from bookgen.engines.mcts import Mcts, MctsSettings, SearchSteps
from bookgen.engines.protocols import Evaluation, Evaluator, EvaluatorBase
from bookgen.grow.book_moves import BookMoveChoice, choices_from_lines, select_book_moves
from bookgen.grow.settings import BookMoveRule
from bookgen.values import MATE_VALUE, value_to_cp
from bookgen.workers.cluster import ClusterSettings, RayRunner
from bookgen.workers.pool import GroupedRunner, LocalRunner, PoolRunner, TaskRunner

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
    batches: int = 0              # evaluator calls (shared with the other searches of a group)


def expanding(sfen: str, settings: ExpansionSettings) -> SearchSteps[ExpansionResult]:
    """The expansion of ``sfen`` as a resumable search
    (:data:`bookgen.engines.mcts.SearchSteps`): the root, then the MCTS
    leaves. Its timings are left 0 (the caller's)."""
    mcts, rule = settings
    board = cshogi.Board(sfen)
    root = (yield [board])[0]
    evaluations = 1
    if not root.moves:
        choices: list[BookMoveChoice] = []
        visits = 0
    elif root.move_values is not None:
        choices = choices_from_lines(root, rule.win_rate_cutoff, rule.eval_coef)
        visits = root.nodes or 0
    else:
        tree = Mcts(_NoEvaluator(), mcts)
        search = yield from tree.searching(board, root)
        choices = select_book_moves(search.moves, rule.visit_share_threshold,
                                    rule.win_rate_cutoff, rule.eval_coef, rule.min_visits)
        visits = search.playouts
        evaluations += search.evaluations
    win_rate = max((c.win_rate for c in choices), default=root.value if root.moves else 0.0)
    value = value_to_cp(win_rate, rule.eval_coef) if root.moves else -MATE_VALUE
    return ExpansionResult(sfen, choices, value, win_rate, visits, evaluations, 0.0, 0.0)


class _NoEvaluator(EvaluatorBase):
    """The evaluator of a search driven from outside (never called)."""

    spec = "none"

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        raise AssertionError("a resumable search does not call its evaluator")


def expand_positions(evaluator: Evaluator, sfens: Sequence[str], settings: ExpansionSettings,
                     searches: int | None = None) -> list[ExpansionResult]:
    """Expand ``sfens`` (in groups of ``searches`` at once, None: all of
    them), their searches' leaves evaluated together in batches of up to
    ``settings``' MCTS batch size (:class:`bookgen.engines.batching.SearchBatcher`);
    each search gathers :func:`bookgen.engines.batching.search_batch` leaves.

    The results are those of expanding the positions one after another with
    that search batch. The group's time, its time in the evaluator and its
    evaluator calls (``batches``) are shared out over its results by their
    evaluations (the batches all on the first)."""
    mcts, rule = settings
    group = len(sfens) if searches is None else max(1, searches)
    per_search = replace(mcts, batch_size=search_batch(mcts.batch_size, group))
    results: list[ExpansionResult] = []
    for first in range(0, len(sfens), group):
        start = time.perf_counter()
        batcher: SearchBatcher[ExpansionResult] = SearchBatcher(evaluator, mcts.batch_size)
        done = batcher.run([expanding(sfen, (per_search, rule))
                            for sfen in sfens[first:first + group]])
        seconds = time.perf_counter() - start
        stats = batcher.stats
        total = sum(result.evaluations for result in done) or 1
        for result in done:
            share = result.evaluations / total
            result.eval_seconds = stats.seconds * share
            result.seconds = seconds * share
        done[0].batches = stats.calls
        results.extend(done)
    return results


def expand_position(evaluator: Evaluator, sfen: str, settings: ExpansionSettings
                    ) -> ExpansionResult:
    """Expand one position (:func:`expand_positions` of one)."""
    return expand_positions(evaluator, [sfen], settings)[0]


ExpansionBackend = TaskRunner[str, ExpansionResult]
"""Runs expansions (tasks are sfens); results come back in any order."""


_worker_state: dict[str, Any] = {}


def _worker_init(spec: str, options: dict[str, Any], settings: ExpansionSettings) -> None:
    _worker_state["evaluator"] = make_evaluator(spec, **options)
    _worker_state["settings"] = settings


def _worker_expand(sfens: list[str]) -> list[ExpansionResult]:
    return expand_positions(_worker_state["evaluator"], sfens, _worker_state["settings"])


def make_backend(spec: str, options: dict[str, Any], settings: ExpansionSettings,
                 workers: int, cluster: ClusterSettings | None = None,
                 searches: int = 1) -> ExpansionBackend:
    """Expansions in this process (``workers`` 1), or in ``workers`` processes
    each with its own evaluator (engine or model), or in the actors of a Ray
    ``cluster`` (each with its own evaluator too). Each worker expands
    ``searches`` positions at once (:func:`expand_positions`): positions go
    to the workers in groups of that many (:class:`bookgen.workers.pool.GroupedRunner`)."""
    groups: TaskRunner[list[str], list[ExpansionResult]]
    if cluster is not None:
        groups = RayRunner(cluster, _worker_expand, _worker_init, (spec, options, settings))
    elif workers <= 1:
        evaluator = make_evaluator(spec, **options)
        groups = LocalRunner(lambda sfens: expand_positions(evaluator, sfens, settings),
                             evaluator.close)
    else:
        groups = PoolRunner(workers, _worker_expand, _worker_init, (spec, options, settings))
    return GroupedRunner(groups, searches)
