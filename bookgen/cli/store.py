"""``bookgen import``, ``export``, ``merge``, ``stats``, ``show`` and ``serve``: whole-book
operations.

Thin layers over :mod:`bookgen.bookfiles.importer`,
:mod:`bookgen.bookfiles.exporter`, :mod:`bookgen.bookfiles.merge`,
:mod:`bookgen.bookfiles.stats`, :mod:`bookgen.bookfiles.show` and the explorer
(:mod:`bookgen.explore`, which gets the results by opening from
:mod:`bookgen.analysis.openings` through this layer), imported only when a command
runs.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from bookgen.cli.options import book_option, json_option, output_option, wait_option
from bookgen.cli.support import echo_json, reports_errors
from bookgen.errors import BookgenError


@click.command("import")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@book_option()
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
@json_option()
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
    from bookgen.bookfiles.importer import ImportSettings, import_books
    from bookgen.diagnostics import Diagnostics
    from bookgen.formats.positions import Roots

    settings = ImportSettings(format=fmt, strict=strict,
                              apery_roots=Roots.read(roots) if roots is not None else Roots(),
                              apery_max_gap_plies=max_gap)
    summary = import_books(book, sources, settings, diagnostics=Diagnostics(), wait=wait)
    if as_json:
        echo_json(summary.as_dict())
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


@click.command("export")
@output_option("The file to write.")
@book_option()
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
@json_option()
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
    from bookgen.bookfiles.exporter import ExportSettings, export_book
    from bookgen.diagnostics import Diagnostics
    from bookgen.store import ValueColumn

    settings = ExportSettings(format=fmt, values=ValueColumn(values), db2016_noe=noe,
                              hcpe_policy_temperature=temperature)
    result = export_book(book, output, settings, diagnostics=Diagnostics())
    if as_json:
        echo_json(result.as_dict())
    elif fmt in ("db2016", "policy", "hcpe"):
        click.echo(f"{output}: {result.positions} positions, {result.moves} moves")
    else:
        click.echo(f"{output}: {result.records} records for {result.positions} "
                   f"positions ({result.key_collisions} key collisions, "
                   f"{result.counts_scaled} positions with scaled counts)")


@click.command("stats")
@book_option()
@json_option("Print one JSON object.")
@reports_errors
def stats_command(book: str, as_json: bool) -> None:
    """Size of the book and describe() tables of ply and best value.

    The value tables hold, for each position with moves, the value of its
    best move, separately for black (sente) and white (gote) to move.
    """
    from bookgen.bookfiles.stats import book_stats, format_stats

    stats = book_stats(book)
    if as_json:
        echo_json(stats.as_dict())
    else:
        click.echo(format_stats(stats))


@click.command("show")
@click.argument("position", nargs=-1)
@book_option()
@click.option("--svg", type=click.Path(dir_okay=False), help="Write the board as SVG here.")
@json_option("Print as JSON.")
@reports_errors
def show_command(position: tuple[str, ...], book: str, svg: str | None, as_json: bool) -> None:
    """Show POSITION and its book moves.

    POSITION is 'startpos moves 7g7f ...' or 'sfen <sfen> [moves ...]'
    (default: the initial position); quoting is optional.
    """
    from bookgen.bookfiles.show import format_position, lookup_position

    view = lookup_position(book, " ".join(position) or "startpos", svg=svg)
    if as_json:
        echo_json(view.as_dict())
    else:
        click.echo(format_position(view))
    if svg is not None:
        click.echo(f"{svg}: board written", err=as_json)


@click.command("merge")
@click.argument("books", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_option("The book to merge into (created if missing).")
@json_option()
@wait_option
@reports_errors
def merge_command(books: tuple[str, ...], output: str, as_json: bool, wait: bool) -> None:
    """Merge BOOKS into OUTPUT.

    Positions keep their minimum ply. For a move present in several books the
    entry with the greatest depth wins, then the one with the greatest count;
    on a full tie the entry already in OUTPUT, then the earlier book, wins.
    """
    from bookgen.bookfiles.merge import merge_books

    result = merge_books(output, books, wait=wait)
    if as_json:
        echo_json(result.as_dict())
    else:
        click.echo(f"{output}: +{result.positions_added} positions, +{result.moves_added} "
                   f"moves, {result.moves_updated} moves updated; now "
                   f"{result.positions} positions, {result.moves} moves")


@click.command("serve")
@book_option("The SQLite book to explore (opened read-only; grow and refine may write it "
             "meanwhile). Without -b and with no book.sqlite here, --results files are "
             "served alone (the live view).")
@click.option("--results", multiple=True, type=click.Path(dir_okay=False),
              help="A match results file (.sqlite) or PGN: show the results by opening, "
                   "and for a results file the live view of its match (standings, games "
                   "in play, SPRT), also while bookgen match writes it (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (127.0.0.1: this machine only).")
@click.option("--port", type=int, default=8000, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--open", "open_browser", is_flag=True, help="Open the explorer in a browser.")
@click.pass_context
@reports_errors
def serve_command(ctx: click.Context, book: str, results: tuple[str, ...], host: str,
                  port: int, open_browser: bool) -> None:
    """Explore BOOK in a web browser: board, book moves, analyses, mistakes, tree.

    Serves a local web app (plain HTML, no network access needed) until
    Ctrl-C. The book is opened read-only and never written. Each position
    has its own URL (?moves=7g7f 3c3d or ?sfen=...), so a link shares it.
    With --results, /live shows a match as it is played: standings with
    ratings, the boards of the games in play and the SPRT, refreshed every
    2 seconds.

    \b
    Examples:
      bookgen serve -b book.sqlite --open
      bookgen serve -b book.sqlite --results match.sqlite --port 8080
      bookgen serve --results match.sqlite      (while bookgen match -o match.sqlite runs)
    """
    from bookgen.explore.settings import ServeSettings
    from bookgen.extras import require_extra

    for module in ("starlette", "uvicorn"):
        require_extra(module, "serve", "serve")
    settings = ServeSettings(host=host, port=port, open_browser=open_browser)
    from bookgen.analysis.openings import results_by_opening
    from bookgen.analysis.results import load_games
    from bookgen.analysis.standings import live_sprt, live_standings
    from bookgen.explore.app import serve
    from bookgen.explore.live import LiveView
    from bookgen.explore.view import Explorer

    given = ctx.get_parameter_source("book") is not click.core.ParameterSource.DEFAULT
    with_book = given or not results or Path(book).exists()
    openings = results_by_opening(load_games(results)) if results and with_book else []
    # the live view reads results files (SQLite), not PGN
    databases = [path for path in results if _is_sqlite(path)]
    with ExitStack() as stack:
        live = stack.enter_context(LiveView(databases, live_standings, live_sprt))
        explorer = stack.enter_context(Explorer(book)) if with_book else None
        what = f"{book} (read-only)" if with_book else ", ".join(databases)
        serve(explorer, settings, openings, results if with_book else databases,
              on_ready=lambda url: click.echo(f"bookgen serve: {what} at {url} (Ctrl-C stops)"),
              live=live if databases else None)


def _is_sqlite(path: str) -> bool:
    """A results file (SQLite) rather than PGN; a missing file is one bookgen says is
    missing."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16).startswith(b"SQLite format 3")
    except FileNotFoundError:
        raise BookgenError(f"{path}: no such results file") from None
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None
