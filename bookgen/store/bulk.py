"""Bulk writes: rows straight into the book, in the caller's transaction.

Imports go through :class:`BulkWriter`, merges through :func:`attach_source`
and :func:`merge_attached`; :data:`MOVE_UPSERT_SQL` and
:data:`PLY_UPSERT_SQL` are the merge rules that import and merge share.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from bookgen.signals import fault_point
from bookgen.store.book import Book
from bookgen.store.connection import readonly_uris
from bookgen.store.own_moves import own_rows_sql

__all__ = ["MOVE_UPSERT_SQL", "PLY_UPSERT_SQL", "BulkWriter", "attach_source", "merge_attached"]


# Merge rule shared by import and merge: an incoming move replaces the stored
# one only if it was searched deeper, or as deep with a greater count.
MOVE_UPSERT_SQL = """
    ON CONFLICT(position_id, move) DO UPDATE SET
        ponder = excluded.ponder, value = excluded.value, depth = excluded.depth,
        count = excluded.count, run_id = excluded.run_id
    WHERE coalesce(excluded.depth, -1) > coalesce(moves.depth, -1)
       OR (coalesce(excluded.depth, -1) = coalesce(moves.depth, -1)
           AND excluded.count > moves.count)
"""

PLY_UPSERT_SQL = """
    ON CONFLICT(sfen) DO UPDATE SET ply = CASE
        WHEN positions.ply IS NULL THEN excluded.ply
        WHEN excluded.ply IS NULL THEN positions.ply
        ELSE min(positions.ply, excluded.ply) END
