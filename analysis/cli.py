"""``bookgen suite``: the command-line side of :mod:`bookgen.analysis.suites` (book
suites) and :mod:`bookgen.analysis.records` (suites from game records)."""

from __future__ import annotations

import json
from typing import Any

import click
from click.core import ParameterSource

from bookgen.cli_support import reports_errors
from bookgen.errors import BookgenError
from bookgen.store import DEFAULT_BOOK

_BOOK_ONLY = (("book", "-b/--book"), ("values", "--values"))
_RECORDS_ONLY = (("min_moves", "--min-moves"), ("min_rating", "--min-rating"),
                 ("allow_unrated", "--allow-unrated"), ("max_line_value", "--max-line-value"),
                 ("ignore_values", "--ignore-values"), ("strict", "--strict"))


def _given(name: str) -> bool:
    """Whether the option was set by the user rather than left at its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def _counts(counts: dict[str, int]) -> str:
    return "{" + ", ".join(f"{key}: {n}" for key, n in counts.items()) + "}"


@click.command("suite")
@click.argument("more_records", metavar="[RECORDS]...", nargs=-1, type=click.Path())
@click.option("-b", "--book", default=DEFAULT_BOOK, show_default=True,
              type=click.Path(dir_okay=False), help="The SQLite book file (book suites).")
@click.option("--from-records", "records", multiple=True, type=click.Path(),
              metavar="DIR|FILE",
              help="Cut the suite from game records instead of the book: CSA files (*.csa, "
                   "several games separated by '/' allowed), KIF files (*.kif, *.kifu; UTF-8 or "
                   "CP932) and directories searched recursively for them. Further record "
                   "paths may follow as arguments: --from-records games/ a.csa b.kif")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The file to write: 'startpos moves ...' lines, or 'sfen SFEN moves ...' "
                   "for games that did not start from the initial position (ShogiHome reads "
                   "both; cshogi.cli only the first). Written atomically.")
@click.option("--max-value", type=click.IntRange(0), default=100, show_default=True,
              help="Keep positions whose value is within this many cp of 0: the best book value, "
                   "or for records the evaluation recorded with the move played from the "
                   "position (CSA \"'** N\" comments, KIF \"評価値 N\"). Record positions "
                   "without one are not taken (see --ignore-values).")
@click.option("--min-ply", type=click.IntRange(1), default=1, show_default=True,
              help="Plies counted from the start position (which is ply 1).")
@click.option("--max-ply", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--plies", metavar="N,N,...",
              help="Exactly these plies instead of the --min-ply/--max-ply range. Ply 1 is the "
                   "start position: dlshogi's positions after 24 and 36 moves are --plies 25,37.")
@click.option("--values", type=click.Choice(["raw", "minimax"]), default="raw",
              show_default=True, help="[book] Which book values decide the balance.")
@click.option("--min-moves", type=click.IntRange(0), default=50, show_default=True,
              help="[records] Only games of at least this many moves.")
@click.option("--min-rating", type=float,
              help="[records] Only games whose players are both rated at least this (CSA "
                   "'black_rate:/'white_rate: lines, as floodgate writes them). Games without "
                   "both ratings are left out unless --allow-unrated.")
@click.option("--allow-unrated", is_flag=True,
              help="[records] With --min-rating, keep games that record no ratings.")
@click.option("--max-line-value", type=click.IntRange(0),
              help="[records] Also require every evaluation recorded before the position to be "
                   "within this many cp of 0 (dlshogi uses 170).")
@click.option("--ignore-values", is_flag=True,
              help="[records] Take the positions at the selected plies whatever their recorded "
                   "evaluation, and also without one.")
@click.option("--strict", is_flag=True,
              help="[records] A bad record (unreadable, undecodable, illegal move, ...) is an "
                   "error (exit 2, output untouched) instead of being reported and skipped.")
@click.option("--limit", type=click.IntRange(1), help="At most this many positions (sampled).")
@click.option("--per-line-cap", type=click.IntRange(1),
              help="At most this many positions sharing the same start and first --cap-plies "
                   "moves.")
@click.option("--cap-plies", type=click.IntRange(1), default=4, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def suite_command(more_records: tuple[str, ...], book: str, records: tuple[str, ...],
                  output: str, max_value: int, min_ply: int, max_ply: int, plies: str | None,
                  values: str, min_moves: int, min_rating: float | None, allow_unrated: bool,
                  max_line_value: int | None, ignore_values: bool, strict: bool,
                  limit: int | None, per_line_cap: int | None, cap_plies: int, seed: int,
                  as_json: bool) -> None:
    """Cut a suite of balanced positions from the book or from game records.

    From the book (dlshogi's make_gokaku_sfen): breadth-first from the initial
    position, |best value| <= --max-value, lines whose best moves repeat within
    36 plies left out.

    From records (--from-records, dlshogi's csa_to_gokakusfen): the positions at
    the selected plies of games with at least --min-moves moves (and players
    rated --min-rating or more) whose recorded evaluation is within --max-value.
    A position met in several games or by several move orders is written once.
    Record evaluations are from black's point of view and attached to the move
    played from the position they evaluate (so a game's last position has
    none); the summary's value buckets are from the side to move's point of
    view, as for book suites. Bad records are reported on stderr as
    FILE: reason and skipped (--strict: exit 2).
    """
    from bookgen.analysis.suites import make_suite, parse_plies

    ply_list = parse_plies(plies) if plies is not None else None
    if ply_list is not None and (_given("min_ply") or _given("max_ply")):
        raise BookgenError("--plies replaces --min-ply/--max-ply: give one or the other")
    if records:
        for name, flag in _BOOK_ONLY:
            if _given(name):
                raise BookgenError(f"{flag} is for book suites, not with --from-records")
        if ignore_values and (_given("max_value") or _given("max_line_value")):
            raise BookgenError("--ignore-values takes positions whatever their evaluation: "
                               "it cannot go with --max-value or --max-line-value")
        if allow_unrated and min_rating is None:
            raise BookgenError("--allow-unrated only applies with --min-rating")
    else:
        if more_records:
            raise BookgenError(f"{more_records[0]}: record paths need --from-records")
        for name, flag in _RECORDS_ONLY:
            if _given(name):
                raise BookgenError(f"{flag} is for suites from game records (--from-records)")

    if not records:
        summary = make_suite(output, book, max_value=max_value, min_ply=min_ply,
                             max_ply=max_ply, plies=ply_list, values=values, limit=limit,
                             per_line_cap=per_line_cap, cap_plies=cap_plies, seed=seed)
    else:
        from bookgen.analysis.records import make_suite_from_records

        summary = make_suite_from_records(
            output, [*records, *more_records], max_value=max_value, min_ply=min_ply,
            max_ply=max_ply, plies=ply_list, min_moves=min_moves, min_rating=min_rating,
            allow_unrated=allow_unrated, ignore_values=ignore_values,
            max_line_value=max_line_value, limit=limit, per_line_cap=per_line_cap,
            cap_plies=cap_plies, seed=seed, strict=strict,
            on_bad=lambda message: click.echo(f"bookgen: skipped {message}", err=True))
    _print_summary(summary, as_json)


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    click.echo(f"{summary['file']}: {summary['positions']} positions; "
               f"by ply {_counts(summary['by_ply'])}; by value {_counts(summary['by_value'])}")
    if "records" in summary:
        records, games = summary["records"], summary["games"]
        click.echo(f"records: {records['files']} files, {records['read']} games read, "
                   f"{records['skipped']} skipped as bad; games used: {games['used']} "
                   f"({games['with_positions']} with positions; left out: "
                   f"{games['too_short']} too short, {games['unrated']} unrated, "
                   f"{games['below_min_rating']} below --min-rating); "
                   f"{summary['candidates']} positions found, "
                   f"{summary['duplicates']} duplicates")
