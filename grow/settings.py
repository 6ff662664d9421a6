"""What :func:`bookgen.grow.grow` does, as one frozen settings object.

:class:`GrowSettings` nests the evaluator (:class:`EvaluatorSettings`), the
budget (:class:`GrowBudget`), the roots (:class:`bookgen.formats.positions.Roots`),
the walk (:class:`WalkSettings`), the leaf search
(:class:`bookgen.engines.mcts.MctsSettings`, draw values per mille in
:class:`bookgen.values.DrawValues`) and the rule that makes book moves
(:class:`BookMoveRule`). Every class validates its fields when it is made
(:class:`bookgen.errors.SettingsError` names the field) and pickles, so
worker processes get the settings as they are. :meth:`GrowSettings.params`
is the run's ``runs.params``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bookgen.engines.mcts import MctsSettings
from bookgen.engines.spec import parse_spec
from bookgen.errors import BookgenError, SettingsError, at_least
from bookgen.formats.positions import Roots
from bookgen.values import EVAL_COEF
from bookgen.workers.cluster import ClusterSettings

__all__ = ["COLORS", "STRATEGIES", "BookMoveRule", "EvaluatorSettings", "GrowBudget",
           "GrowSettings", "WalkSettings"]

STRATEGIES = ("dlshogi", "book-mcts", "dropout")
COLORS = ("both", "black", "white")


@dataclass(frozen=True)
class EvaluatorSettings:
    """The evaluator of the expansions: a spec (``builtin``, ``usi:COMMAND``,
    ``torch:MODEL``, ``onnx:MODEL``, ``blend:BOOK:INNER``) and the options its
    constructor takes (:func:`bookgen.engines.factory.make_evaluator`)."""

    spec: str = "builtin"
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))

    @property
    def is_network(self) -> bool:
        return parse_spec(self.spec).is_network

    def options_for(self, workers: int) -> dict[str, Any]:
        """The options each of ``workers`` processes uses: several network
        evaluators share the cores (``threads``) instead of each taking all."""
        options = dict(self.options)
        if workers > 1 and self.is_network:
            options.setdefault("threads", max(1, (os.cpu_count() or 1) // workers))
        return options

    def options_on(self, cluster: ClusterSettings) -> dict[str, Any]:
        """The options of each actor on a Ray ``cluster``: a network evaluator takes
        the CPUs its actor asked for (``threads``), not the driver's share."""
        options = dict(self.options)
        if self.is_network:
            options.setdefault("threads", max(1, int(cluster.actor_options()["num_cpus"])))
        return options


@dataclass(frozen=True)
class GrowBudget:
    """When a run stops: after ``trials`` walks, ``positions`` expanded positions
    or ``seconds_s`` seconds, whichever comes first. None of them given: 100
    positions."""

    trials: int | None = None
    positions: int | None = None
    seconds_s: float | None = None

    def __post_init__(self) -> None:
        if self.trials is None and self.positions is None and self.seconds_s is None:
            object.__setattr__(self, "positions", 100)
        at_least("budget.trials", self.trials)
        at_least("budget.positions", self.positions)
        if self.seconds_s is not None and not self.seconds_s > 0:
            raise SettingsError("budget.seconds_s", "must be more than 0")


@dataclass(frozen=True)
class WalkSettings:
    """How the strategies walk the book (:mod:`bookgen.grow.strategies`)."""

    max_ply: int = 64                       # plies walked from the root
    eval_threshold_cp: int = 400            # stop where |value| exceeds this
    opponent_temperature: float = 1.0       # opponent sampling count ** (1 / T); book-mcts priors
    color: str = "both"                     # whose moves follow the minimax best (dlshogi)
    dropout_alpha_plies_per_pawn: float = 50.0  # drop-out: priority per pawn of deviation

    def __post_init__(self) -> None:
        if self.color not in COLORS:
            raise SettingsError("walk.color", f"must be both, black or white, not {self.color!r}")
        at_least("walk.max_ply", self.max_ply)
        at_least("walk.eval_threshold_cp", self.eval_threshold_cp, 0)
        if not self.opponent_temperature > 0:
            raise SettingsError("walk.opponent_temperature", "must be more than 0")


