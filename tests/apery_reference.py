"""The Apery reader as it was before the walk ran in numpy: a Python loop with
push, book_key_after and pop per legal move and a set of sfens. The oracle that
tests compare ``bookgen.formats.apery.read_apery`` with (same positions in the
same order, same moves, plies, problems and summary counts)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cshogi
import numpy as np

from bookgen.diagnostics import Diagnostics
from bookgen.formats.move16 import is_move16
from bookgen.position import STARTPOS_SFEN, signed64


def reference_read_apery(path: Path, sink: Any, diagnostics: Diagnostics,
                         roots: Iterable[cshogi.Board] = (), max_gap: int = 1
                         ) -> dict[str, int]:
    records = np.fromfile(path, dtype=cshogi.BookEntry)
    summary = {"records": len(records), "keys": 0, "keys_reached": 0,
               "records_unreached": 0, "positions": 0, "gap_positions": 0,
               "invalid_records": 0}
    order = np.argsort(records["key"], kind="stable")
    records = records[order]
    keys, starts, counts = np.unique(records["key"], return_index=True, return_counts=True)
    index = {int(k): (int(s), int(s + c)) for k, s, c in zip(keys, starts, counts)}
    summary["keys"] = len(index)
    consumed: set[int] = set()
    move16s = (records["fromToPro"].astype(np.int64) & 0xFFFF).tolist()
    encodes_a_move = is_move16(records["fromToPro"]).tolist()
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
            summary["positions"] += 1
            legal_set = set(legal)
            for record in range(span[0], span[1]):
                move = board.move_from_move16(move16s[record]) if encodes_a_move[record] else 0
                if move not in legal_set:
                    summary["invalid_records"] += 1
                    diagnostics.report(
                        source, None,
                        f"record {int(order[record])} (key {key:#018x}, position "
                        f"'sfen {sfen} {ply}'): move16 {move16s[record]:#06x} is not legal there",
                        kind="moves")
                    continue
                book_moves.add(move)
                sink.add_move(local, cshogi.move_to_usi(move), None, scores[record], 0,
                              record_counts[record])
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
                        summary["gap_positions"] += len(seen) - before
                        board.pop()
                board.pop()
    summary["keys_reached"] = len(consumed)
    summary["records_unreached"] = int(sum(index[k][1] - index[k][0]
                                           for k in index if k not in consumed))
    return summary


class ListSink:
    """Positions and moves in lists, in the order they arrive; ``add_rows`` as one
    ``add_position`` and ``add_move`` after another."""

    def __init__(self) -> None:
        self.positions: list[tuple[str, int, int | None, int]] = []
        self.moves: list[tuple[int, str, str | None, int | None, int | None, int]] = []

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        self.positions.append((sfen, zobrist, ply, turn))
        return len(self.positions) - 1

    def add_move(self, local: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        self.moves.append((local, move, ponder, value, depth, count))

    def add_rows(self, positions: list[tuple[Any, ...]], moves: list[tuple[Any, ...]],
                 mask: int = 0xFFFFFFFF) -> None:
        ids = [self.add_position(sfen, zobrist, ply, turn)
               for _local, sfen, zobrist, ply, turn in positions]
        for local, move, ponder, value, depth, count in moves:
            self.add_move(ids[local & mask], move, ponder, value, depth, count)
