"""``bookgen rate``: the command-line side of :mod:`bookgen.analysis.ratings` (Ordo) and
:mod:`bookgen.analysis.bayeselo`."""

from __future__ import annotations

import json
from typing import Any

import click

from bookgen.cli_support import reports_errors
from bookgen.errors import BookgenError


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
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
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
@click.option("--seed", type=int, default=0, show_default=True,
              help="Random seed of the simulations.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
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

    table: Any
    if model == "bayeselo":
        from bookgen.analysis.bayeselo import DEFAULT_ADVANTAGE, DEFAULT_DRAW_ELO, DEFAULT_PRIOR
        from bookgen.analysis.bayeselo import fit_bayeselo

        table = fit_bayeselo(
            games, advantage=None if white_advantage else DEFAULT_ADVANTAGE,
            draw_elo=None if draw_rate else DEFAULT_DRAW_ELO,
            prior=DEFAULT_PRIOR if prior is None else prior, confidence=confidence,
            average=average or 0.0, anchor=anchor, anchor_rating=anchor_rating or 0.0)
        ratings = {p.name: p.rating for p in table.players}
    else:
        from bookgen.analysis.ratings import DEFAULT_SCALE, fit_ratings

        table = fit_ratings(
            games, white_advantage=white_advantage, draw_rate=draw_rate,
            simulations=simulations, average=average or 0.0, anchor=anchor,
            anchor_rating=anchor_rating or 0.0,
            scale=DEFAULT_SCALE if scale is None else scale, confidence=confidence, seed=seed)
        ratings = table

    rows = None
    if head_to_head:
        from bookgen.analysis.ratings import head_to_head as pairings

        rows = pairings(games, ratings)
    if as_json:
        data = table.as_json()
        if rows is not None:
            data["head_to_head"] = rows
        click.echo(json.dumps(data, indent=2))
        return
    text = table.format_text()
    if rows:
        text += _head_to_head_text(rows)
    click.echo(text, nl=False)
