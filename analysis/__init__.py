"""Measurement: balanced-position suites, engine matches and strength statistics.

- :mod:`analysis.suites`, :mod:`analysis.records`: ``bookgen suite``, from a
  book (dlshogi's make_gokaku_sfen rule) or from CSA/KIF game records
  (csa_to_gokakusfen);
- :mod:`analysis.schedule`, :mod:`analysis.players`, :mod:`analysis.match`:
  ``bookgen match``, colour-swapped pairs under runner-enforced rules
  (:mod:`bookgen.rules`), written to results files (:mod:`analysis.results`);
- :mod:`analysis.ratings`, :mod:`analysis.bayeselo`: ``bookgen rate``
  (Ordo's model with bootstrap errors; BayesElo);
- :mod:`analysis.pairstats`: Elo/nElo/LOS and the pentanomial GSPRT
  (``bookgen sprt``, ``match --sprt``);
- :mod:`analysis.outcomes`: ``bookgen outcomes``, contingency tests of how
  games end;
- :mod:`analysis.report`, :mod:`analysis.report_book`, :mod:`analysis.plots`,
  :mod:`analysis.document`: ``bookgen report``.
"""
