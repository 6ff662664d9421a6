"""Measurement: balanced-position suites, engine matches and strength statistics.

- :mod:`bookgen.analysis.suites`, :mod:`bookgen.analysis.record_suites`: ``bookgen suite``,
  from a book (dlshogi's make_gokaku_sfen rule) or from CSA/KIF game records
  (csa_to_gokakusfen; the records are read by :mod:`bookgen.formats.records`);
- :mod:`bookgen.analysis.schedule`, :mod:`bookgen.analysis.match`: ``bookgen match``,
  colour-swapped pairs of players (:mod:`bookgen.engines.players`) under
  runner-enforced rules (:mod:`bookgen.play.rules`), written to results files
  (:mod:`bookgen.store.results`);
- :mod:`bookgen.analysis.results`: games read from results files and PGN files
  (:mod:`bookgen.formats.records` reads and writes PGN);
- :mod:`bookgen.analysis.ratings`, :mod:`bookgen.analysis.bayeselo`: ``bookgen rate``
  (Ordo's model with bootstrap errors; BayesElo);
- :mod:`bookgen.analysis.pairstats`: Elo/nElo/LOS and the pentanomial GSPRT
  (``bookgen sprt``, ``match --sprt``);
- :mod:`bookgen.analysis.outcomes`: ``bookgen outcomes``, contingency tests of how
  games end;
- :mod:`bookgen.analysis.report`, :mod:`bookgen.analysis.report_book`,
  :mod:`bookgen.analysis.plots`, :mod:`bookgen.analysis.document`: ``bookgen report``.
"""
