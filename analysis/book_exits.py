"""Where each engine left its own book: per game, and per opening and engine.

A match records, for every move, whether the engine answered from its own
book or searched (the results file's ``moves`` table). In a book war what
matters is where each side's book ran out and what the engine thought of the
position then: an engine's "exit" in a game is its first move that was not a
book answer, and its score there is from its own side
(:func:`bookgen.store.results.read_book_exit_rows` finds them in the file;
:func:`book_exits` places them); :func:`exits_by_opening` sums them up per
opening and engine.

Plies count from the initial position (the opening's moves included; a game
from an sfen counts from its move number), so that exits in games from
different openings compare.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import mean, median
from typing import Any

from bookgen.store.results import BookExitRow, read_book_exit_rows

__all__ = ["BookExit", "OpeningExits", "book_exits", "exits_by_opening", "read_book_exits"]


@dataclass(frozen=True)
class BookExit:
    """One engine in one game: ``book_moves`` of its moves came from its book
    before ``ply`` (from the initial position), its first move that was not a book
    answer, ``move`` (None for both: it never left its book), where it scored the
    position ``score_cp`` or ``score_mate`` (its own view; None: no score)."""

    file: str
    game_id: int
    opening: str
    engine: str
    colour: str
    book_moves: int
    ply: int | None
    move: str | None
    score_cp: int | None
    score_mate: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OpeningExits:
    """One engine's exits from its book in the games of one opening."""

    opening: str
    engine: str
    exits: tuple[BookExit, ...]

    @property
    def games(self) -> int:
        return len(self.exits)

    @property
    def left(self) -> list[BookExit]:
        """The games in which it left its book."""
        return [e for e in self.exits if e.ply is not None]

    @property
    def book_moves(self) -> float:
        """Its book moves per game."""
        return mean(e.book_moves for e in self.exits)

    @property
    def median_ply(self) -> float | None:
        plies = [e.ply for e in self.left if e.ply is not None]
        return median(plies) if plies else None

    @property
    def mean_cp(self) -> float | None:
        """Its mean score where it left its book (centipawn scores only)."""
        scores = [e.score_cp for e in self.left if e.score_cp is not None]
        return mean(scores) if scores else None

    def as_dict(self) -> dict[str, Any]:
        return {"opening": self.opening, "engine": self.engine, "games": self.games,
                "left_book": len(self.left), "book_moves": round(self.book_moves, 2),
                "median_ply": self.median_ply,
                "mean_cp": None if self.mean_cp is None else round(self.mean_cp, 1),
                "exits": [e.as_dict() for e in self.exits]}


def _first_ply(start_sfen: str) -> int:
    """The ply from the initial position of the first move played from ``start_sfen``."""
    parts = start_sfen.split()
    try:
        return max(1, int(parts[3])) if len(parts) > 3 else 1
    except ValueError:
        return 1


def book_exits(rows: Iterable[BookExitRow]) -> list[BookExit]:
    """The exits of ``rows`` with each engine's colour and the ply from the initial
    position."""
    found: list[BookExit] = []
    for row in rows:
        offset = _first_ply(row.start_sfen) - 1
        found.append(BookExit(row.file, row.game_id, row.opening, row.mover,
                              "black" if row.mover == row.black else "white", row.book_moves,
                              None if row.ply is None else offset + row.ply, row.move,
                              row.score_cp, row.score_mate))
    return found


def exits_by_opening(exits: Sequence[BookExit]) -> list[OpeningExits]:
    """The exits grouped by opening and engine: openings in the order first seen,
    engines by name."""
    grouped: dict[str, dict[str, list[BookExit]]] = defaultdict(lambda: defaultdict(list))
    for found in exits:
        grouped[found.opening][found.engine].append(found)
    return [OpeningExits(opening, engine, tuple(by_engine[engine]))
            for opening, by_engine in grouped.items() for engine in sorted(by_engine)]


def read_book_exits(paths: Iterable[str | Path]) -> tuple[int, list[BookExit]]:
    """The number of games with per-move data in the results files among ``paths``
    (PGN files have none) and the book exits in them."""
    games = 0
    found: list[BookExit] = []
    for path in map(Path, paths):
        with open(path, "rb") as handle:
            if not handle.read(16).startswith(b"SQLite format 3"):
                continue
        count, rows = read_book_exit_rows(path)
        games += count
        found.extend(book_exits(rows))
    return games, found
