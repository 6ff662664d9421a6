"""``bookgen show``: a position's board and its book moves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bookgen.diagram import board_svg
from bookgen.errors import BookgenError
from bookgen.files import atomic_write
from bookgen.position import InvalidMove, InvalidPosition, board_key, parse_position_spec
from bookgen.store import DEFAULT_BOOK, Book, BookMove


@dataclass(frozen=True)
class PositionView:
    """A position as ``show`` shows it: its normalised ``sfen``, whether it is
    ``in_book``, its ``ply`` there, its ``board`` as CSA text and its book
    ``moves`` (the book's own, in stored order)."""

    sfen: str
    in_book: bool
    ply: int | None
    board: str
    moves: tuple[BookMove, ...]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output: the fields in order, each move as a dict."""
        return {"sfen": self.sfen, "in_book": self.in_book, "ply": self.ply,
                "board": self.board, "moves": [m._asdict() for m in self.moves]}


def lookup_position(book: str | Path = DEFAULT_BOOK, position: str = "startpos", *,
                    svg: str | Path | None = None) -> PositionView:
    """The ``position`` (``startpos moves ...`` / ``sfen ... [moves ...]``) in ``book``.

    Writes the board as SVG to ``svg`` when given (the last move of
    ``position``, if any, highlighted).
    """
    try:
        board, moves_played = parse_position_spec(position)
    except (InvalidPosition, InvalidMove) as error:
        raise BookgenError(f"position {position!r}: {error}") from None
    sfen = board_key(board)
    with Book(book, create=False, readonly=True) as store:
        found = store.find_position(sfen)
        moves = store.moves_of(found[0]) if found else []
    if svg is not None:
        last_move = moves_played[-1] if moves_played else None
        atomic_write(svg, board_svg(board, last_move=last_move).encode("utf-8"))
    return PositionView(sfen=sfen, in_book=found is not None, ply=found[1] if found else None,
                        # CSA board; cshogi starts it with a comment mark
                        board=str(board).lstrip("'"), moves=tuple(moves))


def format_position(view: PositionView) -> str:
    """The text ``show`` prints: the board, the sfen and the book moves."""
    lines = [view.board.rstrip(), "", f"sfen {view.sfen}"]
    if not view.in_book:
        lines.append("not in the book")
        return "\n".join(lines)
    lines.append(f"ply {view.ply}, {len(view.moves)} book moves")
    if view.moves:
        lines.append(f"{'move':<7} {'ponder':<7} {'value':>7} {'depth':>6} {'count':>8}")
        for m in view.moves:
            value = "none" if m.value is None else m.value
            depth = "none" if m.depth is None else m.depth
            lines.append(f"{m.move:<7} {m.ponder or 'none':<7} {value:>7} {depth:>6} "
                         f"{m.count:>8}")
    return "\n".join(lines)
