"""``bookgen report``: the command-line side of :mod:`bookgen.analysis.report`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bookgen.cli_support import reports_errors
from bookgen.errors import BookgenError


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The HTML file to write (self-contained: CSS and figures embedded).")
@click.option("-b", "--book", default=None, type=click.Path(dir_okay=False),
              help="Also describe this bookgen book (opened read-only).")
@click.option("--markdown", default=None, type=click.Path(dir_okay=False),
              help="Also write a Markdown twin here, its figures in <stem>_files/ next to it.")
@click.option("--sprt", "sprt_tests", multiple=True, metavar="A,B,ELO0,ELO1",
              help="Show the SPRT state of A, the engine under test, against B for H0 "
                   "ELO0 / H1 ELO1 (normalised Elo, alpha = beta = 0.05); repeatable. The "
                   "SPRTs of 'bookgen match --sprt' recorded in RESULTS are shown too.")
@click.option("-W", "--white-advantage", is_flag=True,
              help="Fit the white (sente) advantage in the ratings (Ordo -W).")
@click.option("-D", "--draw-rate", is_flag=True,
              help="Fit the draw rate between equal opponents (Ordo -D).")
@click.option("-s", "--simulations", type=click.IntRange(0), default=1000, show_default=True,
              help="Parametric bootstrap runs for the rating errors (0 = none).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Random seed of the simulations.")
@click.option("--title", default=None, help="Title of the report.  [default: bookgen match "
                                            "report]")
@click.option("--json", "as_json", is_flag=True, help="Print a summary as JSON.")
@reports_errors
def report_command(results: tuple[str, ...], output: str, book: str | None,
                   markdown: str | None, sprt_tests: tuple[str, ...], white_advantage: bool,
                   draw_rate: bool, simulations: int, seed: int, title: str | None,
                   as_json: bool) -> None:
    """Write an HTML report on the games of RESULTS (results .sqlite and PGN files).

    The report holds the Ordo rating table, the pairwise Elo/LOS matrix, the
    SPRT state of each --sprt, the outcome-rate tests, plots (ratings, W/D/L,
    score by colour, game length) and, with --book, the book's growth, ply
    and value distributions and the mistakes refine found.

    \b
    Examples:
      bookgen report match.sqlite -o report.html
      bookgen report match.sqlite -b book.sqlite -o report.html --markdown report.md
      bookgen report match.sqlite -o r.html --sprt new,base,0,2
    """
    from bookgen.analysis.document import check_output
    from bookgen.analysis.report import build_report, report_summary, write_html, write_markdown

    if simulations == 1:
        raise BookgenError("--simulations must be 0 or at least 2")
    # Refuse a bad output before the simulations, not after.
    inputs = [*results, *([book] if book else [])]
    for path in (output, markdown):
        if path is not None:
            check_output(path, inputs)
    if markdown is not None and Path(markdown).resolve() == Path(output).resolve():
        raise BookgenError("--markdown and -o name the same file")
    report = build_report(results, book=book, sprt_tests=sprt_tests,
                          white_advantage=white_advantage, draw_rate=draw_rate,
                          simulations=simulations, seed=seed, title=title)
    write_html(report, output)
    if markdown is not None:
        write_markdown(report, markdown)
    if as_json:
        summary = report_summary(report)
        summary["html"] = output
        summary["markdown"] = markdown
        click.echo(json.dumps(summary, indent=2))
        return
    written = output + (f" and {markdown}" if markdown else "")
    click.echo(f"{written}: {report.games} games, {len(report.players)} players, "
               f"{len(report.figures)} figures")
