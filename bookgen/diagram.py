"""Board diagrams as self-contained SVG: :func:`board_svg`.

The pieces are drawn from the glyph outlines in :mod:`bookgen.board_glyphs`
(taken from Noto Serif CJK JP, SIL Open Font License 1.1), not as text, so a
diagram reads the same in any browser whether or not it has a CJK font; only
the coordinates and the hand counts are text (ASCII digits and letters, any
font). Black's (sente's) pieces point up, white's (gote's) are turned 180
degrees; promoted pieces are red. White's hand is on the left, black's on
the right; the side to move has its marker underlined. The last move's origin
and destination squares are highlighted, and arrows (book moves, say) can be
drawn over the board.

Nothing here depends on the command line; :class:`Layout` tells where each
square and hand piece is drawn, in the SVG's user units (pixels at 100 %).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import cshogi

from bookgen.board_glyphs import EM, GLYPHS

__all__ = ["Arrow", "Layout", "board_svg", "hand_boxes", "parse_usi_squares"]

# Piece codes of cshogi (black; white adds 16) and their characters.
PIECE_CHARS = {1: "歩", 2: "香", 3: "桂", 4: "銀", 5: "角", 6: "飛", 7: "金", 8: "玉",
               9: "と", 10: "杏", 11: "圭", 12: "全", 13: "馬", 14: "龍"}
WHITE_KING_CHAR = "王"
WHITE = 16
# Hand pieces as drawn, most valuable first: (USI letter, piece code, index in
# cshogi's pieces_in_hand lists, which run P L N S G B R).
HAND_ORDER = (("R", 6, 6), ("B", 5, 5), ("G", 7, 4), ("S", 4, 3), ("N", 3, 2), ("L", 2, 1),
              ("P", 1, 0))
FILES = "987654321"
RANKS = "abcdefghi"

BOARD = "#f2d49b"
GRID = "#4a3b22"
PIECE_FILL = "#fbe8c0"
PIECE_EDGE = "#7a5a2e"
INK = "#1a1a1a"
PROMOTED_INK = "#c0281c"
LAST_FROM = "#c9dfa0"
LAST_TO = "#a3cc6e"
ARROW = "#2763c4"
TO_MOVE = "#d9480f"
LABEL = "#3d3d3d"

_USI_MOVE = re.compile(r"^(?:([1-9][a-i])([1-9][a-i])(\+?)|([PLNSGBR])\*([1-9][a-i]))$")


def parse_usi_squares(usi: str) -> tuple[str | None, str, str | None]:
    """``(from square, to square, dropped piece letter)`` of a USI move.

    ``"7g7f"`` -> ``("7g", "7f", None)``; ``"P*5e"`` -> ``(None, "5e", "P")``.
    Raises ValueError for anything else.
    """
    match = _USI_MOVE.match(usi)
    if not match:
        raise ValueError(f"not a USI move: {usi!r}")
    if match.group(4):
        return None, match.group(5), match.group(4)
    return match.group(1), match.group(2), None


def _square_index(square: str) -> int:
    """cshogi's square index of ``"7f"`` (file-major, 0 = 1a)."""
    return (int(square[0]) - 1) * 9 + RANKS.index(square[1])


@dataclass(frozen=True)
class Arrow:
    """An arrow for a move of the side to move; ``weight`` (0..1) sets its width and opacity."""

    move: str
    weight: float = 1.0


@dataclass(frozen=True)
class Layout:
    """Where things are drawn, in SVG user units, for squares of ``cell`` units."""

    cell: float = 40.0

    @property
    def margin(self) -> float:
        return round(0.2 * self.cell, 2)

    @property
    def panel(self) -> float:
        """Width of a hand panel."""
        return round(1.5 * self.cell, 2)

    @property
    def label(self) -> float:
        """Height of the file labels above the board, width of the rank labels beside it."""
        return round(0.5 * self.cell, 2)

    @property
    def board_left(self) -> float:
        return self.margin + self.panel + self.margin

    @property
    def board_top(self) -> float:
        return self.margin + self.label

    @property
    def width(self) -> float:
        return self.board_left + 9 * self.cell + self.label + self.margin + self.panel + \
            self.margin

    @property
    def height(self) -> float:
        return self.board_top + 9 * self.cell + self.margin

    def square(self, square: str) -> tuple[float, float, float, float]:
        """``(x, y, width, height)`` of a square given as ``"7f"`` (file 9 on the left)."""
        if len(square) != 2 or square[0] not in FILES or square[1] not in RANKS:
            raise ValueError(f"not a square: {square!r}")
        return (self.board_left + FILES.index(square[0]) * self.cell,
                self.board_top + RANKS.index(square[1]) * self.cell, self.cell, self.cell)

    def hand_slot(self, colour: int, slot: int) -> tuple[float, float, float, float]:
        """``(x, y, width, height)`` of the ``slot``-th hand piece kind shown for ``colour``.

        Slot 0 is the side's marker; white's panel (left) fills downwards from
        the top, black's (right) upwards from the bottom.
        """
        size = self.cell
        if colour == cshogi.WHITE:
            return self.margin, self.board_top + slot * size, self.panel, size
        x = self.board_left + 9 * self.cell + self.label + self.margin
        return x, self.board_top + (8 - slot) * size, self.panel, size


