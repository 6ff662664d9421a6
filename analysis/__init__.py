"""Measurement: balanced-position suites, engine matches and strength reports.

Will hold suite extraction from books and game records, the USI match runner
with rule adjudication, Ordo-style ratings with bootstrap errors, SPRT,
outcome-rate tests and HTML/Markdown reports with plots.
"""
