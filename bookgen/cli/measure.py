"""``bookgen suite``, ``match``, ``rate``, ``sprt``, ``outcomes`` and ``report``: measurement.

Thin layers over :mod:`bookgen.analysis`: suites from the book
(:mod:`bookgen.analysis.suites`) or from game records
(:mod:`bookgen.analysis.record_suites`), matches (:mod:`bookgen.analysis.match`),
ratings (:mod:`bookgen.analysis.ratings`, :mod:`bookgen.analysis.bayeselo`),
SPRT and outcome tests (:mod:`bookgen.analysis.pairstats`,
:mod:`bookgen.analysis.outcomes`) and reports (:mod:`bookgen.analysis.report`).
The commands that read results files open SQLite files read-only, so a file
that a running match is writing can be read, and read PGN files too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from bookgen.cli.options import (
    book_option,
    cluster_options,
    cluster_settings,
    json_option,
    output_option,
    seed_option,
)
from bookgen.cli.support import echo_json, exit_if_interrupted, reports_errors
from bookgen.errors import BookgenError, SettingsError
from bookgen.extras import require_extra

if TYPE_CHECKING:
    from bookgen.analysis.suites import SuiteSummary
    from bookgen.engines.player_settings import PlayerSettings
    from bookgen.play.clock import TimeControl

RESULTS_ARGUMENT = click.argument("results", nargs=-1, required=True,
                                  type=click.Path(dir_okay=False))

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
@book_option("The SQLite book file (book suites).")
@click.option("--from-records", "records", multiple=True, type=click.Path(),
              metavar="DIR|FILE",
              help="Cut the suite from game records instead of the book: CSA files (*.csa, "
                   "several games separated by '/' allowed), KIF files (*.kif, *.kifu; UTF-8 or "
                   "CP932) and directories searched recursively for them. Further record "
                   "paths may follow as arguments: --from-records games/ a.csa b.kif")
@output_option("The file to write: 'startpos moves ...' lines, or 'sfen SFEN moves ...' "
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
@seed_option()
@json_option()
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
    from bookgen.analysis.suites import (
        BookSuiteSettings,
        SuiteSelection,
        make_suite,
        parse_plies,
    )

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
    else:
        if more_records:
            raise BookgenError(f"{more_records[0]}: record paths need --from-records")
        for name, flag in _RECORDS_ONLY:
            if _given(name):
                raise BookgenError(f"{flag} is for suites from game records (--from-records)")

    selection = SuiteSelection(max_value_cp=max_value, min_ply=min_ply, max_ply=max_ply,
                               plies=ply_list, per_line_cap=per_line_cap, cap_plies=cap_plies,
                               limit=limit, seed=seed)
    summary: SuiteSummary
    if not records:
        from bookgen.store import ValueColumn

        summary = make_suite(book, output, BookSuiteSettings(selection, ValueColumn(values)))
    else:
        from bookgen.analysis.record_suites import RecordSuiteSettings, make_suite_from_records

        settings = RecordSuiteSettings(
            selection, min_moves=min_moves, min_rating=min_rating, allow_unrated=allow_unrated,
            ignore_values=ignore_values, max_line_value_cp=max_line_value, strict=strict)
        summary = make_suite_from_records(
            [*records, *more_records], output, settings,
            on_bad=lambda message: click.echo(f"bookgen: skipped {message}", err=True))
    _print_summary(summary, as_json)


def _print_summary(summary: SuiteSummary, as_json: bool) -> None:
    from bookgen.analysis.record_suites import RecordSuiteSummary

    if as_json:
        echo_json(summary.as_dict(), ensure_ascii=False)
        return
    click.echo(f"{summary.file}: {summary.positions} positions; "
               f"by ply {_counts(summary.by_ply)}; by value {_counts(summary.by_value)}")
    if isinstance(summary, RecordSuiteSummary):
        records, games = summary.records, summary.games
        click.echo(f"records: {records.files} files, {records.read} games read, "
                   f"{records.skipped} skipped as bad; games used: {games.used} "
                   f"({games.with_positions} with positions; left out: "
                   f"{games.too_short} too short, {games.unrated} unrated, "
                   f"{games.below_min_rating} below --min-rating); "
                   f"{summary.candidates} positions found, "
                   f"{summary.duplicates} duplicates")



def _per_player(flag: str, texts: tuple[str, ...], names: list[str], example: str
                ) -> dict[str, list[tuple[str, str]]]:
    """``NAME:KEY=VALUE`` flags (``--option``, ``--go-option``) by player name, each
    a one-line error when malformed or naming no player."""
    by_name: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
    for text in texts:
        name, sep, rest = text.partition(":")
        key, eq, value = rest.partition("=")
        if not sep or not eq or not key.strip():
            raise BookgenError(f"bad {flag} {text!r}: expected NAME:KEY=VALUE "
                               f"(for example {example})")
        if name not in by_name:
            raise BookgenError(f"{flag} {text!r}: no player named {name!r} "
                               f"(players: {', '.join(by_name) or 'none'})")
        by_name[name].append((key.strip(), value.strip()))
    return by_name


def parse_players(engines: tuple[str, ...], builtins: tuple[str, ...],
                  options: tuple[str, ...], go_options: tuple[str, ...] = ()
                  ) -> list[PlayerSettings]:
    """Match players from ``NAME=usi:CMD``, builtin ``NAME``, ``NAME:KEY=VALUE`` options
    and ``NAME:KEY=VALUE`` go options."""
    from bookgen.analysis.match import match_player

    entries: list[tuple[str, str]] = []
    for text in engines:
        name, sep, spec = text.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not name or not (spec == "builtin" or spec.startswith("usi:")
                                       and spec[4:].strip()):
            raise BookgenError(f"bad --engine {text!r}: expected NAME=usi:COMMAND or "
                               "NAME=builtin (for example fsf=usi:/usr/games/fairy-stockfish)")
        entries.append((name, spec))
    entries += [(name.strip(), "builtin") for name in builtins]
    names = [name for name, _ in entries]
    by_name = _per_player("--option", options, names, "fsf:Threads=1")
    go_by_name = _per_player("--go-option", go_options, names, "fsf:depth=12")
    for name, spec in entries:
        if spec == "builtin" and go_by_name[name]:
            raise BookgenError(f"--go-option {name}:...: player {name} is the built-in "
                               "player, not a USI engine")
    return [match_player(name, spec, tuple(by_name[name]), tuple(go_by_name[name]))
            for name, spec in entries]


def parse_controls(tcs: tuple[str, ...], nodes: tuple[str, ...], margin: int,
                   engine_timeout: float | None, players: list[str]
                   ) -> tuple[TimeControl | None, int | None, tuple[tuple[str, TimeControl], ...]]:
    """The unnamed ``--tc CONTROL`` and ``--nodes N`` (None: not given), and the named
    ``--tc NAME:CONTROL``/``--nodes NAME:N`` controls of single ``players``."""
    from bookgen.analysis.match import parse_control
    from bookgen.play.clock import TimeControl

    default: TimeControl | None = None
    default_nodes: int | None = None
    named: list[tuple[str, TimeControl]] = []
    for text in tcs:
        name, sep, rest = text.partition(":") if ":" in text else ("", "", text)
        if sep and name.strip() not in players:
            raise BookgenError(f"--tc {text!r}: no player named {name.strip()!r} (players: "
                               f"{', '.join(players)})")
        try:
            control = parse_control(rest, margin=margin, engine_timeout=engine_timeout)
        except SettingsError as error:
            raise BookgenError(f"bad --tc {text!r}: "
                               f"{error.message.partition(': ')[2]}") from None
        if sep:
            named.append((name.strip(), control))
        elif default is not None:
            raise BookgenError(f"--tc {text!r}: a second default control (NAME:CONTROL "
                               "gives one player its own)")
        else:
            default = control
    for text in nodes:
        name, sep, rest = text.rpartition(":")
        if not rest.strip().isdigit() or (sep and not name.strip()):
            raise BookgenError(f"bad --nodes {text!r}: expected N or NAME:N")
        if sep and name.strip() not in players:
            raise BookgenError(f"--nodes {text!r}: no player named {name.strip()!r} "
                               f"(players: {', '.join(players)})")
        if sep:
            named.append((name.strip(), TimeControl(nodes=int(rest), margin=margin,
                                                    engine_timeout=engine_timeout)))
        elif default_nodes is not None:
            raise BookgenError(f"--nodes {text!r}: a second default node budget (NAME:N "
                               "gives one player its own)")
        else:
            default_nodes = int(rest)
    return default, default_nodes, tuple(named)


@click.command("match")
@click.option("--engine", "engines", multiple=True, metavar="NAME=usi:CMD",
              help="A USI engine player (repeat for more; NAME=builtin is the built-in "
                   "player). Players keep this order.")
@click.option("--builtin", "builtins", multiple=True, metavar="NAME",
              help="A built-in player (alpha-beta; options NAME:depth=D, default 64, and "
                   "NAME:nodes=N, default 20000, a budget the first iteration ignores), "
                   "after the --engine players. Needs nothing installed.")
@click.option("--option", "options", multiple=True, metavar="NAME:KEY=VALUE",
              help="A USI option (or built-in setting) for one player.")
@click.option("--openings", required=True, type=click.Path(dir_okay=False),
              help="Start positions, one per line: 'startpos moves ...', 'sfen ...' "
                   "(bookgen suite writes them).")
@click.option("--games", type=int,
              help="Games per pairing (even: each opening is a colour-swapped pair).")
@click.option("--rounds", type=int,
              help="Play every opening this many times per pairing (default 1).")
@click.option("--format", "fmt", type=click.Choice(["pairs", "round-robin", "gauntlet"]),
              default=None, help="pairs: two players; round-robin: everyone meets; "
                                 "gauntlet: the first --engine meets each other one. "
                                 "[default: pairs for two players, else round-robin]")
@click.option("--byoyomi", type=int, metavar="MS",
              help="Time per move (byoyomi; 1000 when no limit is given).")
@click.option("--time", "main_time", type=int, metavar="MS", help="Main time per side.")
@click.option("--inc", type=int, metavar="MS", help="Fischer increment per move.")
@click.option("--nodes", "nodes", multiple=True, metavar="[NAME:]N",
              help="Node budget per move (no clock); NAME:N for player NAME only (node "
                   "odds).")
@click.option("--tc", "tcs", multiple=True, metavar="[NAME:]CONTROL",
              help="A time control as KEY=VALUE[,...] with keys byoyomi, time, inc (ms) "
                   "and nodes: byoyomi=1000, time=60000,inc=1000, nodes=100000. NAME:CONTROL "
                   "for player NAME only (time odds; the others keep the default); without "
                   "NAME, the default (instead of --byoyomi/--time/--inc/--nodes).")
@click.option("--margin", type=int, default=1000, show_default=True, metavar="MS",
              help="Lag allowed past the clock before a time forfeit: over the game "
                   "with --time/--inc, per move in byoyomi (gpsusi rounds byoyomi up "
                   "to whole seconds).")
@click.option("--engine-timeout", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              help="Longest wait for a move under --nodes [default: 10 s + nodes / 10,000 s, "
                   "e.g. 20 s for 100,000 nodes].")
@click.option("--go-option", "go_options", multiple=True, metavar="NAME:KEY=VALUE",
              help="Add 'KEY VALUE' to every go of player NAME (e.g. fsf:depth=12); not "
                   "the limits the runner sets (btime, wtime, binc, winc, byoyomi, nodes, "
                   "movetime, ponder).")
@click.option("--ponder", is_flag=True,
              help="Engines that declare USI_Ponder (Fairy-Stockfish: Ponder) ponder: go "
                   "ponder on the expected reply, ponderhit or stop, as a GUI does; their "
                   "clock runs from ponderhit.")
@click.option("--transcripts", type=click.Path(file_okay=False), metavar="DIR",
              help="Write each game's USI transcript (every line sent and received, in ms "
                   "since the game began) to DIR, gzip-compressed, one file per game.")
@click.option("--transcripts-on", type=click.Choice(["all", "failure"]), default="all",
              show_default=True,
              help="Keep the transcripts of all games, or only of failed ones (engine "
                   "failure, time forfeit, illegal move or declaration), which are "
                   "always kept.")
@click.option("--concurrency", type=int, default=1, show_default=True,
              help="Games played at once (one worker process each).")
@cluster_options("--concurrency")
@click.option("--max-ply", type=int, default=320, show_default=True,
              help="Draw at this ply, counted from the initial position.")
@click.option("--resign", type=int, metavar="CP",
              help="Adjudicate: a side whose own score stays <= -CP resigns.")
@click.option("--resign-moves", type=int, default=3, show_default=True,
              help="Consecutive moves at or below -CP before --resign applies.")
@click.option("--declaration-rule", type=click.Choice(["27", "24"]), default="27",
              show_default=True, help="Entering-king declaration rule.")
@click.option("-o", "--output", "results", default="results.sqlite", show_default=True,
              type=click.Path(dir_okay=False), help="The SQLite results file (appended to).")
@click.option("--pgn", type=click.Path(dir_okay=False),
              help="Also append games to this PGN file (sente as White, for Ordo/BayesElo).")
@click.option("--csa", "csa_dir", type=click.Path(file_okay=False),
              help="Also write each game as a CSA record in this directory.")
@click.option("--seed", type=int, help="Shuffle the openings with this seed (file order "
                                       "without it).")
@click.option("--record-moves/--no-record-moves", default=True, show_default=True,
              help="Write every move's score, bound, depth, seldepth, nodes, time, PV and "
                   "source (the engine's own book or a search) to the results file.")
@click.option("--sprt", "sprt", metavar="ENGINE:ELO0,ELO1",
              help="Stop when a GSPRT of ENGINE, the engine under test, against the other "
                   "player ends (H0: ENGINE is ELO0 stronger, H1: ELO1 stronger; pairs "
                   "format). Without 'ENGINE:' the first player is the engine under test "
                   "(as in cutechess and fastchess), and the output says so.")
@click.option("--sprt-alpha", type=float, default=0.05, show_default=True)
@click.option("--sprt-beta", type=float, default=0.05, show_default=True)
@click.option("--sprt-model", type=click.Choice(["normalized", "logistic"]),
              default="normalized", show_default=True)
@json_option()
@click.option("--quiet", is_flag=True, help="No progress bar.")
@reports_errors
def match_command(engines: tuple[str, ...], builtins: tuple[str, ...], options: tuple[str, ...],
                  openings: str, games: int | None, rounds: int | None, fmt: str | None,
                  byoyomi: int | None, main_time: int | None, inc: int | None,
                  nodes: tuple[str, ...], tcs: tuple[str, ...], margin: int,
                  engine_timeout: float | None, go_options: tuple[str, ...], ponder: bool,
                  transcripts: str | None, transcripts_on: str, concurrency: int,
                  cluster: str | None, worker_resources: tuple[str, ...], max_ply: int,
                  resign: int | None, resign_moves: int, declaration_rule: str,
                  results: str, pgn: str | None, csa_dir: str | None, seed: int | None,
                  record_moves: bool, sprt: str | None, sprt_alpha: float, sprt_beta: float,
                  sprt_model: str, as_json: bool, quiet: bool) -> None:
    """Play engine matches from an openings file; each opening is played twice
    with colours swapped. The runner enforces the rules (illegal moves, time,
    repetition and perpetual check, declaration, max ply, resignation) and
    scores a crashed or hung engine's game as its loss. Results go to a SQLite
    file; rerunning the same command plays only the missing games.

    \b
    Example:
      bookgen match --engine fsf=usi:/usr/games/fairy-stockfish \\
          --engine gps=usi:/usr/games/gpsusi --option gps:BookDepth=0 \\
          --openings suite.txt --byoyomi 1000 --games 20 -o results.sqlite
    """
    from bookgen.analysis.match import MatchSettings, run_match
    from bookgen.play.clock import TimeControl
    from bookgen.play.loop import GameRules

    players = parse_players(engines, builtins, options, go_options)
    fmt = fmt or ("pairs" if len(players) == 2 else "round-robin")
    default, default_nodes, controls = parse_controls(tcs, nodes, margin, engine_timeout,
                                                     [p.name or "" for p in players])
    if default is not None:
        if any(x is not None for x in (byoyomi, main_time, inc, default_nodes)):
            raise BookgenError("--tc CONTROL excludes --byoyomi, --time, --inc and --nodes N "
                               "(the default control, given once)")
        control = default
    else:
        control = TimeControl(byoyomi=byoyomi, time=main_time, inc=inc, nodes=default_nodes,
                              margin=margin, engine_timeout=engine_timeout)
        if not any((byoyomi, main_time, inc, default_nodes)):
            control = TimeControl(byoyomi=1000, margin=margin, engine_timeout=engine_timeout)
    test = None
    if sprt is not None:
        from bookgen.analysis.match import parse_match_sprt

        test = parse_match_sprt(sprt, [p.name or "" for p in players], alpha=sprt_alpha,
                                beta=sprt_beta, model=sprt_model)
        note = "" if test.named else (f" (the first player; name another with --sprt "
                                      f"{test.opponent}:{sprt})")
        click.echo(f"bookgen: {test.describe()}{note}", err=True)
    settings = MatchSettings(
        control=control, rules=GameRules(max_ply=max_ply, declaration_rule=declaration_rule,
                                         resign_cp=resign, resign_moves=resign_moves),
        format=fmt, games=games, rounds=rounds, concurrency=concurrency, seed=seed, pgn=pgn,
        csa_dir=csa_dir, sprt=test, record_moves=record_moves,
        cluster=cluster_settings(cluster, worker_resources, "concurrency"), controls=controls,
        ponder=ponder, transcripts=transcripts, transcripts_on=transcripts_on)
    summary = run_match(players, openings, results, settings, progress=not quiet)
    if as_json:
        echo_json(summary.as_dict())
        exit_if_interrupted(summary.interrupted, "rerun the same command to play the "
                                                 "missing games")
        return
    click.echo(f"{summary.results}: match {summary.match_id}: {summary.played} games played "
               f"({summary.previously_played} of {summary.scheduled} were already there) in "
               f"{summary.seconds:.1f} s")
    for name in sorted(summary.points, key=lambda n: -summary.points[n]):
        click.echo(f"  {name}: {summary.points[name]:g} / {summary.games_by_player[name]}")
    if summary.reasons:
        click.echo("  endings: " + ", ".join(f"{k} {v}" for k, v in
                                              sorted(summary.reasons.items())))
    if summary.stopped_by:
        click.echo(f"  stopped: {summary.stopped_by}")
    elif test is not None:
        state = summary.sprt
        click.echo(f"  SPRT for {test.engine} vs {test.opponent}: " + (
            state["verdict_sentence"] if state is not None else "no game between them yet"))
    if summary.interrupted:
        from bookgen.workers.runcontrol import in_flight

        click.echo(f"  interrupted: {in_flight(summary.dropped, 'game')}")
    exit_if_interrupted(summary.interrupted, "rerun the same command to play the missing games")


def _head_to_head_text(rows: list[dict[str, Any]]) -> str:
    width = max(len(row["opponent"]) for row in rows)
    lines = ["", "Head to head (rating difference; W D L from the player's side):"]
    current = None
    for row in rows:
        if row["player"] != current:
            current = row["player"]
            lines.append(current)
        score = 100 * row["points"] / row["played"]
        lines.append(f"  vs {row['opponent']:<{width}} {row['rating_diff']:>+8.1f}  "
                     f"W {row['w']:>5}  D {row['d']:>5}  L {row['l']:>5}  "
                     f"{row['points']:>7.1f} / {row['played']:<6} ({score:5.1f} %)")
    return "\n".join(lines) + "\n"


@click.command("rate")
@RESULTS_ARGUMENT
@click.option("-W", "--white-advantage", is_flag=True,
              help="Fit the white (= sente, first player) advantage; without it the "
                   "advantage is 0 (bayeselo: fit 'advantage' instead of using 32.8).")
@click.option("-D", "--draw-rate", is_flag=True,
              help="Fit the draw rate between equal opponents (Ordo -D). It does not change "
                   "the ratings, only the simulations; without it they assume Ordo's "
                   "default of 50 %, which understates the errors when draws are rare "
                   "(bayeselo: fit drawElo instead of using 97.3).")
@click.option("-s", "--simulations", type=click.IntRange(0), default=0, show_default=True,
              help="Parametric bootstrap runs for ERROR and CFS (Ordo -s; 0 = none, "
                   "otherwise at least 2; 1000 is plenty). Ordo model only.")
@click.option("-a", "--average", type=float, default=None,
              help="Rating of the pool average.  [default: 0]")
@click.option("-A", "--anchor", default=None, metavar="NAME",
              help="Fix this player's rating (at --anchor-rating) instead of the pool "
                   "average; errors are then relative to it.")
@click.option("--anchor-rating", type=float, default=None,
              help="Rating of the --anchor player.  [default: 0]")
@click.option("-z", "--scale", type=click.FloatRange(0, min_open=True), default=None,
              help="Rating difference that means a 76 % expected score (Ordo -z).  "
                   "[default: 202]")
@click.option("-F", "--confidence", type=click.FloatRange(0, 100, min_open=True, max_open=True),
              default=95.0, show_default=True, help="Confidence (%) of the error margins.")
@click.option("--head-to-head", is_flag=True,
              help="Also list every pairing's results and rating difference.")
@click.option("--model", type=click.Choice(["ordo", "bayeselo"]), default="ordo",
              show_default=True, help="Rating model.")
@click.option("--prior", type=click.FloatRange(0), default=None,
              help="bayeselo only: virtual draws of the prior.  [default: 2]")
@seed_option("Random seed of the simulations.")
@json_option("Print the table as JSON.")
@reports_errors
def rate_command(results: tuple[str, ...], white_advantage: bool, draw_rate: bool,
                 simulations: int, average: float | None, anchor: str | None,
                 anchor_rating: float | None, scale: float | None, confidence: float,
                 head_to_head: bool, model: str, prior: float | None, seed: int,
                 as_json: bool) -> None:
    """Rate the players of match RESULTS (results .sqlite files and PGN files).

    The default model is Ordo's: ratings in Ordo points (202 points = 76 %
    expected score, about 1.0088 Elo) that make every player's expected score
    equal its points. Sente is the first player ("White" in PGN files).
    Players with a 100 % (0 %) score get a floor (ceiling) rating marked >
    (<): the rating they would have with one game drawn. The columns are
    Ordo's: RATING, ERROR (with --simulations), POINTS, PLAYED, (%), CFS(%)
    (confidence that the player is stronger than the next row), W, D, L, D(%).

    --model bayeselo gives Remi Coulom's BayesElo ratings (Elo scale, prior
    of 2 virtual draws) with their likelihood-of-superiority matrix.

    \b
    Examples:
      bookgen rate match.sqlite
      bookgen rate match.sqlite old.pgn -W -D -s 1000 --anchor base
      bookgen rate match.sqlite --model bayeselo --json
    """
    from bookgen.analysis.results import load_games

    if anchor is not None and average is not None:
        raise BookgenError("--anchor and --average cannot be used together (the anchor's "
                           "rating is --anchor-rating)")
    if anchor_rating is not None and anchor is None:
        raise BookgenError("--anchor-rating needs --anchor NAME")
    if simulations == 1:
        raise BookgenError("--simulations must be 0 or at least 2")
    if model == "bayeselo":
        for given, option in ((simulations, "--simulations"), (scale, "--scale")):
            if given:
                raise BookgenError(f"{option} applies to --model ordo only")
    elif prior is not None:
        raise BookgenError("--prior applies to --model bayeselo only")

    games = load_games(results)
    if not games:
        raise BookgenError(f"no finished games in {', '.join(results)}")
    names = {g.black for g in games} | {g.white for g in games}
    if anchor is not None and anchor not in names:
        known = sorted(names)
        raise BookgenError(f"--anchor {anchor!r}: no such player in {', '.join(results)} "
                           f"(players: {', '.join(known[:20])}"
                           f"{', ...' if len(known) > 20 else ''})")

    from bookgen.analysis.ratings import Anchor

    fixed = Anchor(anchor, anchor_rating or 0.0) if anchor is not None else None
    table: Any
    if model == "bayeselo":
        from bookgen.analysis.bayeselo import (
            DEFAULT_ADVANTAGE,
            DEFAULT_DRAW_ELO,
            DEFAULT_PRIOR,
            BayesEloSettings,
            fit_bayeselo,
        )

        table = fit_bayeselo(games, BayesEloSettings(
            advantage_elo=None if white_advantage else DEFAULT_ADVANTAGE,
            draw_elo=None if draw_rate else DEFAULT_DRAW_ELO,
            prior_draws=DEFAULT_PRIOR if prior is None else prior,
            confidence_percent=confidence, average=average or 0.0, anchor=fixed))
        ratings = {p.name: p.rating for p in table.players}
    else:
        from bookgen.analysis.ratings import DEFAULT_SCALE, RatingSettings, fit_ratings

        table = fit_ratings(games, RatingSettings(
            fit_white_advantage=white_advantage, fit_draw_rate=draw_rate,
            simulations=simulations, average=average or 0.0, anchor=fixed,
            scale=DEFAULT_SCALE if scale is None else scale, confidence_percent=confidence,
            seed=seed))
        ratings = table

    rows = None
    if head_to_head:
        from bookgen.analysis.ratings import head_to_head as pairings

        rows = pairings(games, ratings)
    if as_json:
        data = table.as_json()
        if rows is not None:
            data["head_to_head"] = rows
        echo_json(data)
        return
    text = table.format_text()
    if rows:
        text += _head_to_head_text(rows)
    click.echo(text, nl=False)


@click.command("sprt")
@RESULTS_ARGUMENT
@click.option("--engine", "engine", required=True, help="The engine under test (player name).")
@click.option("--vs", "opponent", required=True, help="Its opponent (player name).")
@click.option("--elo0", type=float, required=True, help="H0: the Elo difference is elo0.")
@click.option("--elo1", type=float, required=True, help="H1: the Elo difference is elo1.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="False positive rate (accepting H1 when H0 holds).")
@click.option("--beta", type=float, default=0.05, show_default=True,
              help="False negative rate (accepting H0 when H1 holds).")
@click.option("--model", type=click.Choice(["normalized", "logistic"]), default="normalized",
              show_default=True, help="Elo bounds in normalised Elo or logistic Elo.")
@click.option("--trinomial", is_flag=True,
              help="Count games (W/D/L) instead of colour-swapped pairs.")
@json_option("Print the result as JSON.")
@reports_errors
def sprt_command(results: tuple[str, ...], engine: str, opponent: str, elo0: float,
                 elo1: float, alpha: float, beta: float, model: str, trinomial: bool,
                 as_json: bool) -> None:
    """Sequential probability ratio test of ENGINE against an opponent.

    Prints W/D/L, the pentanomial of complete colour-swapped pairs, Elo and
    normalised Elo with 95 % errors, LOS, and the log-likelihood ratio with
    its bounds: H1 accepted, H0 accepted, or continue. Games outside a
    complete pair are left out of the pentanomial statistics (the report
    says how many); with --trinomial, or without any complete pair, every
    game counts on its own.
    """
    from bookgen.analysis.pairstats import SprtSettings, sprt
    from bookgen.analysis.results import load_games

    games = load_games(results)
    try:
        settings = SprtSettings(elo0, elo1, alpha=alpha, beta=beta, model=model,
                                trinomial=trinomial)
    except SettingsError as error:
        # sprt's texts have always named these settings as the library does
        # ("elo0 (5) must be below elo1 (0)", "alpha must be in (0, 1), ...").
        raise BookgenError(str(error)) from None
    result = sprt(games, engine, opponent, settings)
    if as_json:
        echo_json(result.as_json())
    else:
        click.echo(result.format_text())


@click.command("outcomes")
@RESULTS_ARGUMENT
@click.option("--ending", "endings", multiple=True,
              help="An ending to compare across players ('declaration win', or a bare reason "
                   "such as 'declaration'); repeatable. Default: every ending present.")
@click.option("--player", "players", multiple=True,
              help="Compare only these players (repeatable). Default: every player.")
@click.option("--naive", is_flag=True,
              help="Also run chisquare(k) as the dlshogi blog does (and say when it is wrong).")
@json_option("Print the table and tests as JSON.")
@reports_errors
def outcomes_command(results: tuple[str, ...], endings: tuple[str, ...],
                     players: tuple[str, ...], naive: bool, as_json: bool) -> None:
    """How games end, per player, and whether each ending's rate differs between players.

    An ending is '<reason> win' / '<reason> loss' / '<reason> draw' from the
    player's side. Each rate is compared with a contingency table
    (chi2_contingency, Fisher's exact test on a small 2x2 table) and
    Holm-corrected pairwise tests.
    """
    from bookgen.analysis.outcomes import outcome_table, test_rate
    from bookgen.analysis.results import load_games

    games = load_games(results)
    if not games:
        raise BookgenError("no games in " + ", ".join(results))
    table = outcome_table(games, list(endings) or None)
    if players:
        unknown = [p for p in players if p not in table.index]
        if unknown:
            raise BookgenError(f"unknown player {', '.join(map(repr, unknown))}; players "
                               f"found: {', '.join(table.index)}")
        table = table.loc[list(dict.fromkeys(players))]
    # By default every ending that the compared players have.
    wanted = list(endings) if endings else [c for c in table.columns
                                            if c != "games" and table[c].sum() > 0]
    table = table[["games", *wanted]]
    tests = [test_rate(games, ending, naive=naive, players=list(players) or None)
             for ending in wanted]
    if as_json:
        echo_json({"table": table.to_dict(orient="index"),
                   "tests": [test.as_json() for test in tests]})
        return
    click.echo(table.to_string())
    for test in tests:
        click.echo("")
        click.echo(test.format_text(notes=False))
    notes = dict.fromkeys(note for test in tests for note in test.notes)
    for note in notes:
        click.echo(f"\nnote: {note}")


@click.command("report")
@click.argument("results", nargs=-1, type=click.Path(dir_okay=False))
@output_option("The HTML file to write (self-contained: CSS and figures embedded).",
               required=False)
@click.option("--cycle", "cycle_dir", type=click.Path(file_okay=False),
              help="Report on a 'bookgen cycle' directory instead, across its generations "
                   "(text, or --json; -o also writes it as HTML).")
@book_option("Also describe this bookgen book (opened read-only).", default=None)
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
@seed_option("Random seed of the simulations.")
@click.option("--title", default=None, help="Title of the report.  [default: bookgen match "
                                            "report]")
@json_option("Print a summary as JSON.")
@reports_errors
def report_command(results: tuple[str, ...], output: str | None, cycle_dir: str | None,
                   book: str | None, markdown: str | None, sprt_tests: tuple[str, ...],
                   white_advantage: bool, draw_rate: bool, simulations: int, seed: int,
                   title: str | None, as_json: bool) -> None:
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
      bookgen report --cycle demo/cycle --json
    """
    if cycle_dir is not None:
        _cycle_report(cycle_dir, results, output, simulations, seed, as_json)
        return
    if not results:
        raise click.UsageError("Missing argument 'RESULTS...'.")
    if output is None:
        raise click.UsageError("Missing option '-o' / '--output'.")
    require_extra("matplotlib", "report", "report")
    from bookgen.analysis.ratings import RatingSettings
    from bookgen.analysis.report import (
        ReportSettings,
        build_report,
        report_summary,
        write_html,
        write_markdown,
    )
    from bookgen.files import check_output

    if simulations == 1:
        raise BookgenError("--simulations must be 0 or at least 2")
    # Refuse a bad output before the simulations, not after.
    inputs = [*results, *([book] if book else [])]
    for path in (output, markdown):
        if path is not None:
            check_output(path, inputs)
    if markdown is not None and Path(markdown).resolve() == Path(output).resolve():
        raise BookgenError("--markdown and -o name the same file")
    rating = RatingSettings(fit_white_advantage=white_advantage, fit_draw_rate=draw_rate,
                            simulations=simulations, seed=seed)
    report = build_report(ReportSettings(results, book=book, sprt_tests=tuple(sprt_tests),
                                         rating=rating, title=title))
    write_html(report, output)
    if markdown is not None:
        write_markdown(report, markdown)
    if as_json:
        summary = report_summary(report)
        summary["html"] = output
        summary["markdown"] = markdown
        echo_json(summary)
        return
    written = output + (f" and {markdown}" if markdown else "")
    click.echo(f"{written}: {report.games} games, {len(report.players)} players, "
               f"{len(report.figures)} figures")


def _cycle_report(directory: str, results: tuple[str, ...], output: str | None,
                  simulations: int, seed: int, as_json: bool) -> None:
    """``report --cycle DIR``: the generations of a cycle, as text, JSON or HTML."""
    from bookgen.analysis.cycle_report import (
        CycleReportSettings,
        build_cycle_report,
        format_cycle_report,
    )

    if results:
        raise BookgenError("--cycle reports on the cycle's own matches: give no RESULTS")
    given = [flag for name, flag in (("book", "-b/--book"), ("markdown", "--markdown"),
                                     ("sprt_tests", "--sprt"), ("white_advantage", "-W"),
                                     ("draw_rate", "-D"), ("title", "--title")) if _given(name)]
    if given:
        raise BookgenError(f"{given[0]} does not apply to --cycle")
    if simulations == 1:
        raise BookgenError("--simulations must be 0 or at least 2")
    report = build_cycle_report(directory, CycleReportSettings(simulations, seed))
    text = format_cycle_report(report)
    if output is not None:
        import html

        from bookgen.files import atomic_write

        page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bookgen cycle "
                f"{html.escape(directory)}</title></head><body><h1>bookgen cycle "
                f"{html.escape(directory)}</h1><pre>{html.escape(text)}</pre></body></html>\n")
        atomic_write(output, page.encode())
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(text, nl=False)