def _num(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _piece_outline(cx: float, cy: float, size: float) -> str:
    """Points of a piece's pentagon, pointing up, centred on (cx, cy)."""
    points = [(0.0, -0.46), (0.33, -0.31), (0.40, 0.44), (-0.40, 0.44), (-0.33, -0.31)]
    return " ".join(f"{_num(cx + size * x)},{_num(cy + size * y)}" for x, y in points)


class _Writer:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.parts: list[str] = []
        self.used: dict[str, str] = {}

    def glyph_id(self, char: str) -> str:
        if char not in self.used:
            self.used[char] = f"bookgen-glyph-{ord(char):x}"
        return self.used[char]

    def piece(self, cx: float, cy: float, code: int, size: float) -> None:
        """A piece (cshogi code) centred on (cx, cy); ``size`` is its cell size."""
        white = code >= WHITE
        kind = code - WHITE if white else code
        char = WHITE_KING_CHAR if white and kind == 8 else PIECE_CHARS[kind]
        turn = f' transform="rotate(180 {_num(cx)} {_num(cy)})"' if white else ""
        scale = 0.62 * size / EM
        ink = PROMOTED_INK if kind >= 9 else INK
        self.parts.append(
            f'<g class="piece"{turn}><polygon points="{_piece_outline(cx, cy, size)}" '
            f'fill="{PIECE_FILL}" stroke="{PIECE_EDGE}" stroke-width="{_num(size / 40)}"/>'
            f'<use xlink:href="#{self.glyph_id(char)}" fill="{ink}" transform="translate('
            f'{_num(cx)} {_num(cy + 0.05 * size)}) scale({scale:.5f})"/></g>')

    def rect(self, box: tuple[float, float, float, float], fill: str, extra: str = "") -> None:
        x, y, w, h = box
        self.parts.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" '
                          f'height="{_num(h)}" fill="{fill}"{extra}/>')

    def text(self, x: float, y: float, text: str, size: float, anchor: str = "middle",
             fill: str = LABEL, weight: str = "normal") -> None:
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y)}" font-size="{_num(size)}" '
                          f'text-anchor="{anchor}" fill="{fill}" font-weight="{weight}" '
                          f'dominant-baseline="central">{text}</text>')


Box = tuple[float, float, float, float]


def hand_boxes(board: cshogi.Board, layout: Layout) -> dict[tuple[int, str], Box]:
    """Where :func:`board_svg` draws each piece in hand: the box ``(x, y, width,
    height)`` of each (colour, USI letter) that ``board`` has in hand."""
    found = {}
    for colour in (cshogi.BLACK, cshogi.WHITE):
        counts = board.pieces_in_hand[colour]
        slot = 1
        for letter, _code, index in HAND_ORDER:
            if counts[index]:
                found[(colour, letter)] = layout.hand_slot(colour, slot)
                slot += 1
    return found


def _centre(box: Box) -> tuple[float, float]:
    x, y, w, h = box
    return x + w / 2, y + h / 2


