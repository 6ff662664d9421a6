"""``bookgen match``: the command-line side of :mod:`bookgen.analysis.match`."""

from __future__ import annotations

import json

import click

from bookgen.cli_support import exit_if_interrupted, reports_errors
from bookgen.errors import BookgenError


def parse_players(engines: tuple[str, ...], builtins: tuple[str, ...],
                  options: tuple[str, ...]) -> list:
    """PlayerSpecs from ``NAME=usi:CMD``, builtin ``NAME`` and ``NAME:KEY=VALUE`` options."""
    from bookgen.analysis.players import BUILTIN, PlayerSpec

    entries: list[tuple[str, str]] = []
    for text in engines:
        name, sep, spec = text.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not name or not (spec == BUILTIN or spec.startswith("usi:")
                                       and spec[4:].strip()):
            raise BookgenError(f"bad --engine {text!r}: expected NAME=usi:COMMAND or "
                               "NAME=builtin (for example fsf=usi:/usr/games/fairy-stockfish)")
        entries.append((name, spec))
    entries += [(name.strip(), BUILTIN) for name in builtins]
    by_name: dict[str, list[tuple[str, str]]] = {name: [] for name, _ in entries}
    for text in options:
        name, sep, rest = text.partition(":")
        option, eq, value = rest.partition("=")
        if not sep or not eq or not option.strip():
            raise BookgenError(f"bad --option {text!r}: expected NAME:KEY=VALUE "
                               "(for example fsf:Threads=1)")
        if name not in by_name:
            raise BookgenError(f"--option {text!r}: no player named {name!r} "
                               f"(players: {', '.join(by_name) or 'none'})")
        by_name[name].append((option.strip(), value.strip()))
    return [PlayerSpec(name, spec, tuple(by_name[name])) for name, spec in entries]


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
@click.option("--nodes", type=int, help="Node budget per move (no clock).")
@click.option("--margin", type=int, default=1000, show_default=True, metavar="MS",
              help="Lag allowed past the clock before a time forfeit: over the game "
                   "with --time/--inc, per move in byoyomi (gpsusi rounds byoyomi up "
                   "to whole seconds).")
@click.option("--engine-timeout", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              help="Longest wait for a move under --nodes [default: 10 s + nodes / 10,000 s, "
                   "e.g. 20 s for 100,000 nodes].")
@click.option("--concurrency", type=int, default=1, show_default=True,
              help="Games played at once (one worker process each).")
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
@click.option("--sprt", "sprt", metavar="ENGINE:ELO0,ELO1",
              help="Stop when a GSPRT of ENGINE, the engine under test, against the other "
                   "player ends (H0: ENGINE is ELO0 stronger, H1: ELO1 stronger; pairs "
                   "format). Without 'ENGINE:' the first player is the engine under test "
                   "(as in cutechess and fastchess), and the output says so.")
@click.option("--sprt-alpha", type=float, default=0.05, show_default=True)
@click.option("--sprt-beta", type=float, default=0.05, show_default=True)
@click.option("--sprt-model", type=click.Choice(["normalized", "logistic"]),
              default="normalized", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@reports_errors
def match_command(engines: tuple[str, ...], builtins: tuple[str, ...], options: tuple[str, ...],
                  openings: str, games: int | None, rounds: int | None, fmt: str | None,
                  byoyomi: int | None, main_time: int | None, inc: int | None,
                  nodes: int | None, margin: int, engine_timeout: float | None, concurrency: int,
                  max_ply: int, resign: int | None, resign_moves: int, declaration_rule: str,
                  results: str, pgn: str | None, csa_dir: str | None, seed: int | None,
                  sprt: str | None, sprt_alpha: float, sprt_beta: float, sprt_model: str,
                  as_json: bool, quiet: bool) -> None:
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
    from bookgen.analysis.match import run_match
    from bookgen.play.clock import TimeControl

    players = parse_players(engines, builtins, options)
    fmt = fmt or ("pairs" if len(players) == 2 else "round-robin")
    control = TimeControl(byoyomi=byoyomi, time=main_time, inc=inc, nodes=nodes, margin=margin,
                          engine_timeout=engine_timeout)
    if not any((byoyomi, main_time, inc, nodes)):
        control = TimeControl(byoyomi=1000, margin=margin, engine_timeout=engine_timeout)
    test = None
    if sprt is not None:
        from bookgen.analysis.match import parse_match_sprt

        test = parse_match_sprt(sprt, [p.name for p in players], alpha=sprt_alpha,
                                beta=sprt_beta, model=sprt_model)
        note = "" if test.named else (f" (the first player; name another with --sprt "
                                      f"{test.opponent}:{sprt})")
        click.echo(f"bookgen: {test.describe()}{note}", err=True)
    summary = run_match(players, openings, results, fmt=fmt, games=games, rounds=rounds,
                        control=control, max_ply=max_ply, resign=resign,
                        resign_moves=resign_moves, declaration_rule=declaration_rule,
                        concurrency=concurrency, pgn=pgn, csa_dir=csa_dir, seed=seed,
                        sprt=test, progress=not quiet)
    if as_json:
        click.echo(json.dumps(summary.as_dict(), indent=2))
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
        from bookgen.runcontrol import in_flight

        click.echo(f"  interrupted: {in_flight(summary.dropped, 'game')}")
    exit_if_interrupted(summary.interrupted, "rerun the same command to play the missing games")
