"""Results by opening: the games played from each start position, and each player's score.

:func:`results_by_opening` groups games (:class:`bookgen.store.results.GameResult`,
from :func:`bookgen.analysis.results.load_games`) by the position their
opening leads to (``startpos moves ...``, an sfen, or the start sfen a results
file records), and counts each player's games and points there. ``bookgen
serve --results`` shows the table (the command line hands it to the explorer,
which links each opening that is a book position), and ``bookgen report -b``
adds the same table for the openings in its book.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from bookgen.explore.view import OpeningResult, Place, PlaceError, PlayerScore, parse_search
from bookgen.position import board_key
from bookgen.store.results import GameResult

__all__ = ["results_by_opening"]


def results_by_opening(games: Iterable[GameResult]) -> list[OpeningResult]:
    """One :class:`OpeningResult` per position that games started from, most played
    first (then in the order first seen); games whose opening is unknown or cannot be
    read as a position (PGN files without one) are left out."""
    first: dict[str, tuple[str, Place]] = {}
    points: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for game in games:
        if not game.opening:
            continue
        try:
            place = parse_search(game.opening)
        except PlaceError:
            continue
        sfen = board_key(place.board())
        first.setdefault(sfen, (game.opening, place))
        points[sfen][game.black].append(game.black_score)
        points[sfen][game.white].append(1.0 - game.black_score)
    found = []
    for order, (sfen, (opening, place)) in enumerate(first.items()):
        by_player = points[sfen]
        games_here = sum(len(v) for v in by_player.values()) // 2
        scores = tuple(PlayerScore(player, len(values), sum(values))
                       for player, values in sorted(by_player.items()))
        found.append((-games_here, order,
                      OpeningResult(opening, place, sfen, games_here, scores)))
    return [result for _, _, result in sorted(found, key=lambda item: (item[0], item[1]))]