@dataclass(frozen=True)
class BookMoveRule:
    """dlshogi's rule for which searched moves become book moves
    (:func:`bookgen.grow.book_moves.select_book_moves`)."""

    visit_share_threshold: float = 0.005  # more than this share of the root's visits
    win_rate_cutoff: float = 0.015        # a win rate within this of the best move's
    min_visits: int = 5                   # and at least this many visits
    eval_coef: float = EVAL_COEF          # win rate <-> cp

    def __post_init__(self) -> None:
        for name in ("visit_share_threshold", "win_rate_cutoff"):
            if not 0 <= getattr(self, name) <= 1:
                raise SettingsError(f"book_moves.{name}", "must be between 0 and 1")
        at_least("book_moves.min_visits", self.min_visits)


@dataclass(frozen=True)
class GrowSettings:
    """Everything a grow run does (see ``bookgen grow --help``). ``mcts.batch_size``
    is the evaluator's batch (networks: the model's); the CLI's default for it
    is :func:`bookgen.engines.factory.default_batch_size` of the evaluator.
    ``parallel_searches``: positions each worker expands at once, their
    searches' leaves evaluated together; each search gathers
    ``mcts.batch_size / parallel_searches`` leaves (rounded up,
    :func:`bookgen.engines.batching.search_batch`) before it waits."""

    evaluator: EvaluatorSettings = field(default_factory=EvaluatorSettings)
    strategy: str = "dlshogi"
    budget: GrowBudget = field(default_factory=GrowBudget)
    roots: Roots = field(default_factory=Roots)
    walk: WalkSettings = field(default_factory=WalkSettings)
    mcts: MctsSettings = field(default_factory=MctsSettings)
    book_moves: BookMoveRule = field(default_factory=BookMoveRule)
    workers: int = 1
    seed: int = 0
    cluster: ClusterSettings | None = None   # expansions in the actors of a Ray cluster
    parallel_searches: int = 1               # positions each worker expands at once

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise BookgenError(f"unknown strategy {self.strategy!r} "
                               f"(choose from {', '.join(STRATEGIES)})")
        at_least("workers", self.workers)
        at_least("parallel_searches", self.parallel_searches)

    def evaluator_options(self) -> dict[str, Any]:
        """The evaluator's options in each worker (local or on the cluster)."""
        if self.cluster is not None:
            return self.evaluator.options_on(self.cluster)
        return self.evaluator.options_for(self.workers)

    def params(self) -> dict[str, Any]:
        """The run's ``runs.params``: the names and values grow has always stored
        (draw values per mille since issue 12)."""
        budget, walk, rule = self.budget, self.walk, self.book_moves
        return {"evaluator": self.evaluator.spec,
                "evaluator_options": self.evaluator_options(),
                "strategy": self.strategy, "playouts": self.mcts.playouts,
                "batch_size": self.mcts.batch_size, "trials": budget.trials,
                "positions": budget.positions, "seconds": budget.seconds_s,
                "color": walk.color, "roots": self.roots.label, "max_ply": walk.max_ply,
                "eval_threshold": walk.eval_threshold_cp,
                "temperature": walk.opponent_temperature,
                "draw_value_black": self.mcts.draws.black,
                "draw_value_white": self.mcts.draws.white,
                "visit_threshold": rule.visit_share_threshold, "cutoff": rule.win_rate_cutoff,
                "min_visits": rule.min_visits, "workers": self.workers, "seed": self.seed,
                **({"cluster": self.cluster.params()} if self.cluster is not None else {}),
                **({"parallel_searches": self.parallel_searches}
                   if self.parallel_searches != 1 else {})}
