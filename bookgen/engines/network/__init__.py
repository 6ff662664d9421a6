"""dlshogi-shaped networks: inputs and policy labels without torch
(:mod:`~bookgen.engines.network.features`), where a network runs
(:mod:`~bookgen.engines.network.device`), bookgen's torch model and its files
(:mod:`~bookgen.engines.network.model`), dlshogi's own model files and network
names (:mod:`~bookgen.engines.network.dlshogi_models`,
:mod:`~bookgen.engines.network.naming`), the ``torch:``/``onnx:`` evaluators
(:mod:`~bookgen.engines.network.analyser`) and their speed by batch size
(:mod:`~bookgen.engines.network.bench`)."""
