"""Curriculum: turning the book into reinforcement-learning input.

- :mod:`bookgen.selfplay.starts`: ``bookgen starts``, start positions cut from
  the book (``roots.hcp``, usi, sfen and psfen lists);
- :mod:`bookgen.selfplay.games`: ``bookgen selfplay``, games from start
  positions, written as dlshogi hcpe training data (and CSA records);
- :mod:`bookgen.selfplay.train`: ``bookgen train``, a small CPU trainer for the
  dlshogi-shaped network.

The book-prior blending evaluator (dlshogi ``Use_Book_Policy``) is an engine:
:mod:`bookgen.engines.blend`; the policy-book and hcpe exports are
``bookgen export`` (:mod:`bookgen.bookfiles.exporter`).
"""
