"""``bookgen refine minimax``, ``refine search`` and ``refine mistakes``.

Thin click layers over :func:`bookgen.refine.minimax.refine_minimax`,
:func:`bookgen.refine.book_search.search` and :func:`bookgen.refine.mistakes.mistakes`:
they build the settings (:mod:`bookgen.refine.settings`, whose defaults are the
flags' defaults) and call them; the work is imported only when a command
runs. :data:`refine_group` holds the three commands, added below.
:func:`grow_extender` is how ``refine mistakes --iterate`` grows the book:
refine does not import the grow stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from bookgen.cli.options import (
    batch_size_option,
    book_option,
    byoyomi_option,
    cluster_options,
    cluster_settings,
    depth_option,
    draw_value_options,
    engine_options_option,
    engine_timeout_option,
    json_option,
    movetime_option,
    network_options,
    nodes_option,
    output_option,
    seed_option,
    wait_option,
    workers_option,
)
from bookgen.cli.support import echo_json, exit_if_interrupted, json_text, reports_errors
from bookgen.engines.restart import BEST_LINE_RETRIES
from bookgen.refine.settings import (
    SELECTIONS,
    DetectionSettings,
    ExtensionSettings,
    MistakesSettings,
    PositionSelection,
    SearchSettings,
)

if TYPE_CHECKING:
    from bookgen.engines.network.device import NetworkSettings
    from bookgen.formats.positions import Roots
    from bookgen.grow import GrowSummary
    from bookgen.refine.minimax import MinimaxSummary
    from bookgen.refine.minimax_file import MinimaxFileSummary


def grow_extender(book: Path, settings: ExtensionSettings, *, roots: Roots,
                  eval_threshold_cp: int, seed: int, progress: bool) -> GrowSummary:
    """A :class:`bookgen.refine.mistakes.Extender`: one :func:`bookgen.grow.grow` run
    from ``roots`` (``settings.expand`` positions with its evaluator, playouts and
    batch size) with grow's defaults for everything else."""
    from bookgen.engines.mcts import MctsSettings
    from bookgen.grow import EvaluatorSettings, GrowBudget, GrowSettings, WalkSettings, grow

    grow_settings = GrowSettings(
        evaluator=EvaluatorSettings(settings.evaluator, settings.evaluator_options or {}),
        budget=GrowBudget(positions=settings.expand), roots=roots,
        walk=WalkSettings(eval_threshold_cp=eval_threshold_cp),
        mcts=MctsSettings(playouts=settings.playouts, batch_size=settings.mcts_batch_size()),
        seed=seed, cluster=settings.cluster)
    return grow(book, grow_settings, progress=progress)


@click.group("refine")
def refine_group() -> None:
    """Refine a grown book: minimax over the book graph, alpha-beta re-search of
    book positions, and mining the positions where the evaluator was wrong."""


def format_summary(summary: MinimaxSummary) -> str:
    """One line: what the minimax run did and how long it took."""
    counts, seconds = summary.counts, summary.seconds
    cycles = (f"{counts['cycle_components']} cycle components with "
              f"{counts['positions_in_cycles']} positions")
    return (f"{summary.book}: run {summary.run_id}: {summary.settings.method} minimax over "
            f"{counts['positions']} positions, {counts['edges']} edges "
            f"({counts['transposition_edges']} transpositions, "
            f"{counts['transposition_rows_added']} new), {counts['leaf_moves']} leaf moves, "
            f"{cycles}; {seconds.total:.1f} s (graph {seconds.graph:.1f}, "
            f"propagation {seconds.propagate:.1f}, write {seconds.write:.1f})")


def format_file_summary(summary: MinimaxFileSummary) -> str:
    """One line: what the file-to-file minimax run did and how long it took."""
    counts, seconds = summary.counts, summary.seconds
    return (f"{summary.out}: {summary.settings.method} minimax of {summary.source}: "
            f"{counts['positions']} positions, {counts['edges']} edges "
            f"({counts['transposition_edges']} transpositions), {counts['leaf_moves']} leaf "
            f"moves, {counts['cycle_components']} cycle components with "
            f"{counts['positions_in_cycles']} positions; {counts['moves_written']} moves "
            f"written; {seconds.total:.1f} s (read {seconds.read:.1f}, graph "
            f"{seconds.graph:.1f}, propagation {seconds.propagate:.1f}, write "
            f"{seconds.write:.1f})")


@click.command("minimax")
@book_option()
@click.option("--in", "source", type=click.Path(dir_okay=False),
              help="Refine this DB2016 book file instead, file to file (with --out): no SQLite "
                   "book is built; invalid entries are reported and skipped as by import.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="With --in: the refined book written, as 'export --values minimax' writes "
                   "a refined book (.db: DB2016, .bin: Apery).")
@click.option("--strict", is_flag=True,
              help="With --in: refuse a file with any invalid entry (nothing written).")
@draw_value_options("A repetition's worth to black, per mille of a win (dlshogi "
                    "Book_Draw_Value_Black; 500 = 0 cp).")
