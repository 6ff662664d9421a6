"""dlshogi-shaped networks: inputs and policy labels without torch
(:mod:`~bookgen.engines.network.features`), the torch model and its files
(:mod:`~bookgen.engines.network.model`), and the ``torch:``/``onnx:`` evaluators
(:mod:`~bookgen.engines.network.analyser`)."""
