"""Measurement: balanced-position suites, engine matches and strength reports.

Holds suite extraction from books (:mod:`analysis.suites`, ``bookgen
suite``). Still to come: suites from game records, the USI match runner with
rule adjudication (building on :mod:`bookgen.rules` and :mod:`bookgen.usi`),
Ordo-style ratings with bootstrap errors, SPRT, outcome-rate tests and
HTML/Markdown reports with plots.
"""