def board_svg(board: cshogi.Board, last_move: str | int | None = None,
              arrows: Iterable[str | Arrow] = (), *, cell: float = 40.0,
              coordinates: bool = True, title: str | None = None) -> str:
    """The position of ``board`` as a standalone SVG document (a string).

    ``last_move`` (USI, or a cshogi move) is the move that led to this
    position: its squares are highlighted (the destination only for a
    drop). ``arrows`` are moves of the side to move (USI strings or
    :class:`Arrow`), drawn from their origin square (or hand piece) to their
    destination; an illegal one raises ValueError. ``cell`` is the size of a
    square in user units; ``coordinates`` labels files 9..1 and ranks a..i
    (USI); ``title`` is the document's title (default: the position's sfen).
    """
    if not cell > 0:
        raise ValueError(f"cell must be positive, got {cell!r}")
    layout = Layout(float(cell))
    w = _Writer(layout)
    c = layout.cell
    left, top = layout.board_left, layout.board_top
    hands = hand_boxes(board, layout)

    w.rect((left, top, 9 * c, 9 * c), BOARD)
    if last_move is not None:
        usi = cshogi.move_to_usi(last_move) if isinstance(last_move, int) else last_move
        origin, target, _drop = parse_usi_squares(usi)
        if board.pieces[_square_index(target)] == 0:
            raise ValueError(f"last move {usi}: no piece on {target}")
        if origin is not None:
            w.rect(layout.square(origin), LAST_FROM, ' class="last-from"')
        w.rect(layout.square(target), LAST_TO, ' class="last-to"')
    grid = [f"M{_num(left + i * c)} {_num(top)}v{_num(9 * c)}" for i in range(10)]
    grid += [f"M{_num(left)} {_num(top + i * c)}h{_num(9 * c)}" for i in range(10)]
    w.parts.append(f'<path d="{"".join(grid)}" stroke="{GRID}" stroke-width="{_num(c / 40)}" '
                   'fill="none"/>')
    w.parts.append(f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(9 * c)}" '
                   f'height="{_num(9 * c)}" fill="none" stroke="{GRID}" '
                   f'stroke-width="{_num(c / 16)}"/>')
    for i in (3, 6):
        for j in (3, 6):
            w.parts.append(f'<circle cx="{_num(left + i * c)}" cy="{_num(top + j * c)}" '
                           f'r="{_num(c / 16)}" fill="{GRID}"/>')
    if coordinates:
        for i, f in enumerate(FILES):
            w.text(left + (i + 0.5) * c, layout.margin + layout.label / 2, f, 0.36 * c)
        for i, r in enumerate(RANKS):
            w.text(left + 9 * c + layout.label / 2, top + (i + 0.5) * c, r, 0.36 * c)

    for index, code in enumerate(board.pieces):
        if code:
            square = f"{index // 9 + 1}{RANKS[index % 9]}"
            w.piece(*_centre(layout.square(square)), code, c)

    for colour in (cshogi.BLACK, cshogi.WHITE):
        x, y, pw, ph = layout.hand_slot(colour, 0)
        cx, cy = x + ph / 2, y + ph / 2
        marker = _piece_outline(cx, cy, 0.7 * c)
        fill = INK if colour == cshogi.BLACK else "#ffffff"
        turn = f' transform="rotate(180 {_num(cx)} {_num(cy)})"' if colour else ""
        w.parts.append(f'<polygon class="marker" points="{marker}" fill="{fill}" stroke="{INK}" '
                       f'stroke-width="{_num(c / 30)}"{turn}/>')
        if board.turn == colour:
            w.rect((x + 0.1 * c, y + 0.88 * c, 0.8 * c, 0.08 * c), TO_MOVE, ' class="to-move"')
        counts = board.pieces_in_hand[colour]
        for letter, code, index in HAND_ORDER:
            if not counts[index]:
                continue
            box = hands[(colour, letter)]
            hx, hy = box[0] + box[3] / 2, box[1] + box[3] / 2
            w.piece(hx, hy, code + (WHITE if colour else 0), 0.9 * c)
            if counts[index] > 1:
                w.text(box[0] + box[3] + 0.02 * c, hy + 0.18 * c, str(counts[index]),
                       0.4 * c, anchor="start", fill=INK, weight="bold")

    for item in arrows:
        arrow = item if isinstance(item, Arrow) else Arrow(item)
        origin, target, drop = parse_usi_squares(arrow.move)
        move = board.move_from_usi(arrow.move)
        if not move or not board.is_legal(move):
            raise ValueError(f"arrow {arrow.move}: not a legal move in this position")
        if origin is None:
            assert drop is not None  # parse_usi_squares: a drop names its piece
            start = _centre(hands[(board.turn, drop)])
        else:
            start = _centre(layout.square(origin))
        w.parts.append(_arrow(start, _centre(layout.square(target)), c, arrow.weight, arrow.move))

    defs = "".join(f'<path id="{gid}" d="{GLYPHS[char]}"/>' for char, gid in w.used.items())
    name = title if title is not None else board.sfen()
    return (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'width="{_num(layout.width)}" height="{_num(layout.height)}" '
            f'viewBox="0 0 {_num(layout.width)} {_num(layout.height)}" '
            'font-family="DejaVu Sans, Arial, Helvetica, sans-serif">'
            f"<title>{_escape(name)}</title><defs>{defs}</defs>"
            + "".join(w.parts) + "</svg>\n")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _arrow(start: tuple[float, float], end: tuple[float, float], cell: float,
           weight: float, move: str) -> str:
    """A straight arrow from ``start`` to ``end`` with its head at ``end``, for ``move``
    (its ``data-move``: the explorer plays the move when the arrow is clicked)."""
    weight = min(max(float(weight), 0.0), 1.0)
    (x0, y0), (x1, y1) = start, end
    dx, dy = x1 - x0, y1 - y0
    length = (dx * dx + dy * dy) ** 0.5 or 1.0
    ux, uy = dx / length, dy / length
    width = cell * (0.07 + 0.09 * weight)
    head = cell * 0.35 + width
    bx, by = x1 - ux * head, y1 - uy * head  # base of the head
    px, py = -uy, ux
    half = head * 0.55
    points = [(bx + px * half, by + py * half), (x1, y1), (bx - px * half, by - py * half)]
    opacity = 0.45 + 0.4 * weight
    return (f'<g class="arrow" data-move="{_escape(move)}" opacity="{opacity:.2f}" '
            f'fill="{ARROW}" stroke="{ARROW}">'
            f'<line x1="{_num(x0)}" y1="{_num(y0)}" x2="{_num(bx)}" y2="{_num(by)}" '
            f'stroke-width="{_num(width)}" stroke-linecap="round"/>'
            f'<polygon points="{" ".join(f"{_num(x)},{_num(y)}" for x, y in points)}" '
            'stroke="none"/></g>')
