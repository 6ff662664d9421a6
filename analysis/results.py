"""Game results from files: results files and PGN, read into one record.

:func:`load_games` reads bookgen's results files
(:mod:`bookgen.store.results`, which also writes them) and PGN files written
by other tools (cutechess, ``cshogi.cli``; sente is "White" there) into
:class:`bookgen.store.results.GameResult` records, the common input of
ratings, SPRT and outcome statistics. :func:`write_pgn_game` appends a game
to a PGN file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError
from bookgen.store.results import (
    RESULT_BLACK,
    RESULT_DRAW,
    RESULT_WHITE,
    GameResult,
    read_results_file,
)

__all__ = ["load_games", "read_pgn", "write_pgn_game"]

_PGN_RESULTS = {RESULT_BLACK: "1-0", RESULT_WHITE: "0-1", RESULT_DRAW: "1/2-1/2"}


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


_TAG = re.compile(r'^\[(\w+)\s+"((?:[^"\\]|\\.)*)"\]\s*$')
_RESULT_TOKEN = re.compile(r"(1-0|0-1|1/2-1/2|\*)\s*$")


def _pgn_blocks(path: Path) -> Iterator[tuple[int, dict[str, str], str]]:
    """(first line number, tags, movetext) of each game in a PGN file."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None
    tags: dict[str, str] = {}
    moves: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        match = _TAG.match(stripped)
        if match:
            if moves:
                yield start, tags, " ".join(moves)
                tags, moves = {}, []
            if not tags:
                start = number
            tags[match.group(1)] = match.group(2).replace('\\"', '"').replace("\\\\", "\\")
        elif stripped and not stripped.startswith("%"):
            if not tags and not moves:
                raise BookgenError(f"{path}:{number}: movetext before any tag pair "
                                   "(not a PGN file?)")
            moves.append(stripped)
    if tags:
        yield start, tags, " ".join(moves)


def read_pgn(path: str | Path) -> list[GameResult]:
    """Games of a PGN file (sente is "White"); unfinished games (``*``) are skipped.

    Colour-swapped pairs are taken from the ``Pair`` tag bookgen writes
    (games finish out of order with ``--concurrency``); without it, two
    consecutive games with the players swapped and the same start position
    (``FEN``/``SFEN`` tag) are a pair.
    """
    path = Path(path)
    games: list[GameResult] = []
    tagged: list[str | None] = []
    for line, tags, movetext in _pgn_blocks(path):
        result = tags.get("Result")
        if result is None:
            token = _RESULT_TOKEN.search(movetext)
            result = token.group(1) if token else None
        if result is None:
            raise BookgenError(f"{path}:{line}: game without a Result tag")
        if result == "*":
            continue
        names = {"1-0": RESULT_BLACK, "0-1": RESULT_WHITE, "1/2-1/2": RESULT_DRAW}
        if result not in names:
            raise BookgenError(f"{path}:{line}: bad Result {result!r} "
                               "(expected 1-0, 0-1, 1/2-1/2 or *)")
        if "White" not in tags or "Black" not in tags:
            raise BookgenError(f"{path}:{line}: game without White and Black tags")
        opening = tags.get("SFEN") or tags.get("FEN")
        plies = int(tags["PlyCount"]) if tags.get("PlyCount", "").isdigit() else 0
        games.append(GameResult(tags["White"], tags["Black"], names[result],
                          tags.get("Termination", ""), plies, None, opening, str(path)))
        tagged.append(tags.get("Pair"))
    if games and all(tagged):
        return [_with_pair(game, f"{path}#{pair}") for game, pair in zip(games, tagged)]
    return _pair_consecutive(games, path)


def _pair_consecutive(games: list[GameResult], path: Path) -> list[GameResult]:
    paired: list[GameResult] = []
    i = 0
    while i < len(games):
        first = games[i]
        if i + 1 < len(games):
            second = games[i + 1]
            if (second.black, second.white) == (first.white, first.black) \
                    and second.opening == first.opening and first.black != first.white:
                key = f"{path}#pgn:{i}"
                paired += [_with_pair(first, key), _with_pair(second, key)]
                i += 2
                continue
        paired.append(first)
        i += 1
    return paired


def _with_pair(game: GameResult, key: str) -> GameResult:
    return GameResult(game.black, game.white, game.result, game.reason, game.plies, key,
                game.opening, game.source)


def _pgn_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def write_pgn_game(handle: Any, *, event: str, round_label: str, black: str, white: str,
                   result: str, reason: str, start_sfen: str, moves: Sequence[str],
                   pair: str | None = None, date: str | None = None) -> None:
    """Append one game to an open PGN text file, sente as "White".

    Shogi moves are not SAN, so the USI moves go into a comment that chess
    tools (Ordo, BayesElo) skip; the start position is in an ``SFEN`` tag,
    the colour-swapped pair the game belongs to in a ``Pair`` tag.
    """
    tags = [("Event", event), ("Site", "bookgen"),
            ("Date", date or datetime.now(UTC).strftime("%Y.%m.%d")),
            ("Round", round_label), ("White", black), ("Black", white),
            ("Result", _PGN_RESULTS[result]), ("SFEN", start_sfen),
            ("Termination", reason), ("PlyCount", str(len(moves)))]
    if pair is not None:
        tags.append(("Pair", pair))
    for name, value in tags:
        handle.write(f'[{name} "{_pgn_escape(value)}"]\n')
    body = f"{{usi {' '.join(moves)}}} " if moves else ""
    handle.write(f"\n{body}{_PGN_RESULTS[result]}\n\n")
