"""Files of root positions: one ``startpos moves ...`` or ``sfen ...`` line each."""

from __future__ import annotations

from pathlib import Path

import cshogi

from bookgen.errors import BookgenError
from bookgen.position import InvalidMove, InvalidPosition, parse_position_spec


def read_position_lines(path: str | Path, what: str = "root positions"
                        ) -> list[tuple[str, cshogi.Board]]:
    """(line, board) for each position of a file; blank lines and ``#`` comments are ignored.

    Lines are ``startpos [moves ...]``, ``sfen SFEN [moves ...]`` or bare
    sfens. A bad line is an error naming the file and line (``what`` names
    the file's role in messages): such files define what a command walks or
    plays, so silently dropping a line would change the result.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise BookgenError(f"{path}: cannot read {what} ({error.strerror})") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            board, _moves = parse_position_spec(line)
        except (InvalidPosition, InvalidMove) as error:
            raise BookgenError(f"{path}:{number}: bad position: {error}") from None
        if not any(True for _ in board.legal_moves):
            raise BookgenError(f"{path}:{number}: the side to move has no legal move")
        entries.append((line, board))
    if not entries:
        raise BookgenError(f"{path}: no {what}")
    return entries


def read_roots(path: str | Path) -> list[cshogi.Board]:
    """The positions of a roots file (see :func:`read_position_lines`)."""
    return [board for _line, board in read_position_lines(path)]
