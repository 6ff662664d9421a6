"""Apery / dlshogi binary books (``.bin``).

A flat array of 16-byte little-endian records sorted by key (cshogi's
``BookEntry`` dtype): ``u64 key, i16 fromToPro, u16 count, i32 score``. The key
is Apery's Zobrist key (``Board.book_key()``), which hashes only the hand of
the side to move, so it is used for this format alone. ``fromToPro`` is
cshogi's ``move16`` (checked: ``to | from << 7 | promote << 14``, drops with
``from = 81 + piece - 1``), the same encoding as Apery's.

The file holds keys, not positions, so reading walks from root positions over
all legal moves and follows children whose key is in the file; a child that
is not in the book but was reached by a book move is looked through, one ply
deep, for grandchildren that are (real Apery books have such gaps).

The walk is breadth first: a queue of positions, first in first out, each
taken once, at the ply of its first arrival; a position's children (and the
grandchildren across its gaps) join the queue in its order of legal moves.
It runs on chunks of the queue without a Python step per legal move: the book
keys of all children come from :func:`bookgen.store.legal_edges.legal_child_keys`,
their membership from the file's sorted keys, and only the children that are
new positions are played and written out. A position is known by its book key
and the hand of the side not to move, which the key leaves out (the mover's
hand after the move, from the parent's sfen in numpy): together they are the
whole position, so the walk keeps no set of sfens; what remains is a chance
collision of 64-bit keys between two positions with the same other hand.
A record's move is legal when its ``move16`` is a legal move's low 16 bits.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import cshogi
import numpy as np

from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError
from bookgen.formats.move16 import is_move16
from bookgen.formats.sink import RowSink
from bookgen.position import STARTPOS_SFEN
from bookgen.store import BookMove
from bookgen.store.legal_edges import (
    KeyIndex,
    check_book_keys,
    hands,
    legal_child_keys,
    move16_usi,
    mover_hand_after,
)
from bookgen.workers.forked import Feed, fork_map

APERY_COUNT_MAX = 65535
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_CHUNK = 4096                   # queue entries expanded together
_PARALLEL_MIN_RECORDS = 200_000  # fewer: not worth starting worker processes
_NO_HAND = np.uint64(2**64 - 1)
_U32 = np.uint32


@dataclass
class AperyReadSummary:
    records: int = 0
    keys: int = 0
    keys_reached: int = 0
    records_unreached: int = 0
    positions: int = 0
    gap_positions: int = 0
    invalid_records: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def load_records(path: Path) -> np.ndarray:
    size = path.stat().st_size
    if size % 16:
        raise BookgenError(f"{path}: size {size} is not a multiple of 16: not an Apery book")
    return np.fromfile(path, dtype=cshogi.BookEntry)


class _Records:
    """The file's records sorted by key (stably), and per distinct key its first
    record and number of records."""

    def __init__(self, records: np.ndarray) -> None:
        self.order = np.argsort(records["key"], kind="stable")
        records = records[self.order]
        self.keys, self.first, self.count = np.unique(records["key"], return_index=True,
                                                      return_counts=True)
        self.move16 = records["fromToPro"].astype(np.int64) & 0xFFFF
        self.encodes_a_move = is_move16(records["fromToPro"])    # checked before cshogi
        self.counts = records["count"]
        self.scores = records["score"]
        self.index = KeyIndex(self.keys)

    def slots(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether each of ``keys`` is in the file, its slot among the distinct keys
        where it is)."""
        hit, slot = self.index.lookup(keys)
        found = np.zeros(len(keys), dtype=bool)
        found[hit] = True
        slots = np.zeros(len(keys), dtype=np.int64)
        slots[hit] = slot
        return found, slots


