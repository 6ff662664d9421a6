"""``bookgen show``: a position's board and its book moves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bookgen.diagram import board_svg
from bookgen.errors import BookgenError
from bookgen.files import atomic_write
from bookgen.position import InvalidMove, InvalidPosition, board_key, parse_position_spec
from bookgen.store import DEFAULT_BOOK, Book


def lookup_position(spec: str = "startpos", book: str | Path = DEFAULT_BOOK,
                    svg: str | Path | None = None) -> dict[str, Any]:
    """The position ``spec`` (``startpos moves ...`` / ``sfen ... [moves ...]``) in the book.

    Returns the board (text), its sfen, whether it is in the book, its ply and
    moves; writes the board as SVG to ``svg`` when given (the last move of
    ``spec``, if any, highlighted).
    """
    try:
        board, moves_played = parse_position_spec(spec)
    except (InvalidPosition, InvalidMove) as error:
        raise BookgenError(f"position {spec!r}: {error}") from None
    sfen = board_key(board)
    with Book(book, create=False, readonly=True) as store:
        found = store.find_position(sfen)
        moves = store.moves_of(found[0]) if found else []
    if svg is not None:
        last_move = moves_played[-1] if moves_played else None
        atomic_write(svg, board_svg(board, last_move=last_move).encode("utf-8"))
    return {
        "sfen": sfen,
        "in_book": found is not None,
        "ply": found[1] if found else None,
        "board": str(board).lstrip("'"),  # CSA board; cshogi starts it with a comment mark
        "moves": [m._asdict() for m in moves],
    }


def format_position(info: dict[str, Any]) -> str:
    lines = [info["board"].rstrip(), "", f"sfen {info['sfen']}"]
    if not info["in_book"]:
        lines.append("not in the book")
        return "\n".join(lines)
    lines.append(f"ply {info['ply']}, {len(info['moves'])} book moves")
    if info["moves"]:
        lines.append(f"{'move':<7} {'ponder':<7} {'value':>7} {'depth':>6} {'count':>8}")
        for m in info["moves"]:
            value = "none" if m["value"] is None else m["value"]
            depth = "none" if m["depth"] is None else m["depth"]
            lines.append(f"{m['move']:<7} {m['ponder'] or 'none':<7} {value:>7} {depth:>6} "
                         f"{m['count']:>8}")
    return "\n".join(lines)