@click.option("--method", type=click.Choice(["retrograde", "negascout"]), default="retrograde",
              show_default=True,
              help="retrograde: exact values over the whole graph (peta_shock's idea); "
                   "negascout: dlshogi's NegaScout from every position with trusted scores.")
@workers_option("Processes generating moves for the graph (default: up to 2).", default=None)
@click.option("--rescan-links", is_flag=True,
              help="Generate the legal moves even when the book's stored links are complete "
                   "(the same result, slower).")
@json_option()
@wait_option
@reports_errors
def minimax_command(book: str, source: str | None, out: str | None, strict: bool,
                    draw_value_black: int, draw_value_white: int, method: str,
                    workers: int | None, rescan_links: bool, as_json: bool, wait: bool) -> None:
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
    Everything is written in one transaction with its runs row. A book whose
    links are complete (import, merge and refine minimax store them; grow
    clears the marker when it adds positions with moves) is read from its
    links, without generating moves.

    With --in and --out it reads a DB2016 file and writes the refined book
    file instead, without a SQLite book: the same values, depths, tie rule
    and transposition moves as import, refine minimax and export --values
    minimax give.
    """
    from bookgen.errors import BookgenError
    from bookgen.refine.minimax import MinimaxSettings, refine_minimax
    from bookgen.values import DrawValues

    settings = MinimaxSettings(method=method, draws=DrawValues(draw_value_black, draw_value_white),
                               scan_workers=workers, rescan_links=rescan_links)
    if source is not None or out is not None:
        if source is None or out is None:
            raise BookgenError("--in and --out go together: the book file read and the one "
                               "written")
        context = click.get_current_context()
        if context.get_parameter_source("book") != click.core.ParameterSource.DEFAULT:
            raise BookgenError("-b/--book and --in exclude each other: refine a SQLite book "
                               "or a book file")
        from bookgen.refine.minimax_file import refine_minimax_file

        file_summary = refine_minimax_file(source, out, settings, strict=strict)
        if as_json:
            echo_json(file_summary.as_dict())
        else:
            click.echo(format_file_summary(file_summary))
        return
    if strict:
        raise BookgenError("--strict applies to --in: a SQLite book holds no invalid entries")
    summary = refine_minimax(book, settings, wait=wait)
    if as_json:
        echo_json(summary.as_dict())
    else:
        click.echo(format_summary(summary))


@click.command("search")
@book_option()
@click.option("--engine", default="builtin", show_default=True,
              help="builtin (bookgen's alpha-beta search) or usi:COMMAND (any USI engine).")
@click.option("--select", type=click.Choice(SELECTIONS), default=PositionSelection.select,
              show_default=True,
              help="all: positions with book moves; leaves: those whose moves lead to no "
                   "position with moves; principal: reached from the roots along every move "
                   "within --margin of the best, for both sides; visits: expanded with at "
                   "least --min-visits visits.")
@click.option("--min-visits", type=click.IntRange(0), help="--select visits: the minimum.")
@click.option("--margin", type=click.IntRange(0), default=PositionSelection.margin_cp,
              show_default=True,
              help="--select principal: follow moves within this many cp of the best "
                   "(minimax values when present, else the book's values).")
@nodes_option("go nodes N (builtin: node budget).")
@byoyomi_option("usi: go byoyomi MS (the default, 1000, without any limit).")
@movetime_option()
@depth_option("go depth N (builtin: default 4 with a 40000-node budget).")
@engine_options_option("usi: setoption for the engine (repeatable), e.g. BookDepth=0.")
@engine_timeout_option("usi: seconds to wait for one search before restarting the engine.")
@click.option("--retries", type=click.IntRange(0), default=BEST_LINE_RETRIES, show_default=True,
              help="Engine restarts per position before it is counted as failed.")
@workers_option("Engine processes searching different positions at once.")
@cluster_options()
@click.option("--limit", type=click.IntRange(1), help="Search at most N positions in this run.")
@json_option()
@wait_option
@reports_errors
def search_command(book: str, engine: str, select: str, min_visits: int | None, margin: int,
                   nodes: int | None, byoyomi: int | None, movetime: int | None,
                   depth: int | None, engine_options: tuple[str, ...],
                   engine_timeout: float | None, retries: int, workers: int,
                   cluster: str | None, worker_resources: tuple[str, ...],
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
    from bookgen.engines.settings import engine_settings
    from bookgen.engines.usi.analyser import parse_options
    from bookgen.refine.book_search import search

    selection = PositionSelection(select, min_visits, margin)  # its errors first, as before
    analyser = engine_settings(engine, parse_options(list(engine_options)), nodes, byoyomi,
                               movetime, depth, engine_timeout, retries)
    settings = SearchSettings(analyser, selection, workers, limit,
                              cluster_settings(cluster, worker_resources))
    summary = search(book, settings, wait=wait)
    if as_json:
        echo_json(summary.as_dict())
    else:
        click.echo(f"{book}: run {summary.run_id} {summary.status} ({summary.stop_reason}): "
                   f"{summary.analysed} positions analysed, {summary.failed} failed, "
                   f"{summary.already_analysed} of {summary.selected} selected already "
                   f"analysed; {summary.seconds:.1f} s ({summary.positions_per_second:.2f}/s), "
                   f"{summary.restarts} engine restarts")
    exit_if_interrupted(summary.status == "interrupted")


@click.command("mistakes")
@book_option()
@click.option("--engine", help="Compare with the analyses of this engine spec "
                               "(default: of the latest refine search run).")
@click.option("--analysis-run", type=click.IntRange(1),
              help="Compare with the analyses made with the engine, options and limits of "
                   "this refine search run.")
@click.option("--threshold", type=click.IntRange(0), default=DetectionSettings.threshold_cp,
              show_default=True,
              help="thr of dlshogi's diff_eval: the book's score must be beyond +-thr...")
@click.option("--opp-threshold", type=click.IntRange(0),
              help="...and the engine's beyond +-opp on the same side (default: --threshold).")
@click.option("--diff", type=click.IntRange(0), default=DetectionSettings.diff_cp,
              show_default=True,
              help="Minimum |engine - book| difference (cp) of a flagged position.")
@click.option("--iterate", is_flag=True,
              help="Extend the book at each mistake (engine's move where the book was too "
                   "pessimistic, else the book's), propagate, re-search, re-detect.")
@click.option("--max-iterations", type=click.IntRange(1),
              default=ExtensionSettings.max_iterations, show_default=True,
              help="--iterate: at most this many extensions.")
@click.option("--evaluator", default=ExtensionSettings.evaluator, show_default=True,
              help="--iterate: evaluator of the grow runs (as bookgen grow --evaluator).")
@click.option("--playouts", type=click.IntRange(1), default=ExtensionSettings.playouts,
              show_default=True,
              help="--iterate: MCTS playouts per grown position.")
@batch_size_option("--iterate: leaves evaluated together in the grow runs' MCTS; ")
@click.option("--expand", type=click.IntRange(1), default=ExtensionSettings.expand,
              show_default=True,
              help="--iterate: positions grown per mistake and round.")
@workers_option("--iterate: engine processes of the search runs (each grow run, one "
                "per mistake, expands in this process).")
@cluster_options()
@seed_option()
@output_option("Write the list (or JSON) here instead of standard output.", required=False)
@json_option("Print the mistakes and the run's summary as JSON.")
@wait_option
@reports_errors
@network_options
def mistakes_command(book: str, engine: str | None, analysis_run: int | None, threshold: int,
                     opp_threshold: int | None, diff: int, iterate: bool, max_iterations: int,
                     evaluator: str, playouts: int, batch_size: int | None, expand: int,
                     workers: int, cluster: str | None, worker_resources: tuple[str, ...],
                     seed: int, output: str | None, as_json: bool, wait: bool,
                     network: NetworkSettings) -> None:
    """Flag the positions where the book's score and the engine's disagree
    (dlshogi's diff_eval rule, plus mates the book missed), record them in
    the mistakes table and list them: one 'startpos moves ...' line per
    position along its shortest book line from the initial position ('sfen
    ...' when it has none), usable as a roots file.
    """
    from bookgen.engines.settings import EngineSettings
    from bookgen.engines.spec import parse_spec
    from bookgen.files import atomic_write
    from bookgen.refine.mistakes import Extender, mistakes, position_line

    evaluator_options = None  # --device and the rest: checked and given only when set
    if network.options():
        evaluator_options = EngineSettings(parse_spec(evaluator),
                                           network=network).evaluator_options()

    settings = MistakesSettings(
        detection=DetectionSettings(engine=engine, analysis_run=analysis_run,
                                    threshold_cp=threshold, opp_threshold_cp=opp_threshold,
                                    diff_cp=diff),
        iterate=iterate,
        extension=ExtensionSettings(max_iterations=max_iterations, expand=expand,
                                    evaluator=evaluator, playouts=playouts,
                                    evaluator_options=evaluator_options,
                                    batch_size=batch_size, workers=workers, seed=seed,
                                    cluster=cluster_settings(cluster, worker_resources)))
    extender: Extender | None = grow_extender if iterate else None
    summary = mistakes(book, settings, extender=extender, wait=wait)
    if as_json:
        text = json_text(summary.as_dict()) + "\n"
    else:
        text = "".join(position_line(m) + "\n" for m in summary.mistakes)
    message = (f"{book}: run {summary.run_id} {summary.status}: {len(summary.mistakes)} "
               f"mistakes among {summary.compared} positions analysed by {summary.engine}"
               + (f" after {len(summary.rounds) - 1} iterations" if iterate else ""))
    if output is not None:
        atomic_write(output, text.encode("utf-8"))
        click.echo(message)
    else:
        click.echo(text, nl=False)
        if not as_json:
            click.echo(message, err=True)
    exit_if_interrupted(summary.status == "interrupted")


refine_group.add_command(minimax_command)
refine_group.add_command(search_command)
refine_group.add_command(mistakes_command)
