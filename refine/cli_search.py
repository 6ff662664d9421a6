"""``bookgen refine search`` and ``bookgen refine mistakes`` (to be written)."""
