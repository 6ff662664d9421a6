"""Everything that thinks: the engines layer.

- :mod:`bookgen.engines.protocols`: the two interfaces, "evaluate positions"
  (``Evaluator``: a batch of positions in, priors, values and best lines out,
  used by grow, MCTS, blend and refine search) and "choose a move" (``Player``:
  a ``MoveChoice``);
- :mod:`bookgen.engines.spec`: the one grammar of engine specs;
- :mod:`bookgen.engines.settings`: the one engine-settings type (spec,
  options, limits, timeout, restarts) and refine search's analysis key;
- :mod:`bookgen.engines.factory`: the evaluator named by a spec string
  (``builtin``, ``usi:COMMAND``, ``torch:PATH``, ``onnx:PATH``,
  ``blend:BOOK:INNER``) or by settings, and the MCTS batch-size defaults;
- :mod:`bookgen.engines.builtin`: the built-in alpha-beta search and its evaluator;
- :mod:`bookgen.engines.usi`: the USI protocol, the engine client and USI evaluators;
- :mod:`bookgen.engines.restart`: starting USI engines and restarting them when
  they fail (one policy for every use), their go limits;
- :mod:`bookgen.engines.network`: dlshogi-shaped networks (features without
  torch, the torch model, the torch and ONNX evaluators);
- :mod:`bookgen.engines.blend`: book priors blended into another evaluator;
- :mod:`bookgen.engines.mcts`: PUCT Monte-Carlo tree search over an evaluator;
- :mod:`bookgen.engines.players`: the player a player spec names (``builtin``
  alpha-beta in :mod:`bookgen.engines.builtin.player`, ``usi:COMMAND`` in
  :mod:`bookgen.engines.usi.player`, ``mcts:EVALUATOR`` in
  :mod:`bookgen.engines.mcts_player`), opened from
  :mod:`bookgen.engines.player_settings`.
"""
