"""A match's standings and SPRT state for the live view of ``bookgen serve --results``.

:func:`live_standings` ranks the players of a match's games with the same Ordo
fit as ``bookgen rate`` (:func:`bookgen.analysis.ratings.fit_ratings`, with
:data:`SIMULATIONS` simulations for the errors) and gives each pairing its W/D/L
and Elo difference as ``bookgen sprt`` estimates it
(:func:`bookgen.analysis.pairstats.count_games`: pentanomial over complete
colour-swapped pairs when there are any, else trinomial). :func:`live_sprt` is
the state of the SPRT that ``bookgen match --sprt`` recorded. The command line
passes both to the explorer (:class:`bookgen.explore.live.LiveView`), which does
not import a stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from bookgen.analysis.pairstats import (
    EloEstimate,
    SprtTest,
    count_games,
    elo_pentanomial,
    elo_trinomial,
)
from bookgen.analysis.ratings import RatingSettings, fit_ratings
from bookgen.errors import BookgenError
from bookgen.explore.live import PairingStanding, PlayerStanding, Standings
from bookgen.store.results import GameResult

__all__ = ["SIMULATIONS", "live_sprt", "live_standings"]

SIMULATIONS = 200   # Ordo's parametric bootstrap for the rating errors (seed 0)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _pairing(games: Sequence[GameResult], first: str, second: str) -> PairingStanding | None:
    counts = count_games(games, first, second)
    if counts.games == 0:
        return None
    estimate: EloEstimate
    if counts.penta is not None:
        estimate = elo_pentanomial(counts.penta)
    else:
        estimate = elo_trinomial(counts.wins, counts.draws, counts.losses)
    return PairingStanding(first, second, counts.games, counts.wins, counts.draws,
                           counts.losses, counts.wins + counts.draws / 2,
                           _finite(estimate.elo), _finite(estimate.elo_error), counts.pairs)


def live_standings(games: Sequence[GameResult]) -> Standings:
    """The players best first (Ordo ratings with 95 % errors, average 0) and every
    pairing that played, in the order players first appear."""
    names = list(dict.fromkeys(name for g in games for name in (g.black, g.white)))
    pairings = tuple(p for a, b in combinations(names, 2)
                     if (p := _pairing(games, a, b)) is not None)
    try:
        table = fit_ratings(games, RatingSettings(simulations=SIMULATIONS))
    except BookgenError:   # one player only
        table = None
    if table is None:
        return Standings((), pairings, "no rating: games between fewer than two players")
    players = tuple(PlayerStanding(p.name, p.points, p.played, p.w, p.d, p.l,
                                   _finite(p.rating), None if p.error is None
                                   else _finite(p.error)) for p in table.players)
    return Standings(players, pairings,
                     f"Ordo ratings (pool average 0, 95 % errors from {SIMULATIONS} "
                     "simulations), as bookgen rate; pairings: Elo difference of the first "
                     "player, pentanomial over complete pairs, as bookgen sprt")


def live_sprt(recorded: dict[str, Any], games: Sequence[GameResult]) -> dict[str, Any] | None:
    """The state (:meth:`SprtResult.as_json`) of the SPRT ``bookgen match --sprt``
    recorded (``recorded``: :meth:`SprtTest.as_json`, maybe with its ``last`` state)
    on ``games``; None before a game between its two players."""
    try:
        return SprtTest.from_json(recorded).run(games).as_json()
    except (BookgenError, KeyError, ValueError, TypeError):
        return None
