"""``bookgen grow``: a thin layer over :func:`bookgen.grow.grow`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    seed_option,
    wait_option,
    workers_option,
)
from bookgen.cli.support import echo_json, exit_if_interrupted, reports_errors
from bookgen.engines.factory import parallel_searches_help
from bookgen.errors import BookgenError

if TYPE_CHECKING:
    from bookgen.engines.network.device import NetworkSettings


def _evaluator_options(spec: str, engine_options: tuple[str, ...], nodes: int | None,
                       byoyomi: int | None, movetime: int | None, multipv: int | None,
                       depth: int | None, batch_size: int | None,
                       engine_timeout: float | None = None,
                       network: NetworkSettings | None = None) -> dict[str, Any]:
    """Constructor options of the evaluator named by ``spec`` (for
    ``blend:BOOK:INNER``, of INNER: the blend passes them on), from its
    :class:`~bookgen.engines.settings.EngineSettings`."""
    from bookgen.engines.network.device import NetworkSettings
    from bookgen.engines.restart import SearchLimits
    from bookgen.engines.settings import EngineSettings
    from bookgen.engines.spec import parse_spec
    from bookgen.engines.usi.analyser import parse_options

    parsed = parse_spec(spec)
    usi = parsed.base.is_usi
    if not usi and (engine_options or nodes or byoyomi or movetime or multipv
                    or engine_timeout):
        raise BookgenError("--engine-option, --nodes, --byoyomi, --movetime, --multipv and "
                           "--engine-timeout apply to usi: evaluators only")
    settings = EngineSettings(parsed, parse_options(list(engine_options)) if usi else {},
                              SearchLimits(nodes, byoyomi, movetime, depth),
                              timeout_s=engine_timeout, multipv=multipv, batch_size=batch_size,
                              network=network or NetworkSettings())
    return settings.evaluator_options()


@click.command("grow")
@book_option()
@click.option("--evaluator", default="builtin", show_default=True,
              help="builtin, usi:COMMAND (any USI engine), torch:MODEL.pt, onnx:MODEL.onnx, "
                   "or blend:BOOK:INNER (BOOK's priors blended into INNER, dlshogi "
                   "Use_Book_Policy).")
@click.option("--strategy", type=click.Choice(["dlshogi", "book-mcts", "dropout"]),
              default="dlshogi", show_default=True,
              help="dlshogi: trial walks (own side plays the minimax best, opponent samples "
                   "by count); book-mcts: PUCT over the book graph; dropout: expand the leaf "
                   "deviating least from the best line.")
@click.option("--playouts", type=click.IntRange(1), default=200, show_default=True,
              help="MCTS playouts per expanded position (not used by usi: evaluators, "
                   "whose own MultiPV search is the leaf search).")
@batch_size_option("Leaves evaluated together, of all the worker's searches (networks: the "
                   "model batch); ")
@click.option("--parallel-searches", type=click.IntRange(1), default=None,
              help="Positions each worker expands at once: their MCTS searches run "
                   "interleaved, each gathering --batch-size / N leaves, and the evaluator "
                   "takes the leaves of all of them together (same books as one search "
                   "after another); " + parallel_searches_help() + ".")
@click.option("--trials", type=click.IntRange(1), help="Stop after this many walks.")
@click.option("--positions", type=click.IntRange(1),
              help="Stop after expanding this many positions (default 100 without a budget).")
@click.option("--time", "seconds", type=click.FloatRange(0, min_open=True),
              help="Stop after this many seconds.")
@click.option("--color", type=click.Choice(["both", "black", "white"]), default="both",
              show_default=True, help="The book's own side (follows the best move).")
@click.option("--roots", type=click.Path(exists=True, dir_okay=False),
              help="File of 'startpos moves ...' / 'sfen ...' lines to grow from "
                   "(default: the initial position).")
@click.option("--max-ply", type=click.IntRange(1), default=64, show_default=True,
              help="Do not walk deeper than this many plies from a root.")
@click.option("--eval-threshold", type=click.IntRange(0), default=400, show_default=True,
              help="Stop a walk at a position whose |value| exceeds this (cp).")
@click.option("--temperature", type=click.FloatRange(0, min_open=True), default=1.0,
              show_default=True, help="Opponent sampling count**(1/T); book-mcts prior scale.")
@draw_value_options("A repetition's worth to black, per mille of a win "
                    "(dlshogi Book_Draw_Value_Black).")
@click.option("--visit-threshold", type=click.FloatRange(0, 1), default=0.005,
              show_default=True, help="Book moves need more than this share of root visits.")
@click.option("--cutoff", type=click.FloatRange(0, 1), default=0.015, show_default=True,
              help="Book moves need a win rate within this of the best move's.")
@click.option("--min-visits", type=click.IntRange(1), default=5, show_default=True,
              help="Book moves need at least this many visits (matters for small "
                   "--playouts, where one visit is already a large share).")
@engine_options_option("usi: setoption for the engine (repeatable), e.g. BookDepth=0.")
@nodes_option("usi: go nodes N.")
@byoyomi_option("usi: go byoyomi MS.")
@movetime_option()
@click.option("--multipv", type=click.IntRange(1), help="usi: MultiPV lines to start with.")
@depth_option("builtin / usi: search depth.")
@engine_timeout_option("usi: seconds to wait for a search before restarting the engine "
                       "(up to 3 times).")
@workers_option("Evaluator processes expanding different positions at once.")
@cluster_options()
@seed_option()
@json_option()
@wait_option
@reports_errors
@network_options
def grow_command(book: str, evaluator: str, strategy: str, playouts: int,
                 batch_size: int | None, parallel_searches: int | None, trials: int | None,
                 positions: int | None,
                 seconds: float | None, color: str, roots: str | None, max_ply: int,
                 eval_threshold: int, temperature: float, draw_value_black: int,
                 draw_value_white: int, visit_threshold: float, cutoff: float, min_visits: int,
                 engine_options: tuple[str, ...], nodes: int | None, byoyomi: int | None,
                 movetime: int | None, multipv: int | None, depth: int | None,
                 engine_timeout: float | None, workers: int, cluster: str | None,
                 worker_resources: tuple[str, ...], seed: int, as_json: bool,
                 wait: bool, network: NetworkSettings) -> None:
    """Grow the book: walk it, expand the next position worth thinking about
    with the evaluator, keep the good moves and their values.

    Every expansion is committed at once: Ctrl-C (exit code 130) and kill -9
    lose only the expansions in flight, and running the command again
    continues from the book as it is. Each run is recorded in the runs table.
    """
    from bookgen.engines.factory import (
        default_batch_size,
        default_device,
        default_parallel_searches,
    )
    from bookgen.engines.mcts import MctsSettings
    from bookgen.formats.positions import Roots
    from bookgen.grow import (
        BookMoveRule,
        EvaluatorSettings,
        GrowBudget,
        GrowSettings,
        WalkSettings,
        grow,
    )
    from bookgen.values import DrawValues

    options = _evaluator_options(evaluator, engine_options, nodes, byoyomi, movetime, multipv,
                                 depth, batch_size, engine_timeout, network)
    mcts_batch = batch_size if batch_size is not None else default_batch_size(evaluator, options)
    if batch_size is None and default_device(evaluator, options) == "cuda":
        options["batch_size"] = mcts_batch  # the network's own default batch is smaller
    settings = GrowSettings(
        evaluator=EvaluatorSettings(evaluator, options), strategy=strategy,
        budget=GrowBudget(trials=trials, positions=positions, seconds_s=seconds),
        roots=Roots.read(roots) if roots else Roots(),
        walk=WalkSettings(max_ply=max_ply, eval_threshold_cp=eval_threshold,
                          opponent_temperature=temperature, color=color),
        mcts=MctsSettings(playouts=playouts,
                          batch_size=mcts_batch,
                          draws=DrawValues(draw_value_black, draw_value_white)),
        book_moves=BookMoveRule(visit_share_threshold=visit_threshold, win_rate_cutoff=cutoff,
                                min_visits=min_visits),
        workers=workers, seed=seed, cluster=cluster_settings(cluster, worker_resources),
        parallel_searches=(parallel_searches if parallel_searches is not None
                           else default_parallel_searches(evaluator, options)))
    summary = grow(book, settings, wait=wait)
    if as_json:
        echo_json(summary.as_dict())
    else:
        share = summary.outside_evaluator_share * 100
        click.echo(f"{book}: run {summary.run_id} {summary.status} ({summary.stop_reason}): "
                   f"{summary.expansions} positions expanded in {summary.seconds:.1f} s "
                   f"({summary.positions_per_second:.2f}/s, {share:.0f}% of the workers' time "
                   f"outside the evaluator, mean evaluator batch {summary.mean_batch:.1f}); "
                   f"+{summary.positions_added} positions, "
                   f"+{summary.moves_added} moves, {summary.moves_updated} moves updated; book "
                   f"now {summary.positions} positions, {summary.moves} moves")
    exit_if_interrupted(summary.status == "interrupted")
