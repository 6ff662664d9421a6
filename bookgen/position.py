"""Positions: safe sfen parsing, legality checks, normalisation and keys.

cshogi aborts the whole interpreter when ``Board.set_sfen`` is given garbage,
so every sfen that comes from outside is checked here, syntactically and for
legality, before cshogi sees it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import cshogi

from bookgen.errors import BookgenError

STARTPOS_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"

_HAND_RE = re.compile(r"(\d*)([PLNSGBRplnsgbr])")
_USI_MOVE_RE = re.compile(r"(?:[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i])")

# Maximum number of each piece kind in a shogi set (promoted pieces count as
# their base kind).
PIECE_LIMITS = {"P": 18, "L": 4, "N": 4, "S": 4, "G": 4, "B": 2, "R": 2}

BLACK = 0
WHITE = 1

_PROMOTABLE = {cshogi.PAWN, cshogi.LANCE, cshogi.KNIGHT, cshogi.SILVER, cshogi.BISHOP,
               cshogi.ROOK}
_KIND = {cshogi.PAWN: "P", cshogi.LANCE: "L", cshogi.KNIGHT: "N"}


class InvalidPosition(BookgenError):
    """An sfen that is malformed or describes an impossible position."""


class InvalidMove(BookgenError):
    """A move that is malformed or not legal in its position."""


@dataclass(frozen=True, slots=True)
class Position:
    """A validated position.

    ``sfen`` is normalised and has no move number: it is the exact key of the
    position in a book. ``ply`` is the move number the source gave, if any.
    """

    sfen: str
    ply: int | None

    @property
    def turn(self) -> int:
        return BLACK if self.sfen.split(" ", 2)[1] == "b" else WHITE

    def board(self) -> cshogi.Board:
        return cshogi.Board(self.sfen + " " + str(self.ply or 1))

    @property
    def zobrist(self) -> int:
        return signed64(self.board().zobrist_hash())


def signed64(value: int) -> int:
    """Map an unsigned 64-bit integer onto SQLite's signed INTEGER range."""
    return value - (1 << 64) if value >= (1 << 63) else value


