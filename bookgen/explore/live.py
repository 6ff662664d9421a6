"""The live view of ``bookgen serve --results``: a match's standings, its games in
flight and its SPRT, read afresh at each request while ``bookgen match`` writes.

:class:`LiveView` reads a results file (:class:`bookgen.store.results.ResultsReader`,
read-only) and the live files of the games in flight beside it
(:func:`bookgen.store.live_games.read_live_games`). The statistics are the
analysis stage's, which the explorer does not import: the CLI passes them in as
functions (:data:`StandingsFunction` builds :class:`Standings` from the games,
:data:`SprtFunction` the SPRT's state from what ``--sprt`` recorded), so that the
page shows the same numbers as ``bookgen rate`` and ``bookgen sprt``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cshogi

from bookgen.errors import BookgenError
from bookgen.store.live_games import LiveGame, read_live_games
from bookgen.store.results import GameResult, ResultsReader

__all__ = ["LiveGameView", "LiveState", "LiveView", "PairingStanding", "PlayerStanding",
           "SprtFunction", "Standings", "StandingsFunction"]


@dataclass(frozen=True)
class PlayerStanding:
    """One player's line: points of ``played`` games, W/D/L, and its rating with its
    error (Elo; None where the rating code gives none)."""

    name: str
    points: float
    played: int
    w: int
    d: int
    l: int  # noqa: E741 - the column's name
    rating: float | None = None
    error: float | None = None


@dataclass(frozen=True)
class PairingStanding:
    """``first`` against ``second``: ``first``'s W/D/L and points, the Elo difference
    with its error (None where it cannot be given), and the complete colour-swapped
    pairs."""

    first: str
    second: str
    games: int
    w: int
    d: int
    l: int  # noqa: E741
    points: float
    elo: float | None = None
    error: float | None = None
    pairs: int = 0


@dataclass(frozen=True)
class Standings:
    """Players best first, pairings, and how the ratings were found (``method``)."""

    players: tuple[PlayerStanding, ...] = ()
    pairings: tuple[PairingStanding, ...] = ()
    method: str = ""


StandingsFunction = Callable[[Sequence[GameResult]], Standings]
# (what --sprt recorded, the match's games) -> the SPRT's state as SprtResult.as_json()
SprtFunction = Callable[[dict[str, Any], Sequence[GameResult]], dict[str, Any] | None]


@dataclass
class LiveGameView:
    """A game in flight: its live file and its board now (``board_sfen``; "" when its
    start or moves cannot be followed)."""

    game: LiveGame
    board_sfen: str

    @property
    def last_move(self) -> str | None:
        return self.game.moves[-1] if self.game.moves and self.board_sfen else None

    def board(self) -> cshogi.Board:
        return cshogi.Board(self.board_sfen)

    def as_dict(self) -> dict[str, Any]:
        data = self.game.as_dict()
        del data["format"]
        return {**data, "ply": len(self.game.moves), "sfen": self.board_sfen}


@dataclass
class LiveState:
    """What the live page shows of one match of one results file."""

    source: str
    file_index: int
    matches: list[dict[str, Any]]
    match: dict[str, Any] | None
    standings: Standings
    running: list[LiveGameView] = field(default_factory=list)
    sprt: dict[str, Any] | None = None
    recent: list[GameResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "file": self.file_index,
                "matches": self.matches, "match": self.match,
                "standings": {"players": [asdict(p) for p in self.standings.players],
                              "pairings": [asdict(p) for p in self.standings.pairings],
                              "method": self.standings.method},
                "running": [g.as_dict() for g in self.running], "sprt": self.sprt,
                "recent": [asdict(g) for g in self.recent]}


def _board_sfen(game: LiveGame) -> str:
    if not game.start_sfen:
        return ""
    try:
        board = cshogi.Board(game.start_sfen)
        for move in game.moves:
            code = board.move_from_usi(move)
            if not board.is_legal(code):
                return ""
            board.push(code)
        return str(board.sfen())
    except (ValueError, RuntimeError, TypeError):
        return ""


RECENT = 10   # the last games shown


class LiveView:
    """The live view over the results files ``paths`` (opened read-only now: a bad
    file is a :class:`BookgenError` before the server starts)."""

    def __init__(self, paths: Sequence[str | Path], standings: StandingsFunction,
                 sprt: SprtFunction | None = None) -> None:
        self.paths = [Path(p) for p in paths]
        self.standings_of = standings
        self.sprt_of = sprt
        self.readers: list[ResultsReader] = []
        self._cache: dict[tuple[int, int, int], tuple[Standings, dict[str, Any] | None]] = {}
        try:
            for path in self.paths:
                self.readers.append(ResultsReader(path))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.readers.clear()

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state(self, file_index: int = 0, match_id: int | None = None) -> LiveState:
        """The state of match ``match_id`` (None: the latest) of file ``file_index``;
        :class:`BookgenError` when there is no such file or match."""
        if not 0 <= file_index < len(self.readers):
            raise BookgenError(f"file: no results file number {file_index} "
                               f"(0 to {len(self.readers) - 1})")
        reader = self.readers[file_index]
        matches = reader.matches()
        if match_id is None:
            match = matches[-1] if matches else None
        else:
            found = [m for m in matches if m["id"] == match_id]
            if not found:
                raise BookgenError(f"match: no match {match_id} in "
                                   f"{self.paths[file_index].name}")
            match = found[0]
        source = str(self.paths[file_index])
        if match is None:
            return LiveState(source, file_index, matches, None, Standings())
        games = reader.games(match["id"])
        # the statistics change only with the games: computed once per game count
        key = (file_index, match["id"], len(games))
        if key not in self._cache:
            standings = self.standings_of(games) if games else Standings()
            sprt = None
            if self.sprt_of is not None and match["sprt"] is not None and games:
                sprt = self.sprt_of(match["sprt"], games)
            self._cache = {k: v for k, v in self._cache.items() if k[:2] != key[:2]}
            self._cache[key] = (standings, sprt)
        standings, sprt = self._cache[key]
        running = []
        if match["status"] == "running":
            running = [LiveGameView(g, _board_sfen(g))
                       for g in read_live_games(self.paths[file_index], match["id"])]
        return LiveState(source, file_index, matches, match, standings, running, sprt,
                         games[-RECENT:][::-1])
