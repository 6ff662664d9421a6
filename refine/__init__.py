"""Refinement of grown books (``bookgen refine``).

- :mod:`bookgen.refine.minimax`: ``refine minimax``, minimax values over the
  whole book graph (:mod:`bookgen.refine.minimax_graph`: positions with moves,
  transposition edges included), solved exactly by
  :mod:`bookgen.refine.retrograde` (repetitions, perpetual checks, per-side
  draw values) or by dlshogi's NegaScout with trusted scores
  (:mod:`bookgen.refine.negascout`);
- :mod:`bookgen.refine.book_search`: ``refine search``, the alpha-beta
  re-search of book positions with a USI engine or the built-in search;
- :mod:`bookgen.refine.mistakes`: ``refine mistakes``, the positions where
  book and engine disagree (dlshogi's ``diff_eval``), optionally extended
  and searched again (``--iterate``);
- :mod:`bookgen.refine.settings`: the settings of ``refine search`` and
  ``refine mistakes`` (loads neither numpy nor cshogi: the CLI reads its
  defaults).
"""
