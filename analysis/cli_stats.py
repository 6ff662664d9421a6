"""``bookgen sprt`` and ``bookgen outcomes``: the command-line side of
:mod:`bookgen.analysis.pairstats` and :mod:`bookgen.analysis.outcomes`.

Both read results files (SQLite, opened read-only, so a file that a running
match is writing can be read) and PGN files.
"""

from __future__ import annotations

import json

import click

from bookgen.cli_support import reports_errors
from bookgen.errors import BookgenError

RESULTS_ARGUMENT = click.argument("results", nargs=-1, required=True,
                                  type=click.Path(dir_okay=False))


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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
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
    from bookgen.analysis.pairstats import sprt
    from bookgen.analysis.results import load_games

    games = load_games(results)
    result = sprt(games, engine, opponent, elo0=elo0, elo1=elo1, alpha=alpha, beta=beta,
                  model=model, trinomial=trinomial)
    if as_json:
        click.echo(json.dumps(result.as_json(), indent=2))
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
@click.option("--json", "as_json", is_flag=True, help="Print the table and tests as JSON.")
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
        click.echo(json.dumps({"table": table.to_dict(orient="index"),
                               "tests": [test.as_json() for test in tests]}, indent=2))
        return
    click.echo(table.to_string())
    for test in tests:
        click.echo("")
        click.echo(test.format_text(notes=False))
    notes = dict.fromkeys(note for test in tests for note in test.notes)
    for note in notes:
        click.echo(f"\nnote: {note}")
