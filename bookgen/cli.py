"""The ``bookgen`` command line: a thin layer over the library functions.

Each command parses its options, calls one function of the library and prints
the result. User errors (:class:`BookgenError`) become one line on stderr and
exit code 2; Ctrl-C exits with 130 after the command has cleaned up.
"""

from __future__ import annotations

if __name__ == "__main__":  # python -m bookgen.cli: see bookgen.startup
    from bookgen.startup import quit_on_ctrl_c

    quit_on_ctrl_c()

import json
from typing import Any

import click

from bookgen import __version__
from bookgen.cli_support import (DEFAULT_TIMEOUT_HELP, exit_if_interrupted, reports_errors,
                                 wait_option)
from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError
from bookgen.engines.factory import batch_size_help
from bookgen.store import DEFAULT_BOOK

book_option = click.option(
    "-b", "--book", default=DEFAULT_BOOK, show_default=True,
    type=click.Path(dir_okay=False), help="The SQLite book file.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bookgen")
def main() -> None:
    """Grow, refine and use shogi opening books stored in SQLite.

    A book is one SQLite file (default ./book.sqlite) that plain SQLite tools
    can open; see docs/schema.md for its tables.
    """


@main.command("import")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@book_option
@click.option("--format", "fmt", type=click.Choice(["auto", "db2016", "apery"]),
              default="auto", show_default=True,
              help="Input format; auto looks at each file's content (a format given "
                   "is refused for content that is clearly the other one).")
@click.option("--strict", is_flag=True,
              help="Import nothing (exit 2, book untouched) if any entry is invalid, "
                   "instead of skipping invalid entries.")
@click.option("--roots", type=click.Path(exists=True, dir_okay=False),
              help="Apery only: file of 'startpos moves ...' / 'sfen ...' lines to walk "
                   "from besides the initial position.")
@click.option("--max-gap", type=click.IntRange(0, 1), default=1, show_default=True,
              help="Apery only: plies outside the book to look through when walking.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@wait_option
@reports_errors
def import_command(sources: tuple[str, ...], book: str, fmt: str, strict: bool,
                   roots: str | None, max_gap: int, as_json: bool, wait: bool) -> None:
    """Import DB2016 (.db) or Apery (.bin) books into BOOK, merging with what is there.

    Invalid entries are reported once each on stderr (file, line, reason),
    skipped and counted. The book changes in one transaction: an interrupted
    or failed import leaves it exactly as it was. Duplicate positions keep the
    minimum ply; a move already in the book is replaced only by an entry with
    greater depth, or equal depth and greater count.

    Apery files hold keys, not positions: they are walked from the initial
    position (and --roots) over all legal moves, and records never reached
    are reported.
    """
    from bookgen.importer import import_books

    summary = import_books(sources, book, fmt=fmt, strict=strict, roots=roots,
                           max_gap=max_gap, diagnostics=Diagnostics(), wait=wait)
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
        return
    for info in summary.files:
        line = (f"{info['file']} ({info['format']}): {info['positions']} positions, "
                f"{info['moves']} moves read, {info['problems']} problems")
        if info["format"] == "apery":
            line += (f"; {info['records']} records, {info['records_unreached']} never "
                     f"reached, {info['gap_positions']} positions found across gaps")
        click.echo(line)
    if summary.interrupted_at_commit:
        click.echo("bookgen: Ctrl-C came during the final commit; the import completed",
                   err=True)
    skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(summary.skipped.items()))
    click.echo(f"{summary.book}: +{summary.positions_added} positions, +{summary.moves_added} "
               f"moves, {summary.moves_updated} moves updated"
               + (f"; skipped {skipped}" if skipped else ""))


@main.command("export")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The file to write.")
@book_option
@click.option("--format", "fmt", type=click.Choice(["db2016", "apery", "policy", "hcpe"]),
              default="db2016", show_default=True,
              help="Output format; policy: YaneuraOu's POLICY-DB2024 policy book (move "
                   "counts and the best value as a win rate); hcpe: training targets, "
                   "OUT (value and best move per position) plus OUT.policy.npy (dlshogi's "
                   "book-to-policy probabilities, see docs/formats.md).")
@click.option("--temperature", type=click.FloatRange(0, min_open=True), default=100.0,
              show_default=True,
              help="hcpe: softmax((s_i - s_max) * (1000 / T) / 754.3) over a position's moves.")
@click.option("--values", type=click.Choice(["raw", "minimax"]), default="raw",
              show_default=True,
              help="raw: the book's own values and depths; minimax: those of 'bookgen "
                   "refine minimax', with the transposition moves it found.")
