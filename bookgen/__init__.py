"""bookgen: grow, refine and use shogi opening books.

This package holds the book itself: the SQLite store (:mod:`bookgen.store`),
positions and moves (:mod:`bookgen.position`), the book file formats
(:mod:`bookgen.formats`), the operations on whole books (import, export,
merge, stats, show) and the command line (:mod:`bookgen.cli`). Later parts
add the evaluators and the MCTS-driven expander here; refinement, curriculum
and measurement live in the sibling packages ``refine``, ``selfplay`` and
``analysis``.
"""

__version__ = "0.1.0"
