"""Legal moves between given positions, without a Python loop per legal move.

:func:`find_legal_edges` takes positions as sfens without a move number (as
the book stores them) and finds every legal move of a position whose child is
one of the positions: its *legal edges*. Python loops per *position*, never
per legal move, in two passes: the positions' book keys (``set_sfen``,
cshogi's Apery book key), then, once the keys are indexed, each position's
legal moves as 32-bit moves into an array; numpy does the rest:

- The child's book key of a legal move ``m`` is ``c0 ^ D(m0) ^ D(m)``, where
  ``c0`` is cshogi's ``book_key_after`` of the first legal move ``m0`` and
  ``D`` the board part of a move's key change (the moved piece leaves its
  square, the piece after the move arrives, a captured piece leaves). The
  Apery book key hashes the board, the hand of the side to move and the side
  to move; the child's side to move is the opponent, whose hand no move
  changes, so ``c0 ^ D(m0)`` is the same for every move of a position. ``D``
  is two table gathers indexed by bits of the move (``_KeyTables``); the
  tables come from cshogi's own piece keys, read back through
  ``Board.set_pieces`` and ``Board.book_key``.
- The child keys are looked up among the positions' keys (a bitset on the
  top bits drops most of them, a bucket table finds the rest).

:func:`legal_child_keys` is the first half on its own: every legal move of
given positions (sfens, each after moves played from it) with its child's book
key, for callers that look the children up elsewhere (the Apery reader walks
a file of keys with it); :func:`find_legal_edges` runs it per chunk.
:class:`KeyIndex` is the lookup.

Exactness. The book key leaves out the hand of the side not to move, so
positions with the same board, side to move and hand of the side to move
share a key even when the other hand differs, which happens where books of
different material meet (a handicap book merged with even ones). So a key
hit counts only when the target's other hand is the mover's hand after the
move (the source's, plus a captured piece, less a dropped one; the hands
read from the sfens in numpy, :func:`hands`): the key and that hand
together are the whole position. A target whose key several given positions
share is confirmed by playing the move and comparing sfens. What remains is
a chance collision of 64-bit keys: a legal move's child that is not one of
the positions but has the key and the other hand of one that is; with random
keys about ``legal moves * positions / 2**64`` false edges are expected
(2e-6 at 34 M legal moves of 1 M positions).

The method rests on cshogi's book key and its move layout (bits 0-6 the
destination, 7-13 the origin or 80 + the dropped piece type, 14 promotion,
16-19 the moved piece type, 20-23 the captured piece type). Before the first
use in a process (:func:`check_book_keys`, cached), the child keys of every
board move and every eighth drop of 1,000 positions of random games (drops,
promotions, captures of promoted pieces, both sides) are compared with the
book key of the child after ``push``, and the hands after the moves played
with the hands of the next positions; any difference raises a one-line
:class:`bookgen.errors.BookgenError` naming cshogi's version, so a cshogi
release that changes either never loses edges silently.

Large inputs run on forked worker processes
(:func:`bookgen.workers.forked.fork_map`), both passes in chunks of
positions. Memory: 8 bytes of key and 16 of hands per position, the key
index (about 20 bytes a position) and the edges; a chunk's legal moves (4
bytes each) live only while its pass runs.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from itertools import repeat
from typing import Any

import cshogi
import numpy as np

from bookgen.errors import BookgenError
from bookgen.workers.forked import fork_map

__all__ = ["ChildKeys", "KeyIndex", "LegalEdges", "check_book_keys", "find_legal_edges",
           "hands", "legal_child_keys", "move16_usi", "mover_hand_after"]

_U64 = np.uint64
_U32 = np.uint32
_CHUNK = 2048                  # positions per task
_PARALLEL_MIN_POSITIONS = 20_000  # fewer: not worth starting worker processes
_USI_WIDTH = 5                 # '7g7f+', 'P*5e'
_CHECK_POSITIONS = 1000        # positions of the start-up check
_CHECK_DROP_STRIDE = 8         # of their drops, every eighth is checked


@dataclass(frozen=True)
class LegalEdges:
    """The legal moves between the positions: edge ``e`` is the legal move
    ``move16[e]`` (cshogi's 16-bit move) of position ``source[e]`` into position
    ``target[e]`` (indices into the sfens given), ordered by source, then in
    cshogi's order of legal moves; per position whether the side to move is in
    check and how many legal moves it has."""

    source: np.ndarray       # int32 [E]
    target: np.ndarray       # int32 [E]
    move16: np.ndarray       # uint16 [E]
    in_check: np.ndarray     # bool [N]
    legal_moves: np.ndarray  # int32 [N]

    def __len__(self) -> int:
        return len(self.source)

    def usi(self) -> np.ndarray:
        """The edges' moves as USI (``S5`` bytes)."""
        return move16_usi(self.move16)


# -- the move16 -> USI table -------------------------------------------------------


@cache
def _usi_table() -> np.ndarray:
    """USI (S5) by move16: every board move (with and without promotion) and drop;
    other entries empty."""
    table = np.zeros(1 << 16, dtype=f"S{_USI_WIDTH}")
    codes = [to | (origin << 7) | (promote << 14)
             for origin in range(81) for to in range(81) if origin != to
             for promote in (0, 1)]
    codes += [to | ((80 + piece) << 7) for piece in range(1, 8) for to in range(81)]
    table[codes] = [cshogi.move_to_usi(code).encode() for code in codes]
    return table


def move16_usi(move16: np.ndarray) -> np.ndarray:
    """cshogi 16-bit moves as USI (``S5`` bytes), vectorised through a table built
    once with ``cshogi.move_to_usi``."""
    return _usi_table()[np.asarray(move16, dtype=np.uint16)]


# -- hands ---------------------------------------------------------------------------

# Hands packed a byte per piece type, in the sfen's order: P L N S G B R.
_HAND_LETTER = np.full(256, 255, dtype=np.uint8)   # 0-6 black's, 8-14 white's
for _kind, _letter in enumerate("PLNSGBR"):
    _HAND_LETTER[ord(_letter)] = _kind
    _HAND_LETTER[ord(_letter.lower())] = 8 + _kind
_DIGIT = np.full(256, -1, dtype=np.int64)
_DIGIT[ord("0"):ord("9") + 1] = np.arange(10)
# cshogi piece type (promoted or not; a drop's type) -> its byte in a packed hand
_HAND_BYTE = np.array([0, 0, 1, 2, 3, 5, 6, 4, 0, 0, 1, 2, 3, 5, 6, 0], dtype=np.uint64)


def hands(sfens: Sequence[str]) -> np.ndarray:
    """uint64 [N, 2]: black's and white's hands of each sfen, a byte per piece type
    (pawn, lance, knight, silver, gold, bishop, rook: byte 0 to 6). Read from the
    sfens' hand fields in numpy."""
    n = len(sfens)
    out = np.zeros((n, 2), dtype=_U64)
    if not n:
        return out
    text = np.frombuffer(("\n".join(sfens) + "\n").encode("ascii"), dtype=np.uint8)
    breaks = np.flatnonzero(text <= 32)                      # spaces and newlines
    row_end = np.flatnonzero(text[breaks] == 10)             # each row's newline
    first = np.concatenate(([0], row_end[:-1] + 1))          # each row's first break
    if np.any(first + 2 > row_end):
        raise ValueError("an sfen without a hand field")
    start = breaks[first + 1] + 1                            # the hand field
    length = breaks[first + 2] - start
    rows = np.flatnonzero(text[start] != ord("-"))
    if not len(rows):
        return out
    width = int(length[rows].max())
    cells = start[rows, None] + np.arange(width)
    inside = np.arange(width) < length[rows, None]
    window = np.where(inside, text[np.minimum(cells, len(text) - 1)], 0)
    letter = _HAND_LETTER[window]
    # A letter's count is the number before it (one or two digits), else one.
    ones = np.full(window.shape, -1, dtype=np.int64)
    tens = np.full(window.shape, -1, dtype=np.int64)
    ones[:, 1:] = _DIGIT[window[:, :-1]]
    tens[:, 2:] = _DIGIT[window[:, :-2]]
    count = np.where(ones < 0, 1, np.where(tens >= 0, 10 * tens, 0) + ones)
    is_letter = letter != 255
    shift = (letter & 7).astype(_U64) * _U64(8)
    value = np.where(is_letter, count.astype(_U64) << shift, _U64(0))
    white = letter >= 8
    out[rows, 0] = np.where(white, _U64(0), value).sum(axis=1, dtype=_U64)
    out[rows, 1] = np.where(white, value, _U64(0)).sum(axis=1, dtype=_U64)
    return out


def mover_hand_after(hands_before: np.ndarray, moves: np.ndarray) -> np.ndarray:
    """The mover's packed hand after 32-bit ``moves``: a captured piece's base type
    gained, a dropped piece lost."""
    captured = (moves >> _U32(20)) & _U32(0xF)
    origin = (moves >> _U32(7)) & _U32(0x7F)
    drop = origin >= 81
    gain = np.where(captured > 0, _U64(1) << (_HAND_BYTE[captured] * _U64(8)), _U64(0))
    lose = np.where(drop, _U64(1) << (_HAND_BYTE[np.where(drop, origin - 80, 0)] * _U64(8)),
                    _U64(0))
    return hands_before + gain - lose


# -- key tables ----------------------------------------------------------------------


def _piece_keys() -> np.ndarray:
    """cshogi's book-key piece table as uint64 [32 pieces, 128 squares] (squares
    >= 81 and empty pieces zero), read back through ``Board.book_key`` of boards
    with one piece."""
    board = cshogi.Board()
    no_hands: tuple[list[int], list[int]] = ([0] * 7, [0] * 7)
    board.set_pieces([0] * 81, no_hands)
    empty = board.book_key()
    keys = np.zeros((32, 128), dtype=_U64)
    squares = [0] * 81
    for piece in [*range(1, 15), *range(17, 31)]:
        for square in range(81):
            squares[square] = piece
            board.set_pieces(squares, no_hands)
            keys[piece, square] = board.book_key() ^ empty
            squares[square] = 0
    return keys


class _KeyTables:
    """The board part of a move's book-key change as two gathers:
    ``moved[turn | move & 0xFFFFF]`` (the moved piece leaves its origin, the piece
    after the move arrives; a drop's origin is 80 + its piece type) ^
    ``captured[turn | captured type | destination]``."""

    def __init__(self, piece_keys: np.ndarray) -> None:
        z = piece_keys
        pieces = np.arange(2)[:, None] * 16 + np.arange(16)[None, :]      # [turn, moved type]
        leave = z[pieces]                                                 # [2, 16, origin]
        arrive = z[np.minimum(pieces[:, :, None] + np.array([0, 8]), 31)]  # [2, 16, promo, to]
        # index bits: turn 20, moved type 16-19, (unused 15), promotion 14, origin 7-13, to 0-6
        moved = np.empty((2, 16, 2, 2, 128, 128), dtype=_U64)
        moved[...] = leave[:, :, None, None, :, None] ^ arrive[:, :, None, :, None, :]
        for turn in range(2):
            for piece in range(1, 8):        # drops: moved type 0, origin 80 + type
                moved[turn, 0, :, :, 80 + piece, :] = z[16 * turn + piece]
        self.moved = moved.reshape(-1)
        j = np.arange(1 << 12, dtype=np.int64)   # turn 11, captured type 7-10, to 0-6
        mover, captured, to = j >> 11, (j >> 7) & 0xF, j & 0x7F
        self.captured = z.reshape(-1)[((captured | ((1 - mover) << 4)) << 7) | to]

    def delta(self, moves: np.ndarray, turn: np.ndarray) -> np.ndarray:
        """Board part of the key change of 32-bit ``moves`` played by ``turn``."""
        t = turn.astype(_U32)
        moved = (moves & _U32(0xFFFFF)) | (t << _U32(20))
        captured = (((moves >> _U32(13)) & _U32(0x780)) | (moves & _U32(0x7F))
                    | (t << _U32(11)))
        return self.moved[moved] ^ self.captured[captured]


def _cshogi_version() -> str:
    try:
        return version("cshogi")
    except PackageNotFoundError:  # pragma: no cover - cshogi is a dependency
        return "unknown"


def _check_positions(count: int = _CHECK_POSITIONS, seed: int = 13
                     ) -> tuple[list[str], list[tuple[int, int]]]:
    """``count`` positions of random games from the initial position that capture
    when they can more often than not (pieces in hand, drops, promoted pieces
    captured, both sides), and the moves played between them: (index of the
    position before, 32-bit move) for each position but the first of a game."""
    rng = random.Random(seed)
    board = cshogi.Board()
    sfens: list[str] = []
    played: list[tuple[int, int]] = []
    while len(sfens) < count:
        board.reset()
        for ply in range(160):
            moves = list(board.legal_moves)
            if not moves or len(sfens) >= count:
                break
            captures = [m for m in moves if m >> 20 & 0xF]
            move = rng.choice(captures if captures and rng.random() < 0.7 else moves)
            board.push(move)
            if ply:
                played.append((len(sfens) - 1, move))
            sfens.append(board.sfen().rsplit(" ", 1)[0])
    return sfens, played


@cache
def check_book_keys() -> _KeyTables:
    """The key tables, checked once per process: the child keys of the legal moves
    of the start-up positions (every board move, every eighth drop) must equal
    cshogi's book key of the child after ``push``, and the hands after the moves
    played between them the hands of the positions they reach. Raises
    :class:`BookgenError` if cshogi's book key or move layout changed."""
    tables = _KeyTables(_piece_keys())
    sfens, played = _check_positions()
    part = _child_keys(tables, _collect_positions(sfens))
    computed = part.child_keys
    drop = (part.moves >> _U32(7) & _U32(0x7F)) >= 81
    checked = np.flatnonzero(~drop | (np.cumsum(drop) % _CHECK_DROP_STRIDE == 0))
    source = np.repeat(np.arange(len(sfens)), part.counts)[checked]
    board = cshogi.Board()
    set_sfen, push, pop, book_key = board.set_sfen, board.push, board.pop, board.book_key
    wrong = 0
    current = -1
    for position, move, key in zip(source.tolist(), part.moves[checked].tolist(),
                                   computed[checked].tolist()):
        if position != current:
            set_sfen(sfens[position])
            current = position
        push(move)
        wrong += book_key() != key
        pop()
    before, moves = (np.array(column, dtype=np.int64) for column in zip(*played))
    packed = hands(sfens)
    mover = part.turn[before]
    wrong += int(np.count_nonzero(
        mover_hand_after(packed[before, mover], moves.astype(_U32))
        != packed[before + 1, mover]))
    if wrong or not len(checked):
        raise BookgenError(
            f"cshogi {_cshogi_version()}: its book key or move layout is not the one legal "
            f"edges are computed for ({wrong} of {len(checked) + len(played)} child keys and "
            f"hands differ); install the cshogi version of bookgen's requirements")
    return tables


# -- per position --------------------------------------------------------------------


def _book_keys(sfens: Sequence[str]) -> np.ndarray:
    """cshogi's book key of each position."""
    board = cshogi.Board()
    set_sfen, book_key = board.set_sfen, board.book_key
    keys = array("Q")
    append = keys.append
    for sfen in sfens:
        set_sfen(sfen)
        append(book_key())
    return np.frombuffer(keys, dtype=_U64)


@dataclass(frozen=True)
class ChildKeys:
    """The legal moves of positions and the book keys of their children: legal move
    ``moves[e]`` (cshogi's 32-bit move) of position ``source[e]`` leads to a position
    whose book key is ``child_keys[e]``; ordered by position, then in cshogi's order
    of legal moves. Per position: its book key, side to move, whether it is in
    check, its number of legal moves and, when asked for, its zobrist hash (cshogi's
    ``zobrist_hash``) and sfen without a move number."""

    keys: np.ndarray         # uint64 [N]
    turn: np.ndarray         # uint8 [N]
    in_check: np.ndarray     # bool [N]
    counts: np.ndarray       # int32 [N] legal moves
    moves: np.ndarray        # uint32 [E] 32-bit legal moves
    child_keys: np.ndarray   # uint64 [E]
    zobrist: np.ndarray | None = None   # uint64 [N]
    sfens: list[str] | None = None

    def __len__(self) -> int:
        return len(self.moves)

    @property
    def source(self) -> np.ndarray:
        """int32 [E]: the position of each legal move."""
        return np.repeat(np.arange(len(self.counts), dtype=np.int32), self.counts)

    @property
    def move16(self) -> np.ndarray:
        """uint16 [E]: the legal moves as cshogi's 16-bit moves."""
        return (self.moves & _U32(0xFFFF)).astype(np.uint16)


def _collect_positions(sfens: Sequence[str], keys: np.ndarray | None = None,
                       played: Sequence[Sequence[int]] | None = None, zobrist: bool = False,
                       sfen: bool = False) -> ChildKeys:
    """The legal moves of positions ``sfens`` (each after the moves ``played``), their
    book keys (``keys`` when given), ``book_key_after`` of each one's first legal
    move in ``child_keys[first move]`` (the position's own key if it has none: the
    other child keys are left zero, :func:`_child_keys` fills them in), and when
    asked for their zobrist hashes and sfens. Consecutive equal sfens are set once."""
    board = cshogi.Board()
    set_sfen, is_check, after, book_key = (board.set_sfen, board.is_check,
                                           board.book_key_after, board.book_key)
    push, pop, zobrist_hash, board_sfen = board.push, board.pop, board.zobrist_hash, board.sfen
    n = len(sfens)
    own = array("Q")
    bases = array("Q")
    turn = bytearray(n)
    checks = bytearray(n)
    ends = array("q")
    moves = array("I")
    hashes = array("Q")
    texts: list[str] = []
    extend, end, base, key_of = moves.extend, ends.append, bases.append, own.append
    hash_of, text_of = hashes.append, texts.append
    current = None
    for i, text, path, key in zip(range(n), sfens, played if played is not None else repeat(()),
                                  keys.tolist() if keys is not None else repeat(None)):
        if text is not current:
            set_sfen(text)
            current = text
        for move in path:
            push(move)
        if key is None:
            key = book_key()
            key_of(key)
        before = len(moves)
        extend(board.legal_moves)
        end(len(moves))
        base(after(key, moves[before]) if len(moves) > before else key)
        turn[i] = board.turn
        checks[i] = is_check()
        if zobrist:
            hash_of(zobrist_hash())
        if sfen:
            text_of(board_sfen().rsplit(" ", 1)[0])
        for _ in path:
            pop()
    counts = np.diff(np.frombuffer(ends, dtype=np.int64), prepend=0).astype(np.int32)
    return ChildKeys(np.frombuffer(own, dtype=_U64) if keys is None else keys,
                     np.frombuffer(turn, dtype=np.uint8),
                     np.frombuffer(checks, dtype=np.uint8).astype(bool), counts,
                     np.frombuffer(moves, dtype=_U32), np.frombuffer(bases, dtype=_U64),
                     np.frombuffer(hashes, dtype=_U64) if zobrist else None,
                     texts if sfen else None)


def _child_keys(tables: _KeyTables, part: ChildKeys) -> ChildKeys:
    """``part`` (from :func:`_collect_positions`) with the book key of the child of
    every legal move, in move order."""
    starts = np.cumsum(part.counts) - part.counts
    has = part.counts > 0
    base = part.child_keys.copy()     # book_key_after of the first moves, per position
    base[has] ^= tables.delta(part.moves[starts[has]], part.turn[has])
    children = (np.repeat(base, part.counts)
                ^ tables.delta(part.moves, np.repeat(part.turn, part.counts)))
    return replace(part, child_keys=children)


def legal_child_keys(sfens: Sequence[str], keys: np.ndarray | None = None, *,
                     played: Sequence[Sequence[int]] | None = None, zobrist: bool = False,
                     sfen: bool = False) -> ChildKeys:
    """Every legal move of each position and its child's book key (see the module
    docstring), one Python step per position. The positions are ``sfens`` (without
    a move number), each after the 32-bit moves ``played[i]`` when given (siblings
    that share an sfen object set it once); ``keys``: their book keys when the
    caller has them. ``zobrist``, ``sfen``: also give each position's zobrist hash
    and sfen. Raises :class:`BookgenError` if cshogi's book key is not the one
    expected (:func:`check_book_keys`)."""
    return _child_keys(check_book_keys(), _collect_positions(sfens, keys, played, zobrist,
                                                             sfen))


# -- lookup --------------------------------------------------------------------------


class KeyIndex:
    """Book keys (the positions', a file's) sorted, with a bitset on the top ``fbits`` bits (most
    child keys are not positions' keys: a few percent pass it) and a bucket table on
    the top ``bbits`` bits (about one key a bucket) giving the sorted slots to
    compare, in vectorised rounds. Keys several positions share are runs of slots."""

    def __init__(self, keys: np.ndarray) -> None:
        size = max(len(keys), 1)
        bits = int(np.ceil(np.log2(size)))
        self.fbits = max(16, bits + 4)
        self.bbits = max(12, bits)
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]
        top = (self.sorted >> _U64(64 - self.fbits)).astype(np.int64)
        present = np.zeros(1 << self.fbits, dtype=bool)
        present[top] = True
        self.bitset = np.packbits(present, bitorder="little")
        del present, top
        bucket = (self.sorted >> _U64(64 - self.bbits)).astype(np.int64)
        self.start = np.searchsorted(bucket, np.arange((1 << self.bbits) + 1)
                                     ).astype(np.int32)
        # Keys that several positions have (their hits are confirmed by sfen).
        shared = np.flatnonzero(self.sorted[1:] == self.sorted[:-1])
        self.shared_keys = np.unique(self.sorted[shared])

    def lookup(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which wanted keys are positions' keys, the first sorted slot of each)."""
        if not len(self.sorted):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        top = wanted >> _U64(64 - self.fbits)
        candidate = np.flatnonzero(
            (self.bitset[top >> _U64(3)] >> (top & _U64(7)).astype(np.uint8)) & 1)
        w = wanted[candidate]
        bucket = (w >> _U64(64 - self.bbits)).astype(np.int64)
        slot = self.start[bucket].astype(np.int64)
        stop = self.start[bucket + 1]
        active = np.arange(len(w))
        found_i, found_slot = [active[:0]], [slot[:0]]
        while len(active):
            inside = slot < stop
            active, slot, stop = active[inside], slot[inside], stop[inside]
            equal = self.sorted[slot] == w[active]
            found_i.append(active[equal])
            found_slot.append(slot[equal])
            active, slot, stop = active[~equal], slot[~equal] + 1, stop[~equal]
        i = np.concatenate(found_i)
        at = np.concatenate(found_slot)
        order = np.argsort(i, kind="stable")
        return candidate[i[order]], at[order]

    def positions(self, slot: int) -> np.ndarray:
        """The positions whose key is the one at ``slot``."""
        key = self.sorted[slot]
        return self.order[slot:int(np.searchsorted(self.sorted, key, side="right"))]


# -- the two passes, per chunk (in worker processes for large inputs) ---------------

_state: dict[str, Any] = {}   # what the chunk functions read; forked workers inherit it


def _keys_chunk(span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Pass 1: the book keys (unless given) and hands of positions ``start:stop``."""
    sfens = _state["sfens"][span[0]:span[1]]
    given = _state.get("given")
    return (_book_keys(sfens) if given is None else given[span[0]:span[1]]), hands(sfens)


def _edges_chunk(span: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Pass 2: the legal edges of positions ``start:stop`` (source, target, move16),
    whether each is in check and its number of legal moves."""
    first, stop = span
    index: KeyIndex = _state["index"]
    all_hands: np.ndarray = _state["hands"]
    part = legal_child_keys(_state["sfens"][first:stop], _state["keys"][first:stop])
    moves = part.moves
    hit, slot = index.lookup(part.child_keys)
    local = np.repeat(np.arange(stop - first, dtype=np.int32), part.counts)[hit]
    target = index.order[slot]
    # The key holds the board and the child's side to move's hand: the mover's hand
    # must be the target's other hand.
    mover = part.turn[local]
    mover_hand = mover_hand_after(all_hands[local + first, mover], moves[hit])
    keep = all_hands[target, mover] == mover_hand
    shared = np.isin(index.sorted[slot], index.shared_keys)
    if shared.any():     # several positions have the key: confirm by the child's sfen
        keep &= ~shared
        confirmed = _confirm(local[shared] + first, moves[hit[shared]], slot[shared],
                             mover[shared], mover_hand[shared])
        where = np.flatnonzero(shared)
        keep[where[confirmed >= 0]] = True
        target[where] = np.maximum(confirmed, 0)
    return (local[keep] + np.int32(first), target[keep].astype(np.int32),
            (moves[hit[keep]] & _U32(0xFFFF)).astype(np.uint16), part.in_check, part.counts)


def _confirm(sources: np.ndarray, moves: np.ndarray, slots: np.ndarray, movers: np.ndarray,
             mover_hands: np.ndarray) -> np.ndarray:
    """For moves whose child's key several positions share: the first position that
    is the child (the mover's hand, then the sfen), -1 if none."""
    sfens: Sequence[str] = _state["sfens"]
    all_hands: np.ndarray = _state["hands"]
    index: KeyIndex = _state["index"]
    board = cshogi.Board()
    found = np.full(len(sources), -1, dtype=np.int64)
    for i, (source, move, slot, mover, hand) in enumerate(zip(
            sources.tolist(), moves.tolist(), slots.tolist(), movers.tolist(),
            mover_hands.tolist())):
        candidates = [c for c in index.positions(slot).tolist()
                      if int(all_hands[c, mover]) == hand]
        if not candidates:
            continue
        board.set_sfen(sfens[source])
        board.push(move)
        child = board.sfen().rsplit(" ", 1)[0]
        for candidate in candidates:
            board.set_sfen(sfens[candidate])
            if board.sfen().rsplit(" ", 1)[0] == child:
                found[i] = candidate
                break
    return found


def find_legal_edges(sfens: Sequence[str], workers: int = 1,
                     keys: np.ndarray | None = None) -> LegalEdges:
    """Every legal move of each of ``sfens`` (positions without a move number) whose
    child is one of ``sfens``; see the module docstring. A position given twice is
    the target of edges at its first index only. With ``workers`` > 1 and many
    positions, the work runs on that many forked processes. ``keys``: cshogi's book
    keys of the positions, where the caller has them (a reader that set each board
    anyway), else they are computed. Raises :class:`BookgenError` if cshogi's book
    key is not the one expected (:func:`check_book_keys`)."""
    check_book_keys()
    n = len(sfens)
    spans = [(start, min(start + _CHUNK, n)) for start in range(0, n, _CHUNK)]
    workers = workers if n >= _PARALLEL_MIN_POSITIONS else 1
    _state.update(sfens=sfens, given=keys)
    try:
        keyed = list(fork_map(_keys_chunk, spans, workers, chunksize=4))
        keys = np.concatenate([k for k, _ in keyed]) if keyed else np.zeros(0, _U64)
        _state.update(keys=keys, index=KeyIndex(keys),
                      hands=np.concatenate([h for _, h in keyed]) if keyed
                      else np.zeros((0, 2), _U64))
        del keyed, keys
        found = list(fork_map(_edges_chunk, spans, workers, chunksize=4))
    finally:
        _state.clear()
    if not found:
        return LegalEdges(np.zeros(0, np.int32), np.zeros(0, np.int32),
                          np.zeros(0, np.uint16), np.zeros(0, dtype=bool),
                          np.zeros(0, dtype=np.int32))
    return LegalEdges(*(np.concatenate([f[i] for f in found]) for i in range(5)))
