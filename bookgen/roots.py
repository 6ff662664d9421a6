"""Files of root positions: one ``startpos moves ...`` or ``sfen ...`` line each."""

from __future__ import annotations

from pathlib import Path

import cshogi

from bookgen.errors import BookgenError
from bookgen.position import InvalidMove, InvalidPosition, parse_position_spec


def read_roots(path: str | Path) -> list[cshogi.Board]:
    """The positions of a roots file; blank lines and ``#`` comments are ignored.

    A bad line is an error naming the file and line: roots define what a
    command walks, so silently dropping one would change the result.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise BookgenError(f"{path}: cannot read roots ({error.strerror})") from None
    boards = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            board, _moves = parse_position_spec(line)
        except (InvalidPosition, InvalidMove) as error:
            raise BookgenError(f"{path}:{number}: bad root position: {error}") from None
        boards.append(board)
    if not boards:
        raise BookgenError(f"{path}: no root positions")
    return boards