def unsigned64(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


_BOARD_RE = re.compile(
    r"(?:(?:\+[PLNSBRplnsbr]|[PLNSGBRKplnsgbrk]|[1-9])+/){8}"
    r"(?:\+[PLNSBRplnsbr]|[PLNSGBRKplnsgbrk]|[1-9])+")
# Digits become empty squares and '+' disappears: each rank is then 9 characters.
_SQUARES = [(str(n), "." * n) for n in range(2, 10)]
_WHITE_DEAD_LAST = bytes([cshogi.WPAWN, cshogi.WLANCE, cshogi.WKNIGHT])
_BLACK_DEAD_LAST = bytes([cshogi.BPAWN, cshogi.BLANCE, cshogi.BKNIGHT])


def _parse_hands(hand_field: str) -> dict[str, int]:
    if hand_field == "-":
        return {}
    counts: dict[str, int] = {}
    position = 0
    for match in _HAND_RE.finditer(hand_field):
        if match.start() != position:
            break
        position = match.end()
        digits, piece = match.groups()
        if piece in counts:
            raise InvalidPosition(f"hand {hand_field!r} names {piece!r} twice")
        if digits and (digits[0] == "0" or len(digits) > 2):
            raise InvalidPosition(f"hand {hand_field!r} has a bad count {digits!r}")
        counts[piece] = int(digits) if digits else 1
    if position != len(hand_field) or not counts:
        raise InvalidPosition(f"hand {hand_field!r} is malformed")
    return counts


def _check_text(board_field: str, hand_field: str) -> None:
    """Checks that must pass before cshogi may see the sfen: syntax and counts."""
    if not _BOARD_RE.fullmatch(board_field):
        raise InvalidPosition(f"board {board_field!r} is malformed")
    plain = board_field.replace("+", "")
    for digit, dots in _SQUARES:
        plain = plain.replace(digit, dots)
    lengths = list(map(len, plain.split("/")))
    if lengths.count(9) != 9:
        raise InvalidPosition(f"rank {lengths.index(next(n for n in lengths if n != 9)) + 1} "
                              "of the board does not have 9 squares")
    if board_field.count("K") != 1 or board_field.count("k") != 1:
        raise InvalidPosition("each side must have exactly one king")
    hands = _parse_hands(hand_field)
    letters = board_field.upper()
    for piece, limit in PIECE_LIMITS.items():
        total = letters.count(piece)
        if hands:
            total += hands.get(piece, 0) + hands.get(piece.lower(), 0)
        if total > limit:
            raise InvalidPosition(f"{total} pieces of kind {piece}, at most {limit} exist")


def check_board(board: cshogi.Board) -> None:
    """Checks on the loaded board: dead pieces and two pawns on a file (nifu).

    cshogi numbers squares file by file (0 = 1a, 8 = 1i, 9 = 2a, ...).
    """
    squares = bytes(board.pieces)
    rank_a, rank_b, rank_h, rank_i = squares[0::9], squares[1::9], squares[7::9], squares[8::9]
    if (any(piece in rank_a for piece in _BLACK_DEAD_LAST)
            or cshogi.BKNIGHT in rank_b):
        raise InvalidPosition("a black pawn, lance or knight stands where it cannot move")
    if (any(piece in rank_i for piece in _WHITE_DEAD_LAST)
            or cshogi.WKNIGHT in rank_h):
        raise InvalidPosition("a white pawn, lance or knight stands where it cannot move")
    if squares.count(cshogi.BPAWN) > 1 or squares.count(cshogi.WPAWN) > 1:
        for start in range(0, 81, 9):
            file_squares = squares[start:start + 9]
            if file_squares.count(cshogi.BPAWN) > 1 or file_squares.count(cshogi.WPAWN) > 1:
                raise InvalidPosition("two unpromoted pawns of one side on a file (nifu)")


def parse_sfen(text: str, board: cshogi.Board | None = None) -> Position:
    """Validate an sfen (``board turn hands [ply]``, optional ``sfen `` prefix).

    Returns the normalised position and, when ``board`` is given, leaves it set
    to that position. Raises InvalidPosition with the reason.
    """
    fields = text.split()
    if fields and fields[0] == "sfen":
        fields = fields[1:]
    if len(fields) not in (3, 4):
        raise InvalidPosition(f"expected 'board turn hands [ply]', got {len(fields)} fields")
    board_field, turn, hand_field = fields[:3]
    ply: int | None = None
    if len(fields) == 4:
        if not (fields[3].isascii() and fields[3].isdigit()) or len(fields[3]) > 9:
            raise InvalidPosition(f"move number {fields[3]!r} is not a non-negative integer")
        ply = int(fields[3]) or None  # move number 0: unknown (what export writes for it)
    if turn not in ("b", "w"):
        raise InvalidPosition(f"side to move {turn!r} is neither 'b' nor 'w'")
    _check_text(board_field, hand_field)
    if board is None:
        board = cshogi.Board()
    other = "w" if turn == "b" else "b"
    board.set_sfen(f"{board_field} {other} {hand_field} 1")
    if board.is_check():
        raise InvalidPosition("the side not to move is in check")
    board.set_sfen(f"{board_field} {turn} {hand_field} 1")
    check_board(board)
    return Position(board.sfen().rsplit(" ", 1)[0], ply)


def move_is_legal(board: cshogi.Board, move: int, usi: str) -> bool:
    """Whether ``move`` (read from ``usi``) is legal, without building the move list.

    cshogi's ``is_legal`` does not check promotion rights or moves that leave a
    piece unable to move again; those are checked here from the USI text.
    """
    if not board.is_legal(move):
        return False
    black = board.turn == cshogi.BLACK
    to_rank = usi[3]
    if usi[1] == "*":
        kind = usi[0]
    else:
        piece_type = cshogi.move_from_piece_type(move)
        if usi[-1] == "+":
            if piece_type not in _PROMOTABLE:
                return False
            zone = "abc" if black else "ghi"
            return usi[1] in zone or to_rank in zone
        kind = _KIND.get(piece_type, "")
    if kind in ("P", "L"):
        return to_rank != ("a" if black else "i")
    if kind == "N":
        return to_rank not in ("ab" if black else "hi")
    return True


def parse_move(board: cshogi.Board, text: str, legal: set[int] | None = None) -> int:
    """The cshogi move for a USI move string, checked to be legal on ``board``.

    ``legal``, the set of legal moves, makes many checks on one board cheaper.
    """
    move = board.move_from_usi(text) if text.isascii() else 0
    if move == 0 or cshogi.move_to_usi(move) != text:
        if not _USI_MOVE_RE.fullmatch(text):
            raise InvalidMove(f"{text!r} is not a USI move")
        raise InvalidMove(f"{text!r} is not legal in this position")
    if not (move in legal if legal is not None else move_is_legal(board, move, text)):
        raise InvalidMove(f"{text!r} is not legal in this position")
    return move


def legal_prefix(board: cshogi.Board, moves: Sequence[str]) -> list[str]:
    """``moves`` up to the first that is not legal (``pass`` included); board unchanged."""
    played = []
    for usi in moves:
        move = board.move_from_usi(usi)
        if not move or not board.is_legal(move):
            break
        board.push(move)
        played.append(usi)
    for _ in played:
        board.pop()
    return played


def parse_position_spec(text: str) -> tuple[cshogi.Board, list[str]]:
    """Parse ``startpos [moves ...]`` or ``sfen S [moves ...]`` (``position`` prefix allowed).

    Returns the board after the moves and the list of moves played.
    """
    tokens = text.split()
    if tokens and tokens[0] == "position":
        tokens = tokens[1:]
    if not tokens:
        raise InvalidPosition("empty position")
    if tokens[0] == "moves" or _USI_MOVE_RE.fullmatch(tokens[0]):
        moves = tokens[1:] if tokens[0] == "moves" else tokens
        raise InvalidPosition("starts with a move, not a position; for moves from the initial "
                              f"position write 'startpos moves {' '.join(moves)}'")
    if tokens[0] == "startpos":
        start = STARTPOS_SFEN + " 1"
        rest = tokens[1:]
    else:
        if tokens[0] == "sfen":
            tokens = tokens[1:]
        if "moves" in tokens:
            cut = tokens.index("moves")
            head, rest = tokens[:cut], tokens[cut:]
        else:
            head, rest = tokens, []
        position = parse_sfen(" ".join(head))
        start = f"{position.sfen} {position.ply if position.ply else 1}"
    if rest and rest[0] != "moves":
        raise InvalidPosition(f"expected 'moves' after the position, got {rest[0]!r}")
    moves = rest[1:]
    board = cshogi.Board(start)
    for number, usi in enumerate(moves, 1):
        try:
            board.push(parse_move(board, usi))
        except InvalidMove as error:
            raise InvalidMove(f"move {number} ({usi}): {error}") from None
    return board, moves


def board_key(board: cshogi.Board) -> str:
    """The normalised sfen (no move number) of a cshogi board."""
    return board.sfen().rsplit(" ", 1)[0]