"""


class BulkWriter:
    """Writes positions and moves straight into the book, in the caller's transaction.

    Used for imports: rows are buffered and written with ``executemany``;
    positions are matched by exact sfen (first within this load, then in the
    book), keep their minimum ply, and moves merge by the rule above. Call
    :meth:`finish` before committing; roll the transaction back to undo all.
    """

    BATCH = 50_000

    def __init__(self, book: Book, run_id: int) -> None:
        self.book = book
        self.conn = book.conn
        self.run_id = run_id
        self.book_was_empty = book.count_positions() == 0
        self.moves_before = book.count_moves()
        self.positions_before = book.count_positions()
        self.next_id = int(self.conn.execute(
            "SELECT coalesce(max(id), 0) + 1 FROM positions").fetchone()[0])
        self.ids: dict[str, int] = {}
        self._new_positions: list[tuple[Any, ...]] = []
        self._ply_updates: list[tuple[Any, ...]] = []
        self._moves: list[tuple[Any, ...]] = []
        self.move_changes = 0
        self.positions = 0   # position entries received
        self.moves = 0       # move entries received

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        self.positions += 1
        position_id = self.ids.get(sfen)
        if position_id is None and not self.book_was_empty:
            row = self.conn.execute("SELECT id FROM positions WHERE sfen = ?",
                                    (sfen,)).fetchone()
            if row is not None:
                position_id = self.ids[sfen] = row[0]
        if position_id is None:
            position_id = self.ids[sfen] = self.next_id
            self.next_id += 1
            self._new_positions.append((position_id, sfen, zobrist, ply, turn, self.run_id))
            if len(self._new_positions) >= self.BATCH:
                self.flush()
        elif ply is not None:
            self._ply_updates.append((ply, ply, position_id))
        return position_id

    def add_move(self, position_id: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        self.moves += 1
        self._moves.append((position_id, move, ponder, value, depth, count, self.run_id))
        if len(self._moves) >= self.BATCH:
            self.flush()

    def add_rows(self, positions: list[tuple[Any, ...]], moves: list[tuple[Any, ...]],
                 mask: int = 0xFFFFFFFF) -> None:
        """Rows from a parser process: positions ``(local, sfen, zobrist, ply, turn)``
        numbered ``base + i``, moves ``(local, move, ponder, value, depth, count)``."""
        add_position = self.add_position
        ids = [add_position(sfen, zobrist, ply, turn)
               for _local, sfen, zobrist, ply, turn in positions]
        run_id = self.run_id
        self._moves.extend((ids[local & mask], move, ponder, value, depth, count, run_id)
                           for local, move, ponder, value, depth, count in moves)
        self.moves += len(moves)
        if len(self._moves) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        if self._new_positions:
            self.conn.executemany(
                "INSERT INTO positions(id, sfen, zobrist, ply, turn, created_run) "
                "VALUES (?, ?, ?, ?, ?, ?)", self._new_positions)
            self._new_positions = []
            fault_point("import-positions-written")
        if self._ply_updates:
            self.conn.executemany(
                "UPDATE positions SET ply = min(coalesce(ply, ?), ?) WHERE id = ?",
                self._ply_updates)
            self._ply_updates = []
        if self._moves:
            before = self.conn.total_changes
            self.conn.executemany(
                "INSERT INTO moves(position_id, move, ponder, value, depth, count, run_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)" + MOVE_UPSERT_SQL, self._moves)
            self.move_changes += self.conn.total_changes - before
            self._moves = []
            fault_point("import-moves-written")

    def finish(self) -> tuple[int, int, int]:
        """Write what is buffered; returns (positions added, moves added, moves updated)."""
        self.flush()
        positions_added = self.book.count_positions() - self.positions_before
        moves_added = self.book.count_moves() - self.moves_before
        return positions_added, moves_added, self.move_changes - moves_added


# -- merging another book ---------------------------------------------------------------

_MOVE_COLUMNS = ("ponder", "value", "depth", "count", "visits", "prior", "win_rate",
                 "eval_value", "minimax_value", "minimax_depth", "engine_score")


def attach_source(store: Book, source: str | os.PathLike[str], schema: str) -> None:
    """Attach a source book; read-write when possible (only SELECTs run on it) so
    that closing removes its WAL files, read-only when it cannot be written."""
    *preferred, last = readonly_uris(source)
    for uri in preferred:
        try:
            store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (uri,))
            return
        except sqlite3.OperationalError:
            pass
    store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (last,))


def merge_attached(store: Book, schema: str, run_id: int) -> tuple[int, int, int]:
    """Merge the book attached as ``schema`` into ``store`` in the caller's
    transaction (see :mod:`bookgen.bookfiles.merge` for the rules; refine minimax's
    transposition rows are not copied); returns (positions added, moves added,
    moves updated)."""
    conn = store.conn
    positions_before = store.count_positions()
    moves_before = store.count_moves()
    conn.execute(
        "INSERT INTO positions(sfen, zobrist, ply, turn, created_run) "
        f"SELECT sfen, zobrist, ply, turn, ? FROM {schema}.positions WHERE true "
        "ORDER BY id" + PLY_UPSERT_SQL, (run_id,))
    changes = conn.total_changes
    selected = ", ".join(f"m.{c}" for c in _MOVE_COLUMNS)
    also_update = ", ".join(f"{c} = excluded.{c}" for c in _MOVE_COLUMNS[4:])
    upsert = MOVE_UPSERT_SQL.replace(
        "run_id = excluded.run_id",
        f"run_id = excluded.run_id, {also_update}, "
        "child_id = coalesce(excluded.child_id, moves.child_id)")
    conn.execute(
        f"INSERT INTO moves(position_id, move, {', '.join(_MOVE_COLUMNS)}, child_id, run_id) "
        f"SELECT p.id, m.move, {selected}, pc.id, ? "
        f"FROM {schema}.moves m JOIN {schema}.positions sp ON sp.id = m.position_id "
        "JOIN main.positions p ON p.sfen = sp.sfen "
        f"LEFT JOIN {schema}.positions sc ON sc.id = m.child_id "
        "LEFT JOIN main.positions pc ON pc.sfen = sc.sfen "
        f"WHERE {own_rows_sql(schema)} ORDER BY p.id" + upsert, (run_id,))
    changed = conn.total_changes - changes
    positions_added = store.count_positions() - positions_before
    moves_added = store.count_moves() - moves_before
    return positions_added, moves_added, changed - moves_added
