"""``bookgen refine minimax`` (to be written)."""
