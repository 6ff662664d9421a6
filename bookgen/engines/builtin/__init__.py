"""The built-in engine, which needs nothing installed: the alpha-beta search
(:mod:`~bookgen.engines.builtin.alphabeta`) and the ``builtin`` evaluator on top of it
(:mod:`~bookgen.engines.builtin.analyser`)."""
