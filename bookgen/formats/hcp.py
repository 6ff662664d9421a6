"""hcp and hcpe files, checked before cshogi sees them.

``cshogi.HuffmanCodedPos`` (hcp, 32 bytes: dlshogi's ``roots.hcp``) and
``cshogi.HuffmanCodedPosAndEval`` (hcpe, 38 bytes: an hcp, ``eval`` (16
bits), ``bestMove16`` (16 bits), ``gameResult`` (a byte) and a padding byte:
dlshogi's training data) are raw arrays of records. cshogi's ``Board.set_hcp`` trusts
its input: a garbage record corrupts memory, and the process dies with a
segfault later (at exit, or in the middle of training). So every record read
from a file is decoded here first, in numpy and without cshogi, and checked
for the same things :func:`bookgen.position.parse_sfen` checks in an sfen;
only a record that passes is given to cshogi.

The 256 bits of an hcp are read least significant bit of each byte first:

- 1 bit: the side to move (1: white);
- 7 bits each: the squares of black's and white's kings (cshogi's square
  numbers, 0 = 1a, 1 = 1b, ..., 80 = 9i);
- for each square but the kings', in square order, a prefix code: ``0`` for
  an empty square, else ``1``, the kind (pawn ``0``, lance ``100``, knight
  ``110``, silver ``101``, gold ``1110``, bishop ``11110``, rook ``11111``),
  the colour (1: white) and, except for gold, whether it is promoted;
- the pieces in hand, in any order, each as a code of its kind (pawn ``00``,
  lance ``1000``, knight ``1100``, silver ``1010``, gold ``1110``, bishop
  ``111110``, rook ``111111``) and its colour, up to exactly bit 256.

Every piece of the set is on the board or in a hand, so the codes fill the
256 bits exactly. (Layout checked against ``Board.to_hcp`` on random
positions: tests/test_hcp.py.) ``bestMove16`` is cshogi's ``move16``
(:mod:`bookgen.formats.move16`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from bookgen.errors import BookgenError
from bookgen.formats.move16 import move16_to_usi
from bookgen.position import PIECE_LIMITS, InvalidMove, InvalidPosition, check_board, parse_move

HCP = cshogi.HuffmanCodedPos
HCPE = cshogi.HuffmanCodedPosAndEval

_BITS = 256
_CHUNK = 4096               # records decoded together
# Board codes: (cshogi piece without colour and promotion, kind bits, promotable).
_BOARD_KINDS = [(cshogi.PAWN, "0", True), (cshogi.LANCE, "100", True),
                (cshogi.KNIGHT, "110", True), (cshogi.SILVER, "101", True),
                (cshogi.GOLD, "1110", False), (cshogi.BISHOP, "11110", True),
                (cshogi.ROOK, "11111", True)]
# Hand codes, in cshogi's pieces_in_hand order P L N S G B R.
_HAND_KINDS = ["00", "1000", "1100", "1010", "1110", "111110", "111111"]
_HAND_LETTERS = "PLNSGBR"
_WHITE = 16                 # cshogi: white piece = black piece + 16
_PROMOTED = 8               # cshogi: promoted piece = piece + 8


def _table(codes: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lookup tables over the next 8 bits (first bit lowest): value and code length
    (0: no code starts with these bits)."""
    values = np.zeros(256, dtype=np.int16)
    lengths = np.zeros(256, dtype=np.int16)
    for bits, value in codes:
        low = sum(int(b) << i for i, b in enumerate(bits))
        for high in range(1 << (8 - len(bits))):
            window = low | high << len(bits)
            assert lengths[window] == 0, "codes must be prefix-free"
            values[window], lengths[window] = value, len(bits)
    return values, lengths


def _board_codes() -> list[tuple[str, int]]:
    codes = [("0", 0)]
    for piece, kind, promotable in _BOARD_KINDS:
        for white in (0, 1):
            colour = white * _WHITE
            if promotable:
                codes += [(f"1{kind}{white}0", piece + colour),
                          (f"1{kind}{white}1", piece + _PROMOTED + colour)]
            else:
                codes.append((f"1{kind}{white}", piece + colour))
    return codes


_BOARD_PIECE, _BOARD_LENGTH = _table(_board_codes())
_HAND_INDEX, _HAND_LENGTH = _table([(f"{kind}{white}", white * 7 + index)
                                    for index, kind in enumerate(_HAND_KINDS)
                                    for white in (0, 1)])


