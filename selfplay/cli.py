"""``bookgen starts``: the command-line side of :mod:`bookgen.selfplay.starts`."""

from __future__ import annotations

import json
from typing import Any

import click

from bookgen.cli_support import reports_errors
from bookgen.store import DEFAULT_BOOK


@click.command("starts")
@click.option("-b", "--book", default=DEFAULT_BOOK, show_default=True,
              type=click.Path(dir_okay=False), help="The SQLite book file.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The file to write.")
@click.option("--format", "fmt", type=click.Choice(["usi", "sfen", "hcp", "psfen"]),
              default="usi", show_default=True,
              help="usi: 'startpos moves ...' along the shortest book path (else 'sfen ...'); "
                   "sfen: 'sfen ...' lines; hcp: dlshogi roots.hcp records; psfen: "
                   "YaneuraOu packed sfens.")
@click.option("--from", "source", type=click.Choice(["all", "leaves", "principal", "mistakes"]),
              default="all", show_default=True,
              help="Book positions with moves; those whose moves all leave the book; those "
                   "on the best lines of both sides from the initial position; those "
                   "flagged by 'refine mistakes'.")
@click.option("--min-ply", type=click.IntRange(0))
@click.option("--max-ply", type=click.IntRange(0))
@click.option("--max-value", type=click.IntRange(0),
              help="Keep positions whose best value is within this many cp of 0.")
@click.option("--side", type=click.Choice(["both", "black", "white"]), default="both",
              show_default=True, help="Side to move of the kept positions.")
@click.option("--min-count", type=click.IntRange(0),
              help="Keep positions whose moves' counts add up to at least this.")
@click.option("--count-percentile", type=click.FloatRange(0, 100),
              help="Keep positions at or above this percentile of that count "
                   "(dlshogi's csa_to_roots_hcp uses 99).")
@click.option("--weight", type=click.Choice(["none", "visits"]), default="none",
              show_default=True, help="visits: repeat positions in proportion to their "
                                      "visits (the median gives one copy).")
@click.option("--limit", type=click.IntRange(1), help="At most this many positions (sampled).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--values", type=click.Choice(["raw", "minimax"]), default="raw",
              show_default=True, help="Which book values --max-value uses (--from principal follows minimax values where refine stored them).")
@click.option("--principal-margin", type=click.IntRange(0), default=0, show_default=True,
              help="--from principal: follow moves within this many cp of the best, from the initial position and positions no book move reaches.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def starts_command(**kwargs: Any) -> None:
    """Write self-play start positions chosen from the book (duplicates removed)."""
    from bookgen.selfplay.starts import make_starts

    as_json = kwargs.pop("as_json")
    output = kwargs.pop("output")
    book = kwargs.pop("book")
    summary = make_starts(output, book, **kwargs)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(format_starts_summary(summary))


def format_starts_summary(summary: dict[str, Any]) -> str:
    """The one-line report of ``bookgen starts``. For usi lines it says how many
    start from the initial position; the other formats hold positions only."""
    plies = ", ".join(f"{ply}: {n}" for ply, n in summary["by_ply"].items())
    lines = "lines" if summary["format"] in ("usi", "sfen") else "records"
    text = f"{summary['file']}: {summary['written']} {lines} for {summary['positions']} positions"
    if summary["format"] == "usi" and summary["positions"]:
        reached = summary["from_startpos"]
        others = summary["positions"] - reached
        if not others:
            text += " (all as 'startpos moves ...')"
        elif not reached:
            text += (" (all as 'sfen ...': none is reached from the initial position by book "
                     "moves)")
        else:
            text += (f" ({reached} as 'startpos moves ...', {others} as 'sfen ...': not "
                     "reached from the initial position by book moves)")
    if summary["value_min"] is not None:
        text += f"; values {summary['value_min']} .. {summary['value_max']}"
    return text + (f"; by ply {{{plies}}}" if plies else "")