class _Seen:
    """Positions taken into the queue, as (slot of the book key, hand of the side not
    to move): the first hand per slot in an array, further hands of a slot (books of
    different material) in a set."""

    def __init__(self, slots: int) -> None:
        self.hand = np.full(slots, _NO_HAND, dtype=np.uint64)
        self.more: set[tuple[int, int]] = set()

    def first_new(self, slot: np.ndarray, hand: np.ndarray) -> np.ndarray:
        """Which of the (slot, hand) pairs, in order, are new: not seen before nor
        earlier in the arrays; they count as seen from now on."""
        new = np.zeros(len(slot), dtype=bool)
        if not len(slot):
            return new
        first = _firsts(slot, hand)
        s, h = slot[first], hand[first]
        known = self.hand[s]
        fresh = np.flatnonzero(known == _NO_HAND)
        leaders = fresh[_firsts(s[fresh])]
        self.hand[s[leaders]] = h[leaders]
        is_new = np.zeros(len(first), dtype=bool)
        is_new[leaders] = True
        others = np.flatnonzero(~is_new & (known != h))    # a slot's further hands
        for i, pair_slot, pair_hand in zip(others.tolist(), s[others].tolist(),
                                           h[others].tolist()):
            if (pair_slot, pair_hand) not in self.more:
                self.more.add((pair_slot, pair_hand))
                is_new[i] = True
        new[first[is_new]] = True
        return new


def _firsts(*columns: np.ndarray) -> np.ndarray:
    """The indices of the first occurrence of each distinct row of ``columns``, in
    order."""
    order = np.lexsort((np.arange(len(columns[0])), *columns[::-1]))
    change = np.ones(len(order), dtype=bool)
    for column in columns:
        ordered = column[order]
        change[1:] &= ordered[1:] == ordered[:-1]
    change[1:] = ~change[1:]
    return np.sort(order[change])


@dataclass
class _Expanded:
    """One chunk of the queue expanded: its positions (sfen, zobrist hash, side to
    move, whether in the file and the slot of their key), the records of those in
    the file and whether each is legal there, and the children and grandchildren
    across gaps in the file, in the walk's order: from position ``source`` by
    ``move`` (then ``reply`` across a gap, else 0), their key's slot and the hand of
    the side not to move."""

    sfens: list[str]
    plies: list[int]
    zobrist: np.ndarray     # uint64 [n]
    turn: np.ndarray        # uint8 [n]
    in_file: np.ndarray     # bool [n]
    slot: np.ndarray        # int64 [n]
    records: np.ndarray     # int64 [r] sorted record indices of the positions in the file
    legal: np.ndarray       # bool [r]
    source: np.ndarray      # int64 [c]
    move: np.ndarray        # uint32 [c]
    reply: np.ndarray       # uint32 [c]
    child_slot: np.ndarray  # int64 [c]
    other_hand: np.ndarray  # uint64 [c]


_Entry = tuple[str, tuple[int, ...], int]   # queue entry: sfen, moves played from it, ply
_state: dict[str, Any] = {}   # what _expand_task reads; forked workers inherit it


def _expand_task(entries: list[_Entry]) -> _Expanded:
    """:func:`_expand` of queue entries with the walk's records and gap rule."""
    return _expand(_state["book"], entries, _state["max_gap"])


