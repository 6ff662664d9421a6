"""bookgen: grow, refine and use shogi opening books.

This package is the core: the SQLite store (:mod:`bookgen.store`), positions
and moves (:mod:`bookgen.position`), the file formats
(:mod:`bookgen.formats`: books, training data, position files, game records),
the optional dependencies (:mod:`bookgen.extras`), the operations on whole books
(:mod:`bookgen.bookfiles`: import, export, merge, stats, show), the engines
(:mod:`bookgen.engines`: evaluators, the built-in search, the USI client, the
leaf search), game rules and clocks (:mod:`bookgen.play`), worker processes
(:mod:`bookgen.workers`) and the command line (:mod:`bookgen.cli`). The
stages live in their own folders beside it and are installed inside it:
``grow/`` (:mod:`bookgen.grow`, the MCTS-driven expander), ``refine/``
(:mod:`bookgen.refine`), ``selfplay/`` (:mod:`bookgen.selfplay`, curriculum)
and ``analysis/`` (:mod:`bookgen.analysis`, measurement).
"""

__version__ = "0.1.0"
