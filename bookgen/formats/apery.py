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
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError
from bookgen.formats.move16 import is_move16
from bookgen.formats.sink import BookSink
from bookgen.position import STARTPOS_SFEN, signed64
from bookgen.store import BookMove

APERY_COUNT_MAX = 65535
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


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


def read_apery(path: Path, sink: BookSink, diagnostics: Diagnostics,
               roots: Iterable[cshogi.Board] = (), max_gap: int = 1) -> AperyReadSummary:
    """Walk the book from the initial position and ``roots`` into ``sink``."""
    records = load_records(path)
    summary = AperyReadSummary(records=len(records))
    order = np.argsort(records["key"], kind="stable")
    records = records[order]
    keys, starts, counts = np.unique(records["key"], return_index=True, return_counts=True)
    index = {int(k): (int(s), int(s + c)) for k, s, c in zip(keys, starts, counts)}
    summary.keys = len(index)
    consumed: set[int] = set()
    # Plain lists: indexing numpy records one by one is many times slower.
    move16s = (records["fromToPro"].astype(np.int64) & 0xFFFF).tolist()
    encodes_a_move = is_move16(records["fromToPro"]).tolist()   # checked before cshogi
    record_counts = records["count"].tolist()
    scores = records["score"].tolist()

    root_boards = [cshogi.Board(STARTPOS_SFEN + " 1"), *roots]
    queue: deque[tuple[str, int]] = deque()
    seen: set[str] = set()

    def enqueue(board: cshogi.Board, ply: int) -> None:
        sfen = board.sfen().rsplit(" ", 1)[0]
        if sfen not in seen:
            seen.add(sfen)
            queue.append((sfen, ply))

    for root in root_boards:
        enqueue(root, root.move_number)

    board = cshogi.Board()
    source = str(path)
    while queue:
        sfen, ply = queue.popleft()
        board.set_sfen(f"{sfen} {ply}")
        key = board.book_key()
        legal = list(board.legal_moves)
        span = index.get(key)
        book_moves: set[int] = set()
        if span is not None:
            consumed.add(key)
            local = sink.add_position(sfen, signed64(board.zobrist_hash()), ply, board.turn)
            summary.positions += 1
            legal_set = set(legal)
            for record in range(span[0], span[1]):
                move = board.move_from_move16(move16s[record]) if encodes_a_move[record] else 0
                if move not in legal_set:
                    summary.invalid_records += 1
                    diagnostics.report(
                        source, None,
                        f"record {int(order[record])} (key {key:#018x}, position "
                        f"'sfen {sfen} {ply}'): move16 {move16s[record]:#06x} is not legal there",
                        kind="moves")
                    continue
                book_moves.add(move)
                sink.add_move(local, cshogi.move_to_usi(move), None, scores[record], 0,
                              record_counts[record])
        # Only roots can be outside the book here; they are looked through like gaps.
        look_through = max_gap > 0
        for move in legal:
            child_key = board.book_key_after(key, move)
            if child_key in index:
                board.push(move)
                enqueue(board, ply + 1)
                board.pop()
            elif look_through and (move in book_moves or span is None):
                board.push(move)
                for reply in board.legal_moves:
                    if board.book_key_after(child_key, reply) in index:
                        board.push(reply)
                        before = len(seen)
                        enqueue(board, ply + 2)
                        summary.gap_positions += len(seen) - before
                        board.pop()
                board.pop()
    summary.keys_reached = len(consumed)
    summary.records_unreached = int(sum(index[k][1] - index[k][0]
                                        for k in index if k not in consumed))
    return summary


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
