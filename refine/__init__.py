"""Refinement of grown books.

Will hold the minimax propagation over the whole book graph (transposition
edges, repetitions, per-side draw values, NegaScout with trusted scores), the
alpha-beta re-search of book positions with USI engines or the built-in
search, and the mining of evaluation mistakes (dlshogi's ``diff_eval``).
"""
