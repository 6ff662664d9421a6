"""YaneuraOu's text book format, DB2016 (``.db``).

Reading accepts what real files contain: UTF-8 (CP932 comments too) or
UTF-16 text, a BOM, CRLF or CR line ends, ``#`` and
``//`` comments, blank lines, optional move fields, ``none`` for a missing
ponder, value or depth, duplicate positions (the minimum ply is kept and the
moves merged by the store). Invalid entries are reported and skipped.

:func:`read_db2016` reads a file into :class:`Db2016Block` s: the positions and
moves of about :data:`CHUNK_BYTES` of text each, as numpy columns, in file order
(on forked workers for large files). Each piece is read in bulk: the lines are
told apart, the move lines cut into fields and their numbers parsed, and the
positions screened (:func:`bookgen.position.screen_sfens`: rank by rank through
tables, the side not to move's check in numpy); a loop per position sets the
board once (cshogi) and checks its moves and ponders with ``is_legal`` (the rules
it leaves out in bulk: :func:`bookgen.position.move_rules_hold`). A line that the
bulk path does not take as it is (odd spacing, ``none`` counts, a number out of
range, an illegal move...) is read again by the line reader (:func:`move_fields`,
:func:`bookgen.position.parse_sfen`), which decides and says what is wrong: both
give the same result for any line.

Writing produces normalised sfens with the minimum ply, blocks sorted by sfen
(byte order, as YaneuraOu's on-the-fly reader binary-searches) and moves best
first: :func:`write_db2016` from blocks of :class:`~bookgen.store.BookMove`,
:func:`format_columns` from columns (after :func:`write_db2016_header`), in the
same line format.
"""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import BinaryIO, Literal, TextIO, overload

import cshogi
import numpy as np

from bookgen.arrays import NULL, PackedStrings
from bookgen.diagnostics import Diagnostics
from bookgen.formats.move16 import move16_to_usi
from bookgen.position import (
    InvalidMove,
    InvalidPosition,
    move_rules_hold,
    parse_move,
    parse_sfen,
    screen_sfens,
)
from bookgen.store import BookMove
from bookgen.workers.forked import fork_map

__all__ = ["CHUNK_BYTES", "DEFAULT_COUNT", "DEFAULT_DEPTH", "DEFAULT_VALUE", "HEADER", "NONE",
           "PARALLEL_MIN_BYTES", "Db2016Block", "format_block", "format_columns", "iter_lines",
           "move_fields", "parse_chunk", "read_db2016", "sniff_encoding", "text_blocks",
           "usi_names", "write_db2016", "write_db2016_header"]

HEADER = "#YANEURAOU-DB2016 1.00"

_INT32 = 2**31 - 1
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_SNIFF_BYTES = 4096
DEFAULT_VALUE, DEFAULT_DEPTH, DEFAULT_COUNT = 0, 0, 1
NONE = NULL                 # ``none`` in the value and depth columns
CHUNK_BYTES = 4 << 20       # text read as one block
PARALLEL_MIN_BYTES = 4 << 20  # files from this size are read on workers


class _BadField(ValueError):
    pass


@overload
def _number(token: str, name: str, allow_none: Literal[False], minimum: int, maximum: int
            ) -> int: ...


@overload
def _number(token: str, name: str, allow_none: bool, minimum: int, maximum: int
            ) -> int | None: ...


def _number(token: str, name: str, allow_none: bool, minimum: int, maximum: int) -> int | None:
    if allow_none and token == "none":
        return None
    # int() alone would also take '1_000', '+5' and non-ASCII digits.
    if token.isascii() and "_" not in token and token[0] != "+":
        try:
            number = int(token)
        except ValueError:
            pass
        else:
            if minimum <= number <= maximum:
                return number
            raise _BadField(f"{name} {number} is out of range [{minimum}, {maximum}]")
    raise _BadField(f"{name} {token!r} is not an integer")


def sniff_encoding(head: bytes) -> tuple[str, int]:
    """(codec, BOM length) of a text file from its first bytes.

    A BOM decides (UTF-8, UTF-16 LE or BE); without one, text whose every
    other byte is NUL is UTF-16 (DB2016 lines are ASCII); anything else is
    read as UTF-8, which also reads the ASCII lines of CP932 files (their
    Japanese can only be in comments).
    """
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:_SNIFF_BYTES - _SNIFF_BYTES % 2]
    if len(sample) >= 2:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) >= 0.9 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "utf-16-be", 0
    return "utf-8", 0


