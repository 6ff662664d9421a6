"""The grow stage (installed as ``bookgen.grow``): the MCTS-driven book expander.

:func:`grow` (:mod:`bookgen.grow.run`) takes a :class:`GrowSettings`
(:mod:`bookgen.grow.settings`), walks the book in memory
(:mod:`bookgen.grow.book_graph`) with a strategy (:mod:`bookgen.grow.strategies`)
to pick positions, expands them (:mod:`bookgen.grow.expand`: the leaf search,
and :mod:`bookgen.grow.book_moves`: which moves become book moves) and writes
them to the book with values propagated to their ancestors.
"""

from bookgen.grow.run import GrowSummary, grow
from bookgen.grow.settings import (
    BookMoveRule,
    EvaluatorSettings,
    GrowBudget,
    GrowSettings,
    WalkSettings,
)

__all__ = ["BookMoveRule", "EvaluatorSettings", "GrowBudget", "GrowSettings", "GrowSummary",
           "WalkSettings", "grow"]
