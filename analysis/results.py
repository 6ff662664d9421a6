"""Game results from files: results files and PGN, read into one record.

:func:`load_games` reads bookgen's results files
(:mod:`bookgen.store.results`, which also writes them) and PGN files written
by other tools (cutechess, ``cshogi.cli``; sente is "White" there; read by
:func:`bookgen.formats.records.read_pgn`) into
:class:`bookgen.store.results.GameResult` records, the common input of
ratings, SPRT and outcome statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bookgen.errors import BookgenError
from bookgen.formats.records import read_pgn
from bookgen.store.results import GameResult, read_results_file

__all__ = ["load_games"]


# --------------------------------------------------------------------------
# loading


def load_games(paths: Iterable[str | Path]) -> list[GameResult]:
    """Every game in the given results files (SQLite) and PGN files, in file order."""
    games: list[GameResult] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise BookgenError(f"{path}: no such file")
        with open(path, "rb") as handle:
            head = handle.read(16)
        if head.startswith(b"SQLite format 3"):
            games.extend(read_results_file(path))
        else:
            games.extend(read_pgn(path))
    return games
