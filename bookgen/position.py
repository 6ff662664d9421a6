"""Positions: safe sfen parsing, legality checks, normalisation and keys.

cshogi aborts the whole interpreter when ``Board.set_sfen`` is given garbage,
so every sfen that comes from outside is checked here, syntactically and for
legality, before cshogi sees it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import cshogi
import numpy as np

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


# -- the same checks on many positions at once ---------------------------------------------
#
# Readers of large files screen their positions here in bulk: a position passes when the
# checks of _check_text and check_board pass and its text is already in normal form (the
# sfen cshogi writes); it then needs only cshogi's set_sfen and the check of the side not
# to move. Any other position goes through parse_sfen, which says what is wrong. Boards
# are checked rank by rank: books repeat the same few thousand ranks, each checked once.

_HAND_ORDER = "RBGSNLPrbgsnlp"      # the order of the pieces in hand in cshogi's sfens
_RANK_PIECES = re.compile(r"\+[PLNSBRplnsbr]|[PLNSGBRKplnsgbrk]|[1-9]")
_COUNT_BITS = 7     # per kind in a rank's summed counts (9 ranks of 9 squares fit)
_KINDS = "PLNSGBR"  # PIECE_LIMITS' kinds; then the black king, the white king


class _Ranks(dict[bytes, int]):
    """Rank text -> row of :attr:`counts` and :attr:`flags` (row 0: not a valid rank
    in normal form). ``counts``: pieces of each kind (P L N S G B R, black king, white
    king) in 7-bit fields, to be summed over a board; ``flags``: bits 0-3 an
    unpromoted black pawn or lance, black knight, white pawn or lance, white knight;
    bits 4-12 the files of black's unpromoted pawns, 13-21 white's."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = [0]
        self.flags = [0]
        self.squares: list[tuple[int, ...]] = [(0,) * 9]   # cshogi's pieces, file 9 first

    def __missing__(self, rank: bytes) -> int:
        row = self._check(rank.decode("ascii", "replace"))
        self[rank] = row
        return row

    def _check(self, rank: str) -> int:
        tokens = _RANK_PIECES.findall(rank)
        if "".join(tokens) != rank or any(a.isdigit() and b.isdigit()
                                          for a, b in zip(tokens, tokens[1:])):
            return 0
        counts = flags = 0
        file = 9
        squares: list[int] = []
        for token in tokens:
            if token.isdigit():
                file -= int(token)
                squares += [0] * int(token)
                continue
            if file < 1:
                return 0        # more than 9 squares
            squares.append(_PIECE_CODES[token])
            letter = token[-1]
            upper = letter.upper()
            kind = _KINDS.index(upper) if upper != "K" else (7 if letter == "K" else 8)
            counts += 1 << (_COUNT_BITS * kind)
            if len(token) == 1:
                black = letter.isupper()
                if upper in "PL":
                    flags |= 1 if black else 4
                elif upper == "N":
                    flags |= 2 if black else 8
                if upper == "P":
                    flags |= 1 << ((4 if black else 13) + file - 1)
            file -= 1
        if file != 0:
            return 0
        self.counts.append(counts)
        self.flags.append(flags)
        self.squares.append(tuple(squares))
        return len(self.counts) - 1


