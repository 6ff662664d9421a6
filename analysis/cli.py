"""``bookgen suite``: the command-line side of :mod:`analysis.suites`."""

from __future__ import annotations

import json

import click

from bookgen.cli_support import reports_errors
from bookgen.store import DEFAULT_BOOK


@click.command("suite")
@click.option("-b", "--book", default=DEFAULT_BOOK, show_default=True,
              type=click.Path(dir_okay=False), help="The SQLite book file.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The 'startpos moves ...' file to write.")
@click.option("--max-value", type=click.IntRange(0), default=100, show_default=True,
              help="Keep positions whose best book value is within this many cp of 0.")
@click.option("--min-ply", type=click.IntRange(1), default=1, show_default=True,
              help="Plies counted from the initial position (which is ply 1).")
@click.option("--max-ply", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--values", type=click.Choice(["raw", "minimax"]), default="raw",
              show_default=True, help="Which book values decide the balance.")
@click.option("--limit", type=click.IntRange(1), help="At most this many positions (sampled).")
@click.option("--per-line-cap", type=click.IntRange(1),
              help="At most this many positions sharing the same first --cap-plies moves.")
@click.option("--cap-plies", type=click.IntRange(1), default=4, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def suite_command(book: str, output: str, max_value: int, min_ply: int, max_ply: int,
                  values: str, limit: int | None, per_line_cap: int | None, cap_plies: int,
                  seed: int, as_json: bool) -> None:
    """Cut a suite of balanced positions from the book (dlshogi's make_gokaku_sfen:
    breadth-first, |best value| <= --max-value, lines whose best moves repeat
    within 36 plies left out)."""
    from analysis.suites import make_suite

    summary = make_suite(output, book, max_value=max_value, min_ply=min_ply, max_ply=max_ply,
                         values=values, limit=limit, per_line_cap=per_line_cap,
                         cap_plies=cap_plies, seed=seed)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    plies = ", ".join(f"{ply}: {n}" for ply, n in summary["by_ply"].items())
    click.echo(f"{summary['file']}: {summary['positions']} positions; by ply {{{plies}}}")