def _expand(book: _Records, entries: list[_Entry], max_gap: int) -> _Expanded:
    """Expand queue entries: the positions ``sfen`` after ``moves``."""
    bases, paths, plies = (list(column) for column in zip(*entries))
    part = legal_child_keys(bases, played=paths, zobrist=True, sfen=True)
    sfens = part.sfens
    assert sfens is not None and part.zobrist is not None
    in_file, slot = book.slots(part.keys)
    source = part.source.astype(np.int64)
    # the records of the positions in the file, and which are legal moves there
    held = np.flatnonzero(in_file)
    per = book.count[slot[held]]
    offsets = np.cumsum(per) - per
    records = (np.repeat(book.first[slot[held]] - offsets, per)
               + np.arange(int(per.sum()), dtype=np.int64))
    record_source = np.repeat(held, per)
    legal_code = source * 65536 + (part.moves & _U32(0xFFFF))
    record_code = record_source * 65536 + book.move16[records]
    legal = book.encodes_a_move[records] & _within(record_code, np.sort(legal_code))
    # children in the file; gaps under book moves (any move of a position outside it)
    hit, child_slot = book.slots(part.child_keys)
    hands_of = hands(sfens)
    mover = part.turn[source]
    direct = np.flatnonzero(hit)
    order_edge = [direct]
    order_reply = [np.zeros(len(direct), dtype=np.int64)]
    cand_source = [source[direct]]
    cand_move = [part.moves[direct]]
    cand_reply = [np.zeros(len(direct), dtype=_U32)]
    cand_slot = [child_slot[direct]]
    cand_hand = [mover_hand_after(hands_of[source[direct], mover[direct]], part.moves[direct])]
    if max_gap > 0:
        gap = ~hit & (~in_file[source] | _within(legal_code, np.sort(record_code[legal])))
        gaps = np.flatnonzero(gap)
        if len(gaps):
            across = legal_child_keys([sfens[i] for i in source[gaps].tolist()],
                                      part.child_keys[gaps],
                                      played=[(m,) for m in part.moves[gaps].tolist()])
            far_hit, far_slot = book.slots(across.child_keys)
            far = np.flatnonzero(far_hit)
            edge = gaps[across.source[far]]
            opponent = 1 - mover[edge]
            order_edge.append(edge)
            order_reply.append(far + 1)
            cand_source.append(source[edge])
            cand_move.append(part.moves[edge])
            cand_reply.append(across.moves[far])
            cand_slot.append(far_slot[far])
            cand_hand.append(mover_hand_after(hands_of[source[edge], opponent],
                                              across.moves[far]))
    walk = np.lexsort((np.concatenate(order_reply), np.concatenate(order_edge)))
    return _Expanded(sfens, plies, part.zobrist, part.turn, in_file, slot, records, legal,
                     np.concatenate(cand_source)[walk], np.concatenate(cand_move)[walk],
                     np.concatenate(cand_reply)[walk], np.concatenate(cand_slot)[walk],
                     np.concatenate(cand_hand)[walk])


