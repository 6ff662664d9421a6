"""USI engines: the protocol as text (:mod:`~bookgen.engines.usi.protocol`), the
engine process (:mod:`~bookgen.engines.usi.client`) and engines as evaluators
(:mod:`~bookgen.engines.usi.analyser`)."""
