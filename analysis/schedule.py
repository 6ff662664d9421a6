"""Which games a match plays: pairings, openings, colour-swapped pairs and stable keys.

Every opening is played as a *pair*: once with each player as black (sente).
A schedule enumerates pairs cycle by cycle (a cycle goes through the
openings once), opening by opening, pairing by pairing, so a partly played
match has all pairings at about the same number of games. A game's key
(``pairing/cycle/opening/colour``) and its pair number depend only on where
it stands in that order, not on how many games were asked for: extending a
match (more ``--games``) or rerunning an interrupted one plays exactly the
games whose keys the results file lacks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from bookgen.errors import BookgenError

__all__ = ["FORMATS", "GameTask", "match_key", "pairings", "schedule"]

FORMATS = ("pairs", "round-robin", "gauntlet")


@dataclass(frozen=True)
class GameTask:
    """One game to play: who has black, the opening, and where it stands in the schedule."""

    key: str
    pair: int            # the pair's ordinal in the schedule (shared by its two games)
    round: int           # cycle through the openings, from 0
    opening_index: int   # line in the openings file, from 0
    opening: str         # the position, as in the openings file
    black: str
    white: str
    swapped: bool        # the second game of the pair


def pairings(players: list[str], fmt: str) -> list[tuple[str, str]]:
    """The (first, second) player pairs that meet under ``fmt``."""
    if len(set(players)) != len(players):
        raise BookgenError("player names must be unique")
    if fmt == "pairs":
        if len(players) != 2:
            raise BookgenError(f"--format pairs needs exactly 2 players, got {len(players)} "
                               "(use round-robin or gauntlet)")
        return [(players[0], players[1])]
    if len(players) < 2:
        raise BookgenError("a match needs at least 2 players")
    if fmt == "round-robin":
        return list(combinations(players, 2))
    if fmt == "gauntlet":
        return [(players[0], other) for other in players[1:]]
    raise BookgenError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def schedule(players: list[str], openings: list[tuple[int, str]], fmt: str, *,
             pairs_per_pairing: int) -> list[GameTask]:
    """The first ``pairs_per_pairing`` pairs of every pairing, in schedule order.

    ``openings`` are (line index in the file, position) in the order to
    play them; they are cycled through when more pairs than openings are
    asked for.
    """
    if not openings:
        raise BookgenError("the openings file has no positions")
    if pairs_per_pairing < 1:
        raise BookgenError("a match needs at least one pair of games per pairing")
    meetings = pairings(players, fmt)
    tasks: list[GameTask] = []
    for ordinal in range(pairs_per_pairing):
        cycle, slot = divmod(ordinal, len(openings))
        opening_index, opening = openings[slot]
        for number, (first, second) in enumerate(meetings):
            pair = ordinal * len(meetings) + number
            for swapped, (black, white) in enumerate(((first, second), (second, first))):
                key = f"{first}|{second}/{cycle}/{opening_index}/{swapped}"
                tasks.append(GameTask(key, pair, cycle, opening_index, opening,
                                      black, white, bool(swapped)))
    return tasks


def match_key(settings: dict[str, Any]) -> str:
    """A fingerprint of the settings that decide what the games are (not how many)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
