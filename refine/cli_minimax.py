"""``bookgen refine minimax``: a thin layer over :func:`bookgen.refine.minimax.refine_minimax`."""

from __future__ import annotations

import json

import click

from bookgen.cli_support import reports_errors, wait_option
from bookgen.store import DEFAULT_BOOK
from bookgen.refine.cli import refine_group

book_option = click.option(
    "-b", "--book", default=DEFAULT_BOOK, show_default=True,
    type=click.Path(dir_okay=False), help="The SQLite book file.")


def format_summary(summary: dict) -> str:
    """One line: what the run did and how long it took."""
    seconds = summary["seconds"]
    cycles = (f"{summary['cycle_components']} cycle components with "
              f"{summary['positions_in_cycles']} positions")
    return (f"{summary['book']}: run {summary['run_id']}: {summary['method']} minimax over "
            f"{summary['positions']} positions, {summary['edges']} edges "
            f"({summary['transposition_edges']} transpositions, "
            f"{summary['transposition_rows_added']} new), {summary['leaf_moves']} leaf moves, "
            f"{cycles}; {seconds['total']:.1f} s (graph {seconds['graph']:.1f}, "
            f"propagation {seconds['propagate']:.1f}, write {seconds['write']:.1f})")


@refine_group.command("minimax")
@book_option
@click.option("--draw-value-black", type=click.IntRange(0, 1000), default=500,
              show_default=True,
              help="A repetition's worth to black, per mille of a win (dlshogi "
                   "Book_Draw_Value_Black; 500 = 0 cp).")
@click.option("--draw-value-white", type=click.IntRange(0, 1000), default=500,
              show_default=True, help="The same for white.")
@click.option("--method", type=click.Choice(["retrograde", "negascout"]), default="retrograde",
              show_default=True,
              help="retrograde: exact values over the whole graph (peta_shock's idea); "
                   "negascout: dlshogi's NegaScout from every position with trusted scores.")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="Processes generating moves for the graph (default: up to 2).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@wait_option
@reports_errors
def minimax_command(book: str, draw_value_black: int, draw_value_white: int, method: str,
                    workers: int | None, as_json: bool, wait: bool) -> None:
    """Minimax over the whole book graph, transpositions included.

    Every legal move from a book position into a book position is an edge.
    Leaf moves keep their stored value; a position is worth its best move;
    a repetition is worth the mover's draw value, and perpetual check loses
    for the checking side. On equal values a side doing better than its draw
    value prefers the shorter line, a side doing worse the longer one (a line
    ending in a repetition counts as endless; its depth is stored as NULL).

    Values and depths go to the minimax_value/minimax_depth columns of
    positions and moves (value and eval_value are never changed); legal
    moves into book positions that the book does not store are added as
    moves with count 0 and no value, for 'bookgen export --values minimax'.
    Everything is written in one transaction with its runs row.
    """
    from bookgen.refine.minimax import refine_minimax

    summary = refine_minimax(book, draw_value_black=draw_value_black,
                             draw_value_white=draw_value_white, method=method, workers=workers,
                             wait=wait)
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))