def text_blocks(path: Path, block_bytes: int = 1 << 20) -> Iterator[tuple[bytes, int]]:
    """The text of a DB2016 file as UTF-8 with ``\\n`` line ends, in blocks of
    about ``block_bytes``: (text, bytes of the file they came from).

    The encoding comes from :func:`sniff_encoding` (the BOM is dropped);
    ``\\r\\n`` and a lone ``\\r`` (old Mac files) both end a line.
    """
    with open(path, "rb") as handle:
        raw = handle.read(block_bytes)
        codec, bom = sniff_encoding(raw)
        decoder = (None if codec == "utf-8"
                   else codecs.getincrementaldecoder(codec)(errors="replace"))
        pending_cr = False
        block = raw[bom:]
        while True:
            final = not raw
            if decoder is not None:
                block = decoder.decode(block, final=final).encode("utf-8", "replace")
            if pending_cr:
                block = b"\r" + block
            pending_cr = block.endswith(b"\r") and not final
            if pending_cr:      # a \r\n may be cut between two blocks
                block = block[:-1]
            if b"\r" in block:
                block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if block or raw:
                yield block, len(raw)
            if final:
                return
            raw = handle.read(block_bytes)
            block = raw


def iter_lines(path: Path, on_bytes: Callable[[int], object] | None = None
               ) -> Iterator[tuple[int, str]]:
    """(line number, text without line end) for each line (see :func:`text_blocks`).

    ``on_bytes`` is called now and then with the number of bytes read since.
    """
    number = 0
    carry = b""
    for block, size in text_blocks(path):
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        for raw in lines:
            number += 1
            yield number, raw.decode("utf-8", "replace")
        if on_bytes is not None and size:
            on_bytes(size)
    if carry:
        yield number + 1, carry.decode("utf-8", "replace")


# -- move texts --------------------------------------------------------------------------


@cache
def usi_names() -> np.ndarray:
    """object [65536]: the USI text of each ``move16`` (None where it is no move's)."""
    names = np.full(1 << 16, None, dtype=object)
    for move16 in range(1 << 15):
        names[move16] = move16_to_usi(move16)
    return names


def _pack(text: bytes) -> int:
    return int.from_bytes(text, "little")


_NONE_CODE = _pack(b"none")


@cache
def _usi_codes() -> tuple[np.ndarray, np.ndarray]:
    """(sorted codes of every USI move text (its bytes as a little-endian integer), the
    move16 of each)."""
    names = usi_names()
    moves = np.flatnonzero(names != None)  # noqa: E711 (elementwise)
    codes = np.array([_pack(names[m].encode()) for m in moves.tolist()], dtype=np.int64)
    order = np.argsort(codes)
    return codes[order], moves[order].astype(np.uint16)


# -- the line reader ------------------------------------------------------------------------

MoveFields = tuple[int, int, int, int, int]   # move16, ponder16 (0: none), value, depth, count


def move_fields(board: cshogi.Board, line: str) -> MoveFields:
    """The fields of a move line (stripped, not empty) of the position on ``board``:
    value and depth :data:`NONE` for ``none``. Raises ValueError saying what is wrong."""
    tokens = line.split()
    try:
        move = parse_move(board, tokens[0])
        ponder_token = tokens[1] if len(tokens) > 1 else "none"
        ponder = 0
        if ponder_token != "none":
            board.push(move)
            try:
                ponder = parse_move(board, ponder_token) & 0xFFFF
            except InvalidMove as error:
                raise InvalidMove(f"ponder: {error}") from None
            finally:
                board.pop()
        value = (_number(tokens[2], "value", True, -_INT32, _INT32)
                 if len(tokens) > 2 else DEFAULT_VALUE)
        depth = (_number(tokens[3], "depth", True, 0, _INT32)
                 if len(tokens) > 3 else DEFAULT_DEPTH)
        count = (_number(tokens[4], "count", False, 0, 2**63 - 1)
                 if len(tokens) > 4 else DEFAULT_COUNT)
    except (InvalidMove, _BadField) as error:
        raise ValueError(f"invalid move line {line!r}: {error}") from None
    return (move & 0xFFFF, ponder, NONE if value is None else value,
            NONE if depth is None else depth, count)


