"""``bookgen refine search`` and ``bookgen refine mistakes``.

Thin click layers over :func:`bookgen.refine.search.search` and
:func:`bookgen.refine.mistakes.mistakes`; the work is imported only when a command runs.
"""

from __future__ import annotations

import json

import click

from bookgen.cli_support import (DEFAULT_TIMEOUT_HELP, exit_if_interrupted, reports_errors,
                                 wait_option)
from bookgen.engines.factory import batch_size_help
from bookgen.files import atomic_write
from bookgen.store import DEFAULT_BOOK
from bookgen.refine.cli import refine_group

_SELECTIONS = ("all", "leaves", "principal", "visits")

book_option = click.option(
    "-b", "--book", default=DEFAULT_BOOK, show_default=True,
    type=click.Path(dir_okay=False), help="The SQLite book file.")


@refine_group.command("search")
@book_option
@click.option("--engine", default="builtin", show_default=True,
              help="builtin (bookgen's alpha-beta search) or usi:COMMAND (any USI engine).")
@click.option("--select", type=click.Choice(_SELECTIONS), default="all", show_default=True,
              help="all: positions with book moves; leaves: those whose moves lead to no "
                   "position with moves; principal: reached from the roots along every move "
                   "within --margin of the best, for both sides; visits: expanded with at "
                   "least --min-visits visits.")
@click.option("--min-visits", type=click.IntRange(0), help="--select visits: the minimum.")
@click.option("--margin", type=click.IntRange(0), default=50, show_default=True,
              help="--select principal: follow moves within this many cp of the best "
                   "(minimax values when present, else the book's values).")
@click.option("--nodes", type=click.IntRange(1), help="go nodes N (builtin: node budget).")
@click.option("--byoyomi", type=click.IntRange(1),
              help="usi: go byoyomi MS (the default, 1000, without any limit).")
@click.option("--movetime", type=click.IntRange(1), help="usi: go movetime MS.")
@click.option("--depth", type=click.IntRange(1),
              help="go depth N (builtin: default 4 with a 40000-node budget).")
@click.option("--engine-option", "engine_options", multiple=True, metavar="NAME=VALUE",
              help="usi: setoption for the engine (repeatable), e.g. BookDepth=0.")
@click.option("--engine-timeout", type=click.FloatRange(0, min_open=True),
              help="usi: seconds to wait for one search before restarting the engine. "
                   + DEFAULT_TIMEOUT_HELP)