def _within(values: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``sorted_values``."""
    if not len(sorted_values):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values


def read_apery(path: Path, sink: RowSink, diagnostics: Diagnostics,
               roots: Iterable[cshogi.Board] = (), max_gap: int = 1,
               workers: int = 1) -> AperyReadSummary:
    """Walk the book from the initial position and ``roots`` into ``sink``; on
    ``workers`` forked processes for large files."""
    book = _Records(load_records(path))
    summary = AperyReadSummary(records=len(book.order), keys=len(book.keys))
    seen = _Seen(len(book.keys))
    consumed = np.zeros(len(book.keys), dtype=bool)
    workers = workers if len(book.order) >= _PARALLEL_MIN_RECORDS else 1

    # The roots, each once (by sfen); those in the file are seen positions.
    root_sfens: list[str] = []
    root_plies: list[int] = []
    for root in [cshogi.Board(STARTPOS_SFEN + " 1"), *roots]:
        sfen = root.sfen().rsplit(" ", 1)[0]
        if sfen not in root_sfens:
            root_sfens.append(sfen)
            root_plies.append(root.move_number)
    root_boards = [cshogi.Board(f"{sfen} 1") for sfen in root_sfens]
    in_file, slot = book.slots(np.array([b.book_key() for b in root_boards], dtype=np.uint64))
    turn = np.array([b.turn for b in root_boards], dtype=np.int64)
    other = hands(root_sfens)[np.arange(len(root_sfens)), 1 - turn]
    seen.first_new(slot[in_file], other[in_file])

    check_book_keys()    # once, before workers fork
    feed: Feed[_Entry] = Feed(_CHUNK, workers)
    feed.put([(sfen, (), ply) for sfen, ply in zip(root_sfens, root_plies)])
    _state.update(book=book, max_gap=max_gap)
    chunks = fork_map(_expand_task, feed.tasks(), workers)
    try:
        for chunk in chunks:
            # the children that are new positions join the queue
            new = seen.first_new(chunk.child_slot, chunk.other_hand)
            sfens, plies = chunk.sfens, chunk.plies
            feed.put([(sfens[i], (m, r) if r else (m,), plies[i] + (2 if r else 1))
                      for i, m, r in zip(chunk.source[new].tolist(), chunk.move[new].tolist(),
                                         chunk.reply[new].tolist())])
            feed.answered()
            summary.gap_positions += int(np.count_nonzero(chunk.reply[new]))
            consumed[chunk.slot[chunk.in_file]] = True
            _write(book, chunk, sink, diagnostics, str(path), summary)
    finally:
        feed.close()
        chunks.close()
        _state.clear()
    summary.keys_reached = int(np.count_nonzero(consumed))
    summary.records_unreached = int(book.count[~consumed].sum())
    return summary


def _write(book: _Records, chunk: _Expanded, sink: RowSink, diagnostics: Diagnostics,
           source_name: str, summary: AperyReadSummary) -> None:
    """The chunk's positions in the file and their legal records, into ``sink``; the
    other records reported."""
    held = np.flatnonzero(chunk.in_file)
    sfens, plies = chunk.sfens, chunk.plies
    at = held.tolist()
    positions = list(zip(range(len(held)), [sfens[i] for i in at],
                         chunk.zobrist[held].view(np.int64).tolist(),
                         [plies[i] for i in at], chunk.turn[held].tolist()))
    records = chunk.records
    local = np.repeat(np.arange(len(held)), book.count[chunk.slot[held]])
    legal = chunk.legal
    kept = records[legal]
    moves = list(zip(local[legal].tolist(), move16_usi(book.move16[kept]).astype(str).tolist(),
                     repeat(None), book.scores[kept].tolist(), repeat(0),
                     book.counts[kept].tolist()))
    sink.add_rows(positions, moves)
    summary.positions += len(held)
    for index, position in zip(records[~legal].tolist(), held[local[~legal]].tolist()):
        summary.invalid_records += 1
        key = int(book.keys[chunk.slot[position]])
        diagnostics.report(
            source_name, None,
            f"record {int(book.order[index])} (key {key:#018x}, position "
            f"'sfen {sfens[position]} {plies[position]}'): move16 "
            f"{int(book.move16[index]):#06x} is not legal there", kind="moves")


def export_records(blocks: Iterable[tuple[str, int | None, list[BookMove]]],
                   diagnostics: Diagnostics | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """Book blocks as Apery records sorted by key (counts descending within a key)."""
    board = cshogi.Board()
    # Typed arrays: 16 bytes a move instead of a Python tuple each.
    keys, move16s, counts, scores = array("Q"), array("H"), array("H"), array("i")
    stats = {"positions": 0, "records": 0, "counts_scaled": 0, "scores_clamped": 0,
             "key_collisions": 0}
    key_owner: dict[int, str] = {}
    for sfen, _ply, moves in blocks:
        board.set_sfen(f"{sfen} 1")
        key = board.book_key()
        owner = key_owner.setdefault(key, sfen)
        if owner != sfen:
            stats["key_collisions"] += 1
            if diagnostics is not None:
                diagnostics.report("export", None,
                                   f"positions '{owner}' and '{sfen}' share Apery key "
                                   f"{key:#018x}; their records merge in the .bin file",
                                   kind="collisions", skipped=0)
        stats["positions"] += 1
        largest = max(m.count for m in moves)
        scale = APERY_COUNT_MAX / largest if largest > APERY_COUNT_MAX else 1.0
        if scale != 1.0:
            stats["counts_scaled"] += 1
        for move, _ponder, value, _depth, count in moves:
            score = value or 0
            if not _INT32_MIN <= score <= _INT32_MAX:
                score = max(_INT32_MIN, min(_INT32_MAX, score))
                stats["scores_clamped"] += 1
            keys.append(key)
            move16s.append(cshogi.move16(board.move_from_usi(move)))
            counts.append(count if scale == 1.0 else max(1, int(round(count * scale))))
            scores.append(score)
    records = np.zeros(len(keys), dtype=cshogi.BookEntry)
    records["key"] = np.frombuffer(keys, dtype=np.uint64)
    records["fromToPro"] = np.frombuffer(move16s, dtype=np.uint16).view(np.int16)
    records["count"] = np.frombuffer(counts, dtype=np.uint16)
    records["score"] = np.frombuffer(scores, dtype=np.int32)
    order = np.lexsort((-records["count"].astype(np.int64), records["key"]))
    stats["records"] = len(records)
    return records[order], stats