@click.option("--noe", is_flag=True, help="DB2016: add a '# NOE:<positions>,SORTED' line.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def export_command(output: str, book: str, fmt: str, temperature: float, values: str,
                   noe: bool, as_json: bool) -> None:
    """Write the book as a DB2016 text book or an Apery/dlshogi binary book.

    DB2016: normalised sfens with their minimum ply, blocks sorted by sfen,
    moves best first (value, then count). Apery: 16-byte records sorted by
    key, counts scaled into 16 bits where a position's largest count exceeds
    65535.

    --values minimax writes minimax values and depths (DB2016 depth column:
    the minimax depth, 'none' for lines ending in repetition), best move
    first; a move with the best value but another depth is written one lower
    so that engines play the intended move. --values raw leaves out the moves
    refine added and writes exactly what it wrote before the refine.
    """
    from bookgen.exporter import export_book

    result = export_book(output, book, fmt=fmt, values=values, noe=noe,
                         diagnostics=Diagnostics(), temperature=temperature)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif fmt in ("db2016", "policy", "hcpe"):
        click.echo(f"{output}: {result['positions']} positions, {result['moves']} moves")
    else:
        click.echo(f"{output}: {result['records']} records for {result['positions']} "
                   f"positions ({result['key_collisions']} key collisions, "
                   f"{result['counts_scaled']} positions with scaled counts)")


@main.command("stats")
@book_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports_errors
def stats_command(book: str, as_json: bool) -> None:
    """Size of the book and describe() tables of ply and best value.

    The value tables hold, for each position with moves, the value of its
    best move, separately for black (sente) and white (gote) to move.
    """
    from bookgen.stats import book_stats, format_stats

    stats = book_stats(book)
    click.echo(json.dumps(stats, indent=2) if as_json else format_stats(stats))