class _Hands(dict[bytes, int]):
    """Hands text -> row of :attr:`counts` (pieces of each kind of PIECE_LIMITS, both
    sides together); row 0: not a hands field in normal form (as cshogi writes it)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = [(0,) * len(PIECE_LIMITS)]

    def __missing__(self, hands: bytes) -> int:
        counts = hand_counts(hands.decode("ascii", "replace"))
        row = 0
        if counts is not None:
            self.counts.append(counts)
            row = len(self.counts) - 1
        self[hands] = row
        return row


_RANK_TABLE = _Ranks()
_HAND_TABLE = _Hands()


_PIECE_CODES = {letter: code for code, letter in enumerate(
    "PLNSBRGK", 1)} | {"+" + letter: code for code, letter in enumerate("PLNSBR", 9)}
_PIECE_CODES |= {text.lower(): code + 16 for text, code in _PIECE_CODES.items()}

# Moves of black's pieces as (rank, file column) steps, ranks counted from rank a (black
# moves towards it) and columns from file 9: the steps of each piece, and the slides. The
# king is no attacker: cshogi's is_check, which parse_sfen asks, does not count it.
_GOLD = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, 0))
_DIAGONAL = ((-1, -1), (-1, 1), (1, -1), (1, 1))
_ORTHOGONAL = ((-1, 0), (0, -1), (0, 1), (1, 0))
_STEPS = {cshogi.BPAWN: ((-1, 0),), cshogi.BKNIGHT: ((-2, -1), (-2, 1)),
          cshogi.BSILVER: ((-1, -1), (-1, 0), (-1, 1), (1, -1), (1, 1)),
          cshogi.BGOLD: _GOLD, cshogi.BPROM_PAWN: _GOLD, cshogi.BPROM_LANCE: _GOLD,
          cshogi.BPROM_KNIGHT: _GOLD, cshogi.BPROM_SILVER: _GOLD,
          cshogi.BPROM_BISHOP: _ORTHOGONAL,
          cshogi.BPROM_ROOK: _DIAGONAL}
_SLIDES = {cshogi.BLANCE: ((-1, 0),), cshogi.BBISHOP: _DIAGONAL, cshogi.BROOK: _ORTHOGONAL,
           cshogi.BPROM_BISHOP: _DIAGONAL, cshogi.BPROM_ROOK: _ORTHOGONAL}
_WALL = 127
_SIZE = 13          # the board with two squares of wall around it


def _by_step(table: dict[int, tuple[tuple[int, int], ...]], white: bool
             ) -> list[tuple[int, np.ndarray]]:
    """(offset on the walled board from the target back to the mover, bool [128]: the
    pieces of that colour that move by the step), per step of black's ``table`` (white's
    steps go the other way)."""
    result: dict[int, np.ndarray] = {}
    for piece, steps in table.items():
        for step_rank, step_column in steps:
            offset = -(step_rank * _SIZE + step_column) * (-1 if white else 1)
            result.setdefault(offset, np.zeros(128, dtype=bool))[piece + 16 * white] = True
    return list(result.items())


_ATTACKS = {white: (_by_step(_STEPS, white), _by_step(_SLIDES, white))
            for white in (False, True)}


def opponent_in_check(squares: np.ndarray, turn: np.ndarray) -> np.ndarray:
    """Whether the side not to move is in check, for boards ``squares`` (int8 [n, 9, 9]
    of cshogi's pieces, rank a first, file 9 first, one king a side) and sides to move
    ``turn``: whether a piece of the side to move attacks the other king."""
    count = len(squares)
    walled = np.full((count, _SIZE, _SIZE), _WALL, dtype=np.int8)
    walled[:, 2:11, 2:11] = squares
    flat = walled.reshape(-1)
    attacked = np.zeros(count, dtype=bool)
    for white in (False, True):
        chosen = np.flatnonzero(turn.astype(bool) == white)
        if not len(chosen):
            continue
        king_code = cshogi.BKING if white else cshogi.WKING
        king = (np.argmax(walled[chosen].reshape(len(chosen), -1) == king_code, axis=1)
                + chosen * _SIZE * _SIZE)
        steps, slides = _ATTACKS[white]
        hit = np.zeros(len(chosen), dtype=bool)
        for offset, pieces in steps:
            hit |= pieces[flat[king + offset]]
        for offset, pieces in slides:
            rays = np.arange(len(chosen))
            at = king + offset
            while len(rays):
                piece = flat[at]
                stops = piece != 0
                hit[rays[stops]] |= pieces[piece[stops]]
                rays, at = rays[~stops], at[~stops] + offset
        attacked[chosen] = hit
    return attacked


def _rows(table: dict[bytes, int], texts: list[bytes]) -> np.ndarray:
    return np.fromiter(map(table.__getitem__, texts), dtype=np.int64, count=len(texts))


def screen_sfens(boards: list[bytes], turns: np.ndarray, hands: list[bytes]) -> np.ndarray:
    """Which positions, given by their board and hands fields and sides to move, pass
    every check of :func:`parse_sfen` (syntax, 9 squares a rank, one king a side, no
    dead piece, no two pawns on a file, the number of pieces of each kind, the side
    not to move not in check) and are in normal form (as cshogi writes them: no two
    digits in a row, the hands in cshogi's order and counts)."""
    global _RANK_TABLE, _HAND_TABLE
    if len(_RANK_TABLE) > 1 << 16 or len(_HAND_TABLE) > 1 << 16:   # ever new ones: anew
        _RANK_TABLE, _HAND_TABLE = _Ranks(), _Hands()
    ranks, hand_table = _RANK_TABLE, _HAND_TABLE
    count = len(boards)
    if not count:
        return np.zeros(0, dtype=bool)
    joined = b" ".join(boards)
    text = np.frombuffer(joined, dtype=np.uint8)
    ends = np.append(np.flatnonzero(text == ord(" ")), len(text))
    slashes = np.searchsorted(np.flatnonzero(text == ord("/")), ends)
    ok = np.diff(slashes, prepend=0) == 8
    rows = np.zeros((count, 9), dtype=np.int64)
    if ok.all():
        rows[:] = _rows(ranks, joined.replace(b" ", b"/").split(b"/")).reshape(-1, 9)
    elif ok.any():
        chosen = [boards[i] for i in np.flatnonzero(ok).tolist()]
        rows[ok] = _rows(ranks, b"/".join(chosen).split(b"/")).reshape(-1, 9)
    ok &= (rows != 0).all(axis=1)
    counts = np.array(ranks.counts, dtype=np.int64)[rows]
    flags = np.array(ranks.flags, dtype=np.int64)[rows]
    total = counts.sum(axis=1)
    fields = (total[:, None] >> (_COUNT_BITS * np.arange(9))) & ((1 << _COUNT_BITS) - 1)
    ok &= (fields[:, 7] == 1) & (fields[:, 8] == 1)
    dead = (flags[:, 0] & 3) | (flags[:, 1] & 2) | (flags[:, 7] & 8) | (flags[:, 8] & 12)
    ok &= dead == 0
    for shift in (4, 13):
        files = (flags >> shift) & 0x1FF
        ok &= files.sum(axis=1) == np.bitwise_or.reduce(files, axis=1)
    in_hand = _rows(hand_table, hands)
    ok &= in_hand != 0
    pieces = fields[:, :7] + np.array(hand_table.counts, dtype=np.int64)[in_hand]
    ok &= (pieces <= PIECE_LIMIT_ARRAY).all(axis=1)
    checked = np.flatnonzero(ok)
    squares = np.array(ranks.squares, dtype=np.int8)[rows[checked]]
    ok[checked] = ~opponent_in_check(squares, turns[checked])
    return ok


@lru_cache(maxsize=4096)
def hand_counts(hands: str) -> tuple[int, ...] | None:
    """The pieces in hand of each kind of :data:`PIECE_LIMITS` (both sides together) of a
    hands field in normal form (as cshogi writes it), None if it is not in normal form
    or not valid."""
    if hands == "-":
        return (0,) * len(PIECE_LIMITS)
    try:
        counts = _parse_hands(hands)
    except InvalidPosition:
        return None
    normal = "".join(("" if counts[letter] == 1 else str(counts[letter])) + letter
                     for letter in _HAND_ORDER if letter in counts)
    if normal != hands:
        return None
    return tuple(counts.get(letter, 0) + counts.get(letter.lower(), 0)
                 for letter in PIECE_LIMITS)


PIECE_LIMIT_ARRAY = np.array(list(PIECE_LIMITS.values()), dtype=np.int64)


def move_rules_hold(move16: np.ndarray, move32: np.ndarray, black: np.ndarray) -> np.ndarray:
    """:func:`move_is_legal`'s own rules (promotion rights, no piece left unable to
    move) for arrays of moves that cshogi's ``is_legal`` accepted: ``move16``, the cshogi
    move (``move32``, which holds the piece moved) and whether black moves."""
    move = move16.astype(np.int64) & 0xFFFF
    to, origin, promote = move & 0x7F, move >> 7 & 0x7F, (move >> 14 & 1).astype(bool)
    drop = origin >= 81
    piece = move32.astype(np.int64) >> 16 & 0xF
    kind = np.where(drop, origin - 80, piece)   # drops: P L N S B R G, cshogi's 1..7
    to_rank, from_rank = to % 9, origin % 9

    def zone(rank: np.ndarray) -> np.ndarray:
        return np.where(black, rank <= 2, rank >= 6)

    promotion = ((piece >= cshogi.PAWN) & (piece <= cshogi.ROOK)
                 & (zone(from_rank) | zone(to_rank)))
    last = np.where(black, 0, 8)
    stuck = ((((kind == cshogi.PAWN) | (kind == cshogi.LANCE)) & (to_rank == last))
             | ((kind == cshogi.KNIGHT) & np.where(black, to_rank <= 1, to_rank >= 7)))
    return np.where(promote & ~drop, promotion, ~stuck)


def side_to_move_in_check(sfens: Sequence[str], block: int = 1 << 16) -> np.ndarray:
    """Whether the side to move is in check, for valid positions given as normalised
    sfens (``board turn hands``, a move number allowed), without a board per position:
    the boards are read through the rank table of :func:`screen_sfens`."""
    global _RANK_TABLE
    if len(_RANK_TABLE) > 1 << 16:
        _RANK_TABLE = _Ranks()
    ranks = _RANK_TABLE
    squares_table = np.array(ranks.squares, dtype=np.int8)
    result = np.zeros(len(sfens), dtype=bool)
    for start in range(0, len(sfens), block):
        part = sfens[start:start + block]
        tokens = " ".join(part).split(" ")      # one split for the block, in C
        if len(tokens) == 3 * len(part):         # board turn hands, as the book stores them
            boards, turn_marks = tokens[0::3], tokens[1::3]
        else:
            fields = [sfen.split(" ", 2) for sfen in part]
            boards, turn_marks = [f[0] for f in fields], [f[1] for f in fields]
        turns = (np.array(turn_marks) == "w").astype(np.int8)
        rows = _rows(ranks, "/".join(boards).encode("ascii").split(b"/"))
        if len(ranks.squares) != len(squares_table):   # ranks seen for the first time
            squares_table = np.array(ranks.squares, dtype=np.int8)
        squares = squares_table[rows].reshape(len(part), 9, 9)
        result[start:start + len(part)] = opponent_in_check(squares, 1 - turns)
    return result