def _kinds() -> np.ndarray:
    """The kind of each cshogi piece code for the piece limits, as 1 + its index
    in PIECE_LIMITS (promoted pieces count as their base kind; 0: empty, king)."""
    kinds = np.zeros(32, dtype=np.int8)
    letters = list(PIECE_LIMITS)
    for piece, letter in zip((cshogi.PAWN, cshogi.LANCE, cshogi.KNIGHT, cshogi.SILVER,
                              cshogi.GOLD, cshogi.BISHOP, cshogi.ROOK), _HAND_LETTERS):
        for code in (piece, piece + _PROMOTED, piece + _WHITE, piece + _PROMOTED + _WHITE):
            kinds[code] = letters.index(letter) + 1
    return kinds


_KIND_OF = _kinds()


class InvalidRecord(BookgenError):
    """A record that does not hold a valid position (or move, or result)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"record {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclass
class DecodedHcp:
    """hcp records decoded by :func:`decode_hcp`, one row per record."""

    turn: np.ndarray     # (n,) 0 black, 1 white
    board: np.ndarray    # (n, 81) cshogi piece codes by square, kings included
    hands: np.ndarray    # (n, 2, 7) pieces in hand: colour, P L N S G B R
    problem: list[str | None]   # why a record is not a position (None: it is one)


def decode_hcp(hcp: np.ndarray) -> DecodedHcp:
    """Decode ``hcp`` (``(n, 32)`` uint8, or HuffmanCodedPos records) without cshogi.

    Finds the records that cannot be given to cshogi: bad king squares, codes
    that do not end at bit 256, impossible pieces in hand, more pieces of a
    kind than a set has. The board rules (nifu, dead pieces, check) are
    :func:`check_hcp`'s.
    """
    if hcp.dtype.names:
        hcp = hcp["hcp"]
    hcp = np.ascontiguousarray(hcp, dtype=np.uint8).reshape(-1, 32)
    parts = [_decode(hcp[start:start + _CHUNK]) for start in range(0, len(hcp), _CHUNK)]
    if not parts:
        return DecodedHcp(np.zeros(0, np.uint8), np.zeros((0, 81), np.uint8),
                          np.zeros((0, 2, 7), np.uint8), [])
    return DecodedHcp(np.concatenate([p.turn for p in parts]),
                      np.concatenate([p.board for p in parts]),
                      np.concatenate([p.hands for p in parts]),
                      [problem for p in parts for problem in p.problem])


def _decode(hcp: np.ndarray) -> DecodedHcp:
    n = len(hcp)
    bits = np.zeros((n, _BITS + 8), dtype=np.uint16)
    bits[:, :_BITS] = np.unpackbits(hcp, axis=1, bitorder="little")
    # window[:, p]: the 8 bits from bit p on (first bit lowest), p = 0..256
    window = np.zeros((n, _BITS + 1), dtype=np.uint16)
    for k in range(8):
        window |= bits[:, k:k + _BITS + 1] << k
    rows = np.arange(n)
    turn = bits[:, 0].astype(np.uint8)
    kings = (window[:, 1] & 0x7F, window[:, 8] & 0x7F)
    problem: list[str | None] = [None] * n
    bad = np.zeros(n, dtype=bool)

    def fail(where: np.ndarray, reason: str) -> None:
        for index in np.flatnonzero(where & ~bad).tolist():
            problem[index] = reason
        bad[:] |= where

    fail((kings[0] >= 81) | (kings[1] >= 81), "a king square is beyond the board")
    fail(kings[0] == kings[1], "both kings on one square")
    board = np.zeros((n, 81), dtype=np.uint8)
    position = np.full(n, 15, dtype=np.int64)
    for square in range(81):
        black_king, white_king = kings[0] == square, kings[1] == square
        code = window[rows, np.minimum(position, _BITS)]
        board[:, square] = _BOARD_PIECE[code]
        position += np.where(black_king | white_king, 0, _BOARD_LENGTH[code])
    board[rows, np.minimum(kings[0], 80)] = cshogi.BKING
    board[rows, np.minimum(kings[1], 80)] = cshogi.WKING
    fail(position > _BITS, "the board's codes run past the record's 256 bits")
    hands: np.ndarray = np.zeros((n, 14), dtype=np.int64)  # (n, 2, 7) once counted
    for _ in range(38):
        active = (position < _BITS) & ~bad
        if not active.any():
            break
        code = window[rows, np.minimum(position, _BITS)]
        length = np.where(active, _HAND_LENGTH[code], 0)
        fail(active & (length == 0), "a piece in hand has an invalid code")
        found = length > 0
        hands[rows[found], _HAND_INDEX[code[found]]] += 1
        position += length
    fail(position != _BITS, "the codes do not end at the record's last bit")
    hands = hands.reshape(n, 2, 7)
    kinds = _KIND_OF[board]
    for kind, (letter, limit) in enumerate(PIECE_LIMITS.items(), 1):
        total = ((kinds == kind).sum(axis=1)
                 + hands[:, :, _HAND_LETTERS.index(letter)].sum(axis=1))
        for count in np.unique(total[(total > limit) & ~bad]).tolist():
            fail(total == count, f"{count} pieces of kind {letter}, at most {limit} exist")
    return DecodedHcp(turn, board, hands.astype(np.uint8), problem)


def check_hcp(hcp: np.ndarray, best_moves: np.ndarray | None = None,
              results: np.ndarray | None = None) -> np.ndarray:
    """Check hcp records, and with ``best_moves`` (move16) and ``results`` those of
    hcpe records; raises :class:`InvalidRecord` for the first bad one.

    Returns the best moves as cshogi moves (an empty array without ``best_moves``).
    """
    if hcp.dtype.names:
        hcp = hcp["hcp"]
    hcp = np.ascontiguousarray(hcp, dtype=np.uint8).reshape(-1, 32)
    decoded = decode_hcp(hcp)
    flipped = hcp.copy()
    flipped[:, 0] ^= 1                    # the same board, the other side to move
    moves = np.zeros(len(hcp) if best_moves is not None else 0, dtype=np.int64)
    move16s = (best_moves.astype(np.int64) & 0xFFFF).tolist() if best_moves is not None else []
    game_results = results.astype(np.int64).tolist() if results is not None else []
    valid_results = (cshogi.DRAW, cshogi.BLACK_WIN, cshogi.WHITE_WIN)
    board = cshogi.Board()
    for index, problem in enumerate(decoded.problem):
        if problem is not None:
            raise InvalidRecord(index, problem)
        board.set_hcp(flipped[index])
        if board.is_check():
            raise InvalidRecord(index, "the side not to move is in check")
        board.set_hcp(hcp[index])
        try:
            check_board(board)
        except InvalidPosition as error:
            raise InvalidRecord(index, str(error)) from None
        if results is not None and game_results[index] not in valid_results:
            raise InvalidRecord(index, f"gameResult {game_results[index]} is not 0 (draw), "
                                       "1 (black won) or 2 (white won)")
        if best_moves is not None:
            move16 = move16s[index]
            usi = move16_to_usi(move16)
            if usi is None:
                raise InvalidRecord(index, f"bestMove16 {move16:#06x} is not a move")
            try:
                moves[index] = parse_move(board, usi)
            except InvalidMove as error:
                raise InvalidRecord(index, f"bestMove16 {move16:#06x}: {error}") from None
    return moves


def _read(path: Path, dtype: np.dtype, what: str) -> np.ndarray:
    try:
        size = path.stat().st_size
        whole, more = divmod(size, dtype.itemsize)
        if more:
            raise BookgenError(
                f"{path}: {size} bytes is not a whole number of {dtype.itemsize}-byte {what} "
                f"records ({whole} record{'' if whole == 1 else 's'} and {more} bytes more: "
                "a truncated or different file?)")
        return np.fromfile(path, dtype)
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None


def _bad_record(path: Path, error: InvalidRecord, size: int) -> BookgenError:
    return BookgenError(f"{path}: record {error.index} (byte {error.index * size}): "
                        f"{error.reason}")


def read_hcp(path: str | Path) -> np.ndarray:
    """The records of an hcp file, each checked (:func:`check_hcp`); raises
    BookgenError naming the file and the first bad record."""
    path = Path(path)
    records = _read(path, HCP, "hcp")
    try:
        check_hcp(records)
    except InvalidRecord as error:
        raise _bad_record(path, error, HCP.itemsize) from None
    return records


def read_hcpe(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The records of an hcpe file and their best moves as cshogi moves, each
    record checked (position, best move, result); raises BookgenError naming
    the file and the first bad record."""
    path = Path(path)
    records = _read(path, HCPE, "hcpe")
    try:
        moves = check_hcp(records["hcp"], records["bestMove16"], records["gameResult"])
    except InvalidRecord as error:
        raise _bad_record(path, error, HCPE.itemsize) from None
    return records, moves