@click.option("--retries", type=click.IntRange(0), default=2, show_default=True,
              help="Engine restarts per position before it is counted as failed.")
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="Engine processes searching different positions at once.")
@click.option("--limit", type=click.IntRange(1), help="Search at most N positions in this run.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@wait_option
@reports_errors
def search_command(book: str, engine: str, select: str, min_visits: int | None, margin: int,
                   nodes: int | None, byoyomi: int | None, movetime: int | None,
                   depth: int | None, engine_options: tuple[str, ...],
                   engine_timeout: float | None, retries: int, workers: int,
                   limit: int | None, as_json: bool, wait: bool) -> None:
    """Re-search book positions with an alpha-beta engine and store the analyses
    (score for the side to move, mate, bound, depth, nodes, best move, PV).

    Resumable: positions already analysed with the same engine, options and
    limits are skipped, every analysis is committed at once; Ctrl-C stops at
    once, dropping the searches in flight (exit code 130). A position the
    engine keeps failing on is counted as failed and skipped; an engine that
    fails on the first 2 positions, on 10 in a row or on all of them stops
    the run (exit code 2).
    """
    from bookgen.engines.usi.analyser import parse_options
    from bookgen.refine.search import search

    options = parse_options(list(engine_options))
    summary = search(book, engine=engine, engine_options=options, nodes=nodes,
                     byoyomi=byoyomi, movetime=movetime, depth=depth, select=select,
                     min_visits=min_visits, margin=margin, workers=workers, limit=limit,
                     engine_timeout=engine_timeout, retries=retries, wait=wait)
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
    else:
        click.echo(f"{book}: run {summary.run_id} {summary.status} ({summary.stop_reason}): "
                   f"{summary.analysed} positions analysed, {summary.failed} failed, "
                   f"{summary.already_analysed} of {summary.selected} selected already "
                   f"analysed; {summary.seconds:.1f} s ({summary.positions_per_second:.2f}/s), "
                   f"{summary.restarts} engine restarts")
    exit_if_interrupted(summary.status == "interrupted")


@refine_group.command("mistakes")
@book_option
@click.option("--engine", help="Compare with the analyses of this engine spec "
                               "(default: of the latest refine search run).")
@click.option("--analysis-run", type=click.IntRange(1),
              help="Compare with the analyses made with the engine, options and limits of "
                   "this refine search run.")
@click.option("--threshold", type=click.IntRange(0), default=150, show_default=True,
              help="thr of dlshogi's diff_eval: the book's score must be beyond +-thr...")
@click.option("--opp-threshold", type=click.IntRange(0),
              help="...and the engine's beyond +-opp on the same side (default: --threshold).")
@click.option("--diff", type=click.IntRange(0), default=200, show_default=True,
              help="Minimum |engine - book| difference (cp) of a flagged position.")
@click.option("--iterate", is_flag=True,
              help="Extend the book at each mistake (engine's move where the book was too "
                   "pessimistic, else the book's), propagate, re-search, re-detect.")
@click.option("--max-iterations", type=click.IntRange(1), default=3, show_default=True,
              help="--iterate: at most this many extensions.")
@click.option("--evaluator", default="builtin", show_default=True,
              help="--iterate: evaluator of the grow runs (as bookgen grow --evaluator).")
@click.option("--playouts", type=click.IntRange(1), default=200, show_default=True,
              help="--iterate: MCTS playouts per grown position.")
@click.option("--batch-size", type=click.IntRange(1), default=None,
              help="--iterate: leaves evaluated together in the grow runs' MCTS; "
                   + batch_size_help() + ".")
@click.option("--expand", type=click.IntRange(1), default=2, show_default=True,
              help="--iterate: positions grown per mistake and round.")
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="--iterate: engine processes of the search runs (each grow run, one "
                   "per mistake, expands in this process).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the list (or JSON) here instead of standard output.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the mistakes and the run's summary as JSON.")
@wait_option
@reports_errors
def mistakes_command(book: str, engine: str | None, analysis_run: int | None, threshold: int,
                     opp_threshold: int | None, diff: int, iterate: bool, max_iterations: int,
                     evaluator: str, playouts: int, batch_size: int | None, expand: int,
                     workers: int, seed: int, output: str | None, as_json: bool,
                     wait: bool) -> None:
    """Flag the positions where the book's score and the engine's disagree
    (dlshogi's diff_eval rule, plus mates the book missed), record them in
    the mistakes table and list them: one 'startpos moves ...' line per
    position along its shortest book line from the initial position ('sfen
    ...' when it has none), usable as a roots file.
    """
    from bookgen.refine.mistakes import mistakes, position_line

    summary = mistakes(book, engine=engine, analysis_run=analysis_run, threshold=threshold,
                       opp_threshold=opp_threshold, diff=diff, iterate=iterate,
                       max_iterations=max_iterations, evaluator=evaluator, playouts=playouts,
                       batch_size=batch_size, expand=expand, workers=workers, seed=seed,
                       wait=wait)
    if as_json:
        text = json.dumps(summary.as_dict(), indent=2) + "\n"
    else:
        text = "".join(position_line(m) + "\n" for m in summary.mistakes)
    message = (f"{book}: run {summary.run_id} {summary.status}: {len(summary.mistakes)} "
               f"mistakes among {summary.compared} positions analysed by {summary.engine}"
               + (f" after {len(summary.rounds) - 1} iterations" if iterate else "")
               + "".join(f"; {note}" for note in summary.notes))
    if output is not None:
        atomic_write(output, text.encode("utf-8"))
        click.echo(message)
    else:
        click.echo(text, nl=False)
        if not as_json:
            click.echo(message, err=True)
    exit_if_interrupted(summary.status == "interrupted")