# -- blocks ------------------------------------------------------------------------------------


_NULL_OBJECT = np.array(None, dtype=object)   # None for np.where (its stubs take no None)


@dataclass
class Db2016Block:
    """The valid positions and moves of a piece of a DB2016 file, in file order.

    Positions: ``sfen`` (normalised, no move number), ``ply`` (0: none), ``zobrist``
    (cshogi's, unsigned), ``book_key`` (cshogi's Apery book key), ``turn`` (0 black).
    Moves: ``position`` (index into this block's positions), ``move`` and ``ponder``
    (``move16``; ponder 0: none), ``value`` and ``depth`` (:data:`NONE`: none),
    ``count``. ``problems`` (line, reason) in line order, ``skipped`` by kind (the
    problems' entries and the moves of invalid positions), ``size``: bytes of the file
    read for it.
    """

    sfen: PackedStrings
    ply: np.ndarray
    zobrist: np.ndarray
    book_key: np.ndarray
    turn: np.ndarray
    position: np.ndarray
    move: np.ndarray
    ponder: np.ndarray
    value: np.ndarray
    depth: np.ndarray
    count: np.ndarray
    problems: list[tuple[int, str]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    size: int = 0

    def __len__(self) -> int:
        return len(self.sfen)

    def position_rows(self) -> list[tuple[int, str, int, int | None, int]]:
        """(index, sfen, signed zobrist, ply or None, turn) of each position."""
        zobrist = self.zobrist.view(np.int64).tolist()
        plies = np.where(self.ply > 0, self.ply.astype(object), _NULL_OBJECT).tolist()
        return list(zip(range(len(self.sfen)), self.sfen.tolist(), zobrist, plies,
                        self.turn.tolist()))

    def move_rows(self) -> list[tuple[int, str, str | None, int | None, int | None, int]]:
        """(position index, move, ponder or None, value, depth, count) of each move,
        None for ``none``."""
        names = usi_names()

        def nullable(column: np.ndarray) -> list[int | None]:
            return np.where(column == NONE, _NULL_OBJECT, column.astype(object)).tolist()

        return list(zip(self.position.tolist(), names[self.move].tolist(),
                        names[self.ponder].tolist(), nullable(self.value),
                        nullable(self.depth), self.count.tolist()))


# Line kinds.
_EMPTY, _COMMENT, _SFEN, _MOVE, _ODD = range(5)


def _table(characters: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[list(characters.encode())] = True
    return table


# Bytes a line may hold and still be read in bulk (anything else: the line reader).
_BULK_BYTES = _table("0123456789abcdefghiPLNSGBRKplnsgbrk+*-/ nosfw")
_MOVE_START = _table("123456789PLNSGBR")
_BULK_BYTE_STRING = bytes(np.flatnonzero(_BULK_BYTES).tolist()) + b"\n"


def _lines(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the lines of text that ends with a newline."""
    stops = np.flatnonzero(data == ord("\n"))
    starts = np.empty_like(stops)
    if len(stops):
        starts[0] = 0
        starts[1:] = stops[:-1] + 1
    return starts, stops


def _integers(data: np.ndarray, starts: np.ndarray, stops: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """(value, ok) of the tokens ``data[starts:stops]`` read as ``-?[0-9]{1,18}``."""
    negative = data[starts] == ord("-")
    first = starts + negative
    digits = stops - first
    ok = (digits >= 1) & (digits <= 18)
    value = np.zeros(len(starts), dtype=np.int64)
    width = int(digits[ok].max()) if ok.any() else 0
    for offset in range(width):
        active = ok & (offset < digits)
        digit = data[np.where(active, first + offset, 0)].astype(np.int64) - ord("0")
        ok &= ~active | ((digit >= 0) & (digit <= 9))
        value = np.where(active, value * 10 + digit, value)
    return np.where(negative, -value, value), ok


def _codes(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The tokens ``data[starts:stops]`` of up to 5 bytes as little-endian integers (-1
    for longer ones)."""
    lengths = stops - starts
    code = np.zeros(len(starts), dtype=np.int64)
    for offset in range(5):
        active = offset < lengths
        code |= np.where(active, data[np.where(active, starts + offset, 0)].astype(np.int64),
                         0) << (8 * offset)
    return np.where(lengths <= 5, code, -1)


def _moves16(codes: np.ndarray) -> np.ndarray:
    """move16 of each packed USI text, 0 where it is none."""
    table, moves = _usi_codes()
    at = np.minimum(np.searchsorted(table, codes), len(table) - 1)
    return np.where(table[at] == codes, moves[at], 0).astype(np.uint16)


@dataclass
class _MoveColumns:
    line: np.ndarray       # line index in the chunk
    move: np.ndarray
    ponder: np.ndarray
    value: np.ndarray
    depth: np.ndarray
    count: np.ndarray


def _bulk_moves(data: np.ndarray, starts: np.ndarray, stops: np.ndarray,
                lines: np.ndarray, spaces: np.ndarray, first_space: np.ndarray,
                space_count: np.ndarray) -> tuple[_MoveColumns, np.ndarray]:
    """The fields of move lines ``lines`` read in bulk, and which lines they could not
    take (to be read by :func:`move_fields`)."""
    tokens = space_count[lines] + 1
    ok = tokens <= 5
    line_start, line_stop = starts[lines], stops[lines]
    base = first_space[lines]

    def token(j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        present = ok & (tokens > j)
        begin = line_start if j == 0 else np.where(
            present, spaces[np.where(present, base + j - 1, 0)] + 1, 0)
        end = np.where(present & (tokens > j + 1),
                       spaces[np.where(present & (tokens > j + 1), base + j, 0)], line_stop)
        return present, np.where(present, begin, 0), np.where(present, end, 0)

    _present, begin, end = token(0)
    move = _moves16(_codes(data, begin, end))
    ok &= move != 0
    present, begin, end = token(1)
    code = _codes(data, begin, end)
    ponder = np.where(present & (code != _NONE_CODE), _moves16(code), 0).astype(np.uint16)
    ok &= ~present | (code == _NONE_CODE) | (ponder != 0)
    columns = []
    for j, default, low, high, none_ok in ((2, DEFAULT_VALUE, -_INT32, _INT32, True),
                                           (3, DEFAULT_DEPTH, 0, _INT32, True),
                                           (4, DEFAULT_COUNT, 0, 2**63 - 1, False)):
        present, begin, end = token(j)
        number, parsed = _integers(data, begin, end)
        none = present & ~parsed & (end - begin == 4)
        none[none] = _codes(data, begin[none], end[none]) == _NONE_CODE
        ok &= ~present | (none & none_ok) | (parsed & (number >= low) & (number <= high))
        columns.append(np.where(present, np.where(none, NONE, number), default))
    keep = np.flatnonzero(ok)
    return _MoveColumns(lines[keep], move[keep], ponder[keep], *(c[keep] for c in columns)
                        ), lines[~ok]


def _screen_positions(raw: bytes, data: np.ndarray, stops: np.ndarray, lines: np.ndarray,
                      spaces: np.ndarray, first_space: np.ndarray, space_count: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sfen lines ``lines`` screened in bulk: (ok, where the normalised sfen of each is
    in ``raw``: start, stop; ply).

    ``ok``: the line is ``sfen BOARD TURN HANDS [PLY]`` with single spaces, its
    position in normal form and valid as far as the text tells
    (:func:`bookgen.position.screen_sfens`).
    """
    count = space_count[lines]
    ok = (count == 3) | (count == 4)
    base = np.where(ok, first_space[lines], 0)
    board_start = spaces[base] + 1
    turn_start = spaces[np.where(ok, base + 1, 0)] + 1
    hands_start = spaces[np.where(ok, base + 2, 0)] + 1
    with_ply = ok & (count == 4)
    hands_stop = np.where(with_ply, spaces[np.where(with_ply, base + 3, 0)], stops[lines])
    ok &= (hands_start - turn_start == 2) & np.isin(data[turn_start], (ord("b"), ord("w")))
    ply, ply_ok = _integers(data, np.where(with_ply, hands_stop + 1, 0),
                            np.where(with_ply, stops[lines], 0))
    ok &= ~with_ply | (ply_ok & (data[np.minimum(hands_stop + 1, len(data) - 1)] != ord("-"))
                       & (stops[lines] - hands_stop - 1 <= 9))
    ply = np.where(with_ply, ply, 0)
    rows = np.flatnonzero(ok)
    ok[rows] = screen_sfens(
        [raw[b:e] for b, e in zip(board_start[rows].tolist(), (turn_start[rows] - 1).tolist())],
        data[turn_start[rows]] == ord("w"),
        [raw[b:e] for b, e in zip(hands_start[rows].tolist(), hands_stop[rows].tolist())])
    return ok, board_start, hands_stop, ply


def parse_chunk(job: tuple[str, int, bytes, int], bulk: bool = True) -> Db2016Block:
    """Read one piece of a DB2016 file: (source, number of its first line, its text
    as UTF-8 with ``\\n`` line ends, bytes of the file it came from). It starts with
    an ``sfen`` line unless it is the file's first. ``bulk=False`` reads every line
    with the line reader (the tests compare both)."""
    source, first_line, text_bytes, size = job
    del source
    if not text_bytes.endswith(b"\n"):
        text_bytes += b"\n"
    data = np.frombuffer(text_bytes, dtype=np.uint8)
    starts, stops = _lines(data)
    n_lines = len(starts)
    ascii_text = text_bytes.decode("ascii") if text_bytes.isascii() else None

    def text(begin: int, end: int) -> str:
        if ascii_text is not None:
            return ascii_text[begin:end]
        return text_bytes[begin:end].decode("utf-8", "replace")

    # -- kinds of lines
    lengths = stops - starts
    first = data[starts]
    kind = np.full(n_lines, _ODD, dtype=np.int8)
    kind[_MOVE_START[first]] = _MOVE
    kind[first == ord("#")] = _COMMENT
    second = data[np.minimum(starts + 1, len(data) - 1)]
    kind[(first == ord("/")) & (second == ord("/")) & (lengths >= 2)] = _COMMENT
    sfen = lengths >= 5
    for offset, character in enumerate(b"sfen "):
        sfen &= data[np.minimum(starts + offset, len(data) - 1)] == character
    kind[sfen] = _SFEN
    kind[lengths == 0] = _EMPTY
    spaces = np.flatnonzero(data == ord(" "))
    first_space = np.searchsorted(spaces, starts)
    space_count = np.searchsorted(spaces, stops) - first_space
    spaces = np.append(spaces, len(data) - 1)   # (never read: indexing stays in range)
    if bulk:
        odd_bytes = (np.flatnonzero(~_BULK_BYTES[data] & (data != ord("\n")))
                     if text_bytes.translate(None, _BULK_BYTE_STRING) else spaces[:0])
        doubled = spaces[:-2][np.diff(spaces[:-1]) == 1]
        trailing = stops[(lengths > 0) & (data[np.maximum(stops - 1, 0)] == ord(" "))]
        odd = np.unique(np.searchsorted(stops, np.concatenate([odd_bytes, doubled, trailing])))
        odd = odd[(kind[odd] == _MOVE) | (kind[odd] == _SFEN)]
        kind[odd] = _ODD
    else:
        kind[(kind == _MOVE) | (kind == _SFEN)] = _ODD
    stripped: dict[int, str] = {}
    for line in np.flatnonzero(kind == _ODD).tolist():
        content = text(int(starts[line]), int(stops[line])).strip()
        stripped[line] = content
        if not content:
            kind[line] = _EMPTY
        elif content[0] == "#" or content.startswith("//"):
            kind[line] = _COMMENT
        elif content.startswith("sfen "):
            kind[line] = -_SFEN      # an sfen line for parse_sfen
        else:
            kind[line] = -_MOVE      # a move line for move_fields

    # -- positions
    position_line = np.flatnonzero((kind == _SFEN) | (kind == -_SFEN))
    n_positions = len(position_line)
    fast_position = np.zeros(n_positions, dtype=bool)
    sfen_start = np.zeros(n_positions, dtype=np.int64)
    sfen_stop = np.zeros(n_positions, dtype=np.int64)
    ply = np.zeros(n_positions, dtype=np.int64)
    fast_rows = np.flatnonzero(kind[position_line] == _SFEN)
    if len(fast_rows):
        ok, board_start, hands_stop, plies = _screen_positions(
            text_bytes, data, stops, position_line[fast_rows], spaces, first_space,
            space_count)
        fast_position[fast_rows] = ok
        sfen_start[fast_rows] = board_start
        sfen_stop[fast_rows] = hands_stop
        ply[fast_rows] = plies
    # each line's position: the last sfen line before it (-1: none)
    owner_line = np.where((kind == _SFEN) | (kind == -_SFEN), np.arange(n_lines), -1)
    owner_line = np.maximum.accumulate(owner_line) if n_lines else owner_line
    owner = np.searchsorted(position_line, owner_line)   # its index, where there is one

    # -- moves
    move_lines = np.flatnonzero(kind == _MOVE)
    fast, rejected = _bulk_moves(data, starts, stops, move_lines, spaces, first_space,
                                 space_count)
    fast_owner = owner[fast.line]
    orphan = owner_line[fast.line] < 0
    if orphan.any():   # before any sfen line: the line reader reports them
        rejected = np.concatenate([rejected, fast.line[orphan]])
        keep = ~orphan
        fast = _MoveColumns(*(getattr(fast, f)[keep] for f in _MoveColumns.__dataclass_fields__))
        fast_owner = fast_owner[keep]
    for line in rejected.tolist():
        stripped[line] = text(int(starts[line]), int(stops[line])).strip()
        kind[line] = -_MOVE
    move_start = np.searchsorted(fast_owner, np.arange(n_positions + 1))

    # -- one board per position
    board = cshogi.Board()
    set_sfen, legal = board.set_sfen, board.is_legal
    push, pop, from16, zobrist_hash = board.push, board.pop, board.move_from_move16, \
        board.zobrist_hash
    book_key = board.book_key
    valid_list = [False] * n_positions
    zobrist_list = [0] * n_positions
    key_list = [0] * n_positions
    turn_list = [0] * n_positions
    sfens: list[str] = [""] * n_positions
    problems: list[tuple[int, str]] = []
    skips: list[tuple[str, int]] = []     # (kind, line) of the entries skipped one by one
    moves16 = fast.move.tolist()
    ponders16 = fast.ponder.tolist()
    move32 = [0] * len(moves16)
    ponder32 = [0] * len(moves16)
    bounds = move_start.tolist()
    screened = fast_position.tolist()
    lines_of = position_line.tolist()
    sfen_starts, sfen_stops = sfen_start.tolist(), sfen_stop.tolist()
    for index in range(n_positions):
        line = lines_of[index]
        normal = None
        if screened[index]:
            normal = (ascii_text[sfen_starts[index]:sfen_stops[index]]
                      if ascii_text is not None else
                      text(sfen_starts[index], sfen_stops[index]))
            set_sfen(normal)
        else:
            try:
                parsed = parse_sfen(stripped.get(line, text(int(starts[line]),
                                                            int(stops[line])).strip())[5:],
                                    board)
            except InvalidPosition as error:
                problems.append((line, f"invalid position: {error}; its moves are skipped"))
                skips.append(("positions", line))
                continue
            normal = parsed.sfen
            ply[index] = parsed.ply or 0
        valid_list[index] = True
        sfens[index] = normal
        zobrist_list[index] = zobrist_hash()
        key_list[index] = book_key()
        turn_list[index] = board.turn
        for j in range(bounds[index], bounds[index + 1]):
            move = from16(moves16[j])
            if legal(move):
                move32[j] = move
                reply = ponders16[j]
                if reply:
                    push(move)
                    reply = from16(reply)
                    if legal(reply):
                        ponder32[j] = reply
                    pop()

    valid = np.array(valid_list, dtype=bool)
    zobrist = np.array(zobrist_list, dtype=np.uint64)
    keys = np.array(key_list, dtype=np.uint64)
    turn = np.array(turn_list, dtype=np.int8)

    # -- the rules is_legal leaves out, in bulk; the moves that fail them are read again
    black = turn[fast_owner] == cshogi.BLACK
    legal32 = np.array(move32, dtype=np.int64)
    move_ok = (legal32 != 0) & move_rules_hold(fast.move, legal32, black)
    reply32 = np.array(ponder32, dtype=np.int64)
    ponder_ok = (fast.ponder == 0) | ((reply32 != 0)
                                      & move_rules_hold(fast.ponder, reply32, ~black))
    owned = valid[fast_owner]
    accepted = owned & move_ok & ponder_ok
    for line in fast.line[owned & ~accepted].tolist():
        stripped[line] = text(int(starts[line]), int(stops[line])).strip()
        kind[line] = -_MOVE
    silent = fast.line[~owned]

    # -- the lines the bulk path did not take, with the board of their position
    slow_lines = np.flatnonzero(kind == -_MOVE)
    slow: list[tuple[int, int, MoveFields]] = []
    current = -1
    for line in slow_lines.tolist():
        content = stripped[line]
        if owner_line[line] < 0:
            problems.append((line, f"move line before any sfen line: {content!r}"))
            skips.append(("moves", line))
            continue
        index = int(owner[line])
        if not valid[index]:
            skips.append(("moves", line))
            continue
        if index != current:
            set_sfen(sfens[index] + " 1")
            current = index
        try:
            slow.append((line, index, move_fields(board, content)))
        except ValueError as error:
            problems.append((line, str(error)))
            skips.append(("moves", line))

    # -- the moves in file order
    take = np.flatnonzero(accepted)
    move_line = np.concatenate([fast.line[take], np.array([s[0] for s in slow], np.int64)])
    move_owner = np.concatenate([fast_owner[take], np.array([s[1] for s in slow], np.int64)])
    fields = np.array([s[2] for s in slow], dtype=np.int64).reshape(-1, 5)
    order = np.argsort(move_line, kind="stable")
    position_index = np.cumsum(valid) - 1

    def column(fast_column: np.ndarray, slow_column: np.ndarray, dtype: type) -> np.ndarray:
        return np.concatenate([fast_column[take].astype(dtype), slow_column.astype(dtype)]
                              )[order]

    kept = np.flatnonzero(valid)
    problems.sort()
    # the kinds counted in the order the line reader meets them
    skipped: Counter[str] = Counter(kind for kind, _line in skips)
    skipped["moves"] += len(silent)
    first_skip = {kind: line for kind, line in sorted(skips, key=lambda s: -s[1])}
    if len(silent):
        first_skip["moves"] = min(first_skip.get("moves", n_lines), int(silent[0]))
    skipped = Counter({kind: skipped[kind]
                       for kind in sorted(first_skip, key=first_skip.__getitem__)})
    return Db2016Block(
        sfen=PackedStrings.of(sfens[i] for i in kept.tolist()), ply=ply[kept],
        zobrist=zobrist[kept],
        book_key=keys[kept],
        turn=turn[kept],
        position=position_index[move_owner[order]].astype(np.int32),
        move=column(fast.move, fields[:, 0], np.uint16),
        ponder=column(fast.ponder, fields[:, 1], np.uint16),
        value=column(fast.value, fields[:, 2], np.int64),
        depth=column(fast.depth, fields[:, 3], np.int64),
        count=column(fast.count, fields[:, 4], np.int64),
        problems=[(first_line + line, reason) for line, reason in problems],
        skipped=skipped, size=size)


def _chunks(path: Path, chunk_bytes: int) -> Iterator[tuple[str, int, bytes, int]]:
    """(source, first line number, text, bytes of the file it came from), cut before
    ``sfen`` lines; the text is :func:`text_blocks`'."""
    line = 1
    carry = b""
    size = 0
    for block, block_size in text_blocks(path, chunk_bytes):
        size += block_size
        data = carry + block
        cut = data.rfind(b"\nsfen ")
        if cut <= 0:
            carry = data
            continue
        piece, carry = data[:cut + 1], data[cut + 1:]
        yield str(path), line, piece, size
        size = 0
        line += piece.count(b"\n")
    if carry or size:
        yield str(path), line, carry, size


def read_db2016(path: Path, diagnostics: Diagnostics, *, workers: int = 1,
                on_bytes: Callable[[int], object] | None = None,
                chunk_bytes: int | None = None) -> Iterator[Db2016Block]:
    """The positions and moves of a DB2016 file, piece by piece in file order; problems
    go to ``diagnostics`` (in file order, as each piece is taken). Files of
    :data:`PARALLEL_MIN_BYTES` or more are read on ``workers`` forked processes.
    ``on_bytes`` is called with the bytes of the file each piece came from."""
    source = str(path)
    chunks = _chunks(path, chunk_bytes or CHUNK_BYTES)
    large = path.stat().st_size >= PARALLEL_MIN_BYTES
    for block in fork_map(parse_chunk, chunks, workers if large else 1):
        for line, reason in block.problems:
            diagnostics.report(source, line, reason, skipped=0)
        diagnostics.skipped.update(block.skipped)
        if on_bytes is not None and block.size:
            on_bytes(block.size)
        yield block


# -- writing ----------------------------------------------------------------------------------


def _field(value: int | None) -> str:
    return "none" if value is None else str(value)


def format_block(sfen: str, ply: int | None, moves: Iterable[BookMove]) -> str:
    lines = [f"sfen {sfen} {ply if ply is not None else 0}"]
    for move, ponder, value, depth, count in moves:
        lines.append(f"{move} {ponder or 'none'} {_field(value)} {_field(depth)} {count}")
    return "\n".join(lines) + "\n"


def write_db2016(out: TextIO, blocks: Iterable[tuple[str, int | None, list[BookMove]]],
                 noe: int | None = None) -> tuple[int, int]:
    """Write sorted blocks; ``noe`` adds a ``# NOE:n,SORTED`` line.

    Returns the numbers of positions and moves written.
    """
    out.write(HEADER + "\n")
    if noe is not None:
        out.write(f"# NOE:{noe},SORTED\n")
    positions = moves_written = 0
    for sfen, ply, moves in blocks:
        out.write(format_block(sfen, ply, moves))
        positions += 1
        moves_written += len(moves)
    return positions, moves_written


@cache
def _decimals() -> np.ndarray:
    """object [2 ** 17 + 1]: the decimal texts of -65536..65536."""
    return np.array([str(n) for n in range(-(1 << 16), (1 << 16) + 1)], dtype=object)


def _numbers(column: np.ndarray) -> list[str]:
    """Decimal texts (``none`` for :data:`NONE`) of an int64 column."""
    table = _decimals()
    index = column.astype(np.int64) + (1 << 16)
    inside = (index >= 0) & (index < len(table))
    text = table[np.where(inside, index, 0)]
    if not inside.all():
        outside = np.flatnonzero(~inside)
        text[outside] = [("none" if n == NONE else str(n)) for n in column[outside].tolist()]
    return text.tolist()


def format_columns(sfens: Sequence[str], ply: np.ndarray, indptr: np.ndarray,
                   move: np.ndarray, ponder: np.ndarray, value: np.ndarray,
                   depth: np.ndarray, count: np.ndarray) -> bytes:
    """The blocks of positions ``sfens`` as :func:`write_db2016` writes them, from
    columns: ``ply`` (0: none); the moves of position ``i`` are ``indptr[i]:indptr[i +
    1]`` of ``move`` and ``ponder`` (``move16``, 0: none), ``value`` and ``depth``
    (:data:`NONE`: none) and ``count``, in the order written."""
    first = int(indptr[0])
    names = _names_or_none()
    lines = list(map(" ".join, zip(names[move].tolist(), names[ponder].tolist(),
                                   _numbers(value), _numbers(depth), _numbers(count))))
    heads = [f"sfen {sfen} {ply}" for sfen, ply in zip(sfens, ply.tolist())]
    text = np.empty(len(heads) + len(lines), dtype=object)
    at_head = indptr[:-1] - first + np.arange(len(heads))
    is_head = np.zeros(len(text), dtype=bool)
    is_head[at_head] = True
    text[at_head] = heads
    text[~is_head] = lines
    return ("\n".join(text.tolist()) + "\n").encode()


@cache
def _names_or_none() -> np.ndarray:
    names = usi_names().copy()
    names[0] = "none"
    return names


def write_db2016_header(out: BinaryIO, noe: int | None = None) -> None:
    """The first line of a DB2016 file and, with ``noe``, a ``# NOE:n,SORTED`` line
    (then :func:`format_columns`' blocks)."""
    out.write((HEADER + "\n").encode())
    if noe is not None:
        out.write(f"# NOE:{noe},SORTED\n".encode())