@main.command("show")
@click.argument("position", nargs=-1)
@book_option
@click.option("--svg", type=click.Path(dir_okay=False), help="Write the board as SVG here.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@reports_errors
def show_command(position: tuple[str, ...], book: str, svg: str | None, as_json: bool) -> None:
    """Show POSITION and its book moves.

    POSITION is 'startpos moves 7g7f ...' or 'sfen <sfen> [moves ...]'
    (default: the initial position); quoting is optional.
    """
    from bookgen.show import format_position, lookup_position

    info = lookup_position(" ".join(position) or "startpos", book, svg=svg)
    click.echo(json.dumps(info, indent=2) if as_json else format_position(info))
    if svg is not None:
        click.echo(f"{svg}: board written", err=as_json)


@main.command("merge")
@click.argument("books", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The book to merge into (created if missing).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@wait_option
@reports_errors
def merge_command(books: tuple[str, ...], output: str, as_json: bool, wait: bool) -> None:
    """Merge BOOKS into OUTPUT.

    Positions keep their minimum ply. For a move present in several books the
    entry with the greatest depth wins, then the one with the greatest count;
    on a full tie the entry already in OUTPUT, then the earlier book, wins.
    """
    from bookgen.merge import merge_books

    result = merge_books(output, books, wait=wait)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(f"{output}: +{result['positions_added']} positions, +{result['moves_added']} "
                   f"moves, {result['moves_updated']} moves updated; now "
                   f"{result['positions']} positions, {result['moves']} moves")


def _evaluator_options(spec: str, engine_options: tuple[str, ...], nodes: int | None,
                       byoyomi: int | None, movetime: int | None, multipv: int | None,
                       depth: int | None, batch_size: int | None,
                       engine_timeout: float | None = None) -> dict[str, Any]:
    """Constructor options of the evaluator kind named by ``spec`` (for
    ``blend:BOOK:INNER``, of INNER: the blend passes them on)."""
    kind = spec.partition(":")[0]
    if kind == "blend":
        kind = spec.split(":", 2)[-1].partition(":")[0]
    options: dict[str, Any] = {}
    if kind == "usi":
        from bookgen.engines.usi.analyser import parse_options

        options["options"] = parse_options(list(engine_options))
        for name, value in (("nodes", nodes), ("byoyomi", byoyomi), ("movetime", movetime),
                            ("multipv", multipv), ("depth", depth),
                            ("timeout", engine_timeout)):
            if value is not None:
                options[name] = value
    elif engine_options or nodes or byoyomi or movetime or multipv or engine_timeout:
        raise BookgenError("--engine-option, --nodes, --byoyomi, --movetime, --multipv and "
                           "--engine-timeout apply to usi: evaluators only")
    if kind == "builtin" and depth is not None:
        options["depth"] = depth
    if kind in ("torch", "onnx") and batch_size is not None:
        options["batch_size"] = batch_size
    return options


@main.command("grow")
@book_option
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
@click.option("--batch-size", type=click.IntRange(1), default=None,
              help="Leaves evaluated together in MCTS (networks: also the model batch); "
                   + batch_size_help() + ".")
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
@click.option("--draw-value-black", type=click.IntRange(0, 1000), default=500,
              show_default=True, help="A repetition's worth to black, per mille of a win "
                                      "(dlshogi Book_Draw_Value_Black).")
@click.option("--draw-value-white", type=click.IntRange(0, 1000), default=500,
              show_default=True, help="The same for white.")
@click.option("--visit-threshold", type=click.FloatRange(0, 1), default=0.005,
              show_default=True, help="Book moves need more than this share of root visits.")
@click.option("--cutoff", type=click.FloatRange(0, 1), default=0.015, show_default=True,
              help="Book moves need a win rate within this of the best move's.")
@click.option("--min-visits", type=click.IntRange(1), default=5, show_default=True,
              help="Book moves need at least this many visits (matters for small "
                   "--playouts, where one visit is already a large share).")
@click.option("--engine-option", "engine_options", multiple=True, metavar="NAME=VALUE",
              help="usi: setoption for the engine (repeatable), e.g. BookDepth=0.")
@click.option("--nodes", type=click.IntRange(1), help="usi: go nodes N.")
@click.option("--byoyomi", type=click.IntRange(1), help="usi: go byoyomi MS.")
@click.option("--movetime", type=click.IntRange(1), help="usi: go movetime MS.")
@click.option("--multipv", type=click.IntRange(1), help="usi: MultiPV lines to start with.")
@click.option("--depth", type=click.IntRange(1), help="builtin / usi: search depth.")
@click.option("--engine-timeout", type=click.FloatRange(0, min_open=True),
              help="usi: seconds to wait for a search before restarting the engine "
                   "(up to 3 times). " + DEFAULT_TIMEOUT_HELP)
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="Evaluator processes expanding different positions at once.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@wait_option
@reports_errors
def grow_command(book: str, evaluator: str, strategy: str, playouts: int,
                 batch_size: int | None, trials: int | None, positions: int | None,
                 seconds: float | None, color: str, roots: str | None, max_ply: int,
                 eval_threshold: int, temperature: float, draw_value_black: int,
                 draw_value_white: int, visit_threshold: float, cutoff: float, min_visits: int,
                 engine_options: tuple[str, ...], nodes: int | None, byoyomi: int | None,
                 movetime: int | None, multipv: int | None, depth: int | None,
                 engine_timeout: float | None, workers: int, seed: int, as_json: bool,
                 wait: bool) -> None:
    """Grow the book: walk it, expand the next position worth thinking about
    with the evaluator, keep the good moves and their values.

    Every expansion is committed at once: Ctrl-C (exit code 130) and kill -9
    lose only the expansions in flight, and running the command again
    continues from the book as it is. Each run is recorded in the runs table.
    """
    from bookgen.grow import grow

    options = _evaluator_options(evaluator, engine_options, nodes, byoyomi, movetime, multipv,
                                 depth, batch_size, engine_timeout)
    summary = grow(book, evaluator=evaluator, evaluator_options=options, strategy=strategy,
                   playouts=playouts, batch_size=batch_size, trials=trials,
                   positions=positions, seconds=seconds, color=color, roots=roots,
                   max_ply=max_ply, eval_threshold=eval_threshold, temperature=temperature,
                   draw_value_black=draw_value_black / 1000,
                   draw_value_white=draw_value_white / 1000,
                   visit_threshold=visit_threshold, cutoff=cutoff, min_visits=min_visits,
                   workers=workers, seed=seed, wait=wait)
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
    else:
        busy = summary.seconds * workers  # evaluator time is summed over the workers
        share = (1 - summary.eval_seconds / busy) * 100 if busy else 0.0
        click.echo(f"{book}: run {summary.run_id} {summary.status} ({summary.stop_reason}): "
                   f"{summary.expansions} positions expanded in {summary.seconds:.1f} s "
                   f"({summary.positions_per_second:.2f}/s, {share:.0f}% of the workers' time "
                   f"outside the evaluator); +{summary.positions_added} positions, "
                   f"+{summary.moves_added} moves, {summary.moves_updated} moves updated; book "
                   f"now {summary.positions} positions, {summary.moves} moves")
    exit_if_interrupted(summary.status == "interrupted")


from bookgen.cli_model import model_group  # noqa: E402
from bookgen.refine.cli import refine_group  # noqa: E402
from bookgen.selfplay.cli import starts_command  # noqa: E402
from bookgen.selfplay.cli_games import selfplay_command, train_command  # noqa: E402
from bookgen.analysis.cli import suite_command  # noqa: E402
from bookgen.analysis.cli_match import match_command  # noqa: E402
from bookgen.analysis.cli_stats import outcomes_command, sprt_command  # noqa: E402
from bookgen.analysis.cli_rate import rate_command  # noqa: E402
from bookgen.analysis.cli_report import report_command  # noqa: E402

main.add_command(model_group)
main.add_command(refine_group)
main.add_command(starts_command)
main.add_command(selfplay_command)
main.add_command(train_command)
main.add_command(suite_command)
main.add_command(match_command)
main.add_command(sprt_command)
main.add_command(outcomes_command)
main.add_command(rate_command)
main.add_command(report_command)

if __name__ == "__main__":
    main()
