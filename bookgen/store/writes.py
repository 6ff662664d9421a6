"""Writes to a book outside the bulk loader: analyses, mistakes, engine moves and
``refine minimax``'s values.

Every function takes an open connection to a book opened for writing
(``Book.conn``) and writes in the caller's transaction; the callers prepare
the rows (plain values), the SQL is here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["add_position", "foreign_keys_off", "insert_analysis", "insert_mistakes",
           "upsert_engine_move", "write_minimax"]


def foreign_keys_off(conn: sqlite3.Connection) -> None:
    """Stop checking foreign keys on ``conn`` (a bulk load, whose writer keeps them)."""
    conn.execute("PRAGMA foreign_keys = OFF")


def insert_analysis(conn: sqlite3.Connection, row: Sequence[Any]) -> None:
    """Insert one ``analyses`` row: (position_id, run_id, engine, score, mate, bound,
    depth, seldepth, nodes, bestmove, pv, created_at)."""
    conn.execute(
        "INSERT INTO analyses(position_id, run_id, engine, score, mate, bound, "
        "depth, seldepth, nodes, bestmove, pv, created_at) VALUES (?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?)", row)


def insert_mistakes(conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> None:
    """Insert ``mistakes`` rows: (run_id, iteration, position_id, analysis_run_id, kind,
    book_value, engine_value, difference, book_move, engine_move, reason, created_at)."""
    conn.executemany(
        "INSERT INTO mistakes(run_id, iteration, position_id, analysis_run_id, kind, "
        "book_value, engine_value, difference, book_move, engine_move, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def add_position(conn: sqlite3.Connection, sfen: str, zobrist: int, ply: int | None,
                 turn: int, created_run: int) -> int:
    """Insert a position (no moves yet); returns its id."""
    position_id = conn.execute(
        "INSERT INTO positions(sfen, zobrist, ply, turn, created_run) "
        "VALUES (?, ?, ?, ?, ?)",
        (sfen, zobrist, ply, turn, created_run)).lastrowid
    assert position_id is not None
    return position_id


def upsert_engine_move(conn: sqlite3.Connection, position_id: int, move: str,
                       value: int | None, depth: int | None, child_id: int,
                       eval_value: int | None, run_id: int) -> None:
    """Make ``move`` a book move of ``position_id`` (count 1, child linked), over a
    row already there (a transposition row of ``refine minimax``)."""
    conn.execute(
        "INSERT INTO moves(position_id, move, ponder, value, depth, count, child_id, "
        "eval_value, run_id) VALUES (?, ?, NULL, ?, ?, 1, ?, ?, ?) "
        "ON CONFLICT(position_id, move) DO UPDATE SET value = excluded.value, "
        "depth = excluded.depth, count = 1, child_id = excluded.child_id, "
        "eval_value = excluded.eval_value, run_id = excluded.run_id",
        (position_id, move, value, depth, child_id, eval_value, run_id))


def write_minimax(conn: sqlite3.Connection, stale: Sequence[tuple[int, str]],
                  move_values: Iterable[Sequence[Any]], new_rows: Iterable[Sequence[Any]],
                  position_values: Iterable[Sequence[Any]]) -> int:
    """Store ``refine minimax``'s values, in this order: delete the ``stale``
    transposition rows (position_id, move); update the stored moves whose values or
    link change (minimax_value, minimax_depth, child_id to link or None,
    position_id, move); insert the new transposition rows (position_id, move,
    child_id, minimax_value, minimax_depth, run_id); set the positions' values
    (minimax_value, minimax_depth, id). Returns how many moves were updated."""
    if stale:
        conn.executemany("DELETE FROM moves WHERE position_id = ? AND move = ?", stale)
    before = conn.total_changes
    conn.executemany(
        "UPDATE moves SET minimax_value = ?1, minimax_depth = ?2, "
        "child_id = coalesce(child_id, ?3) WHERE position_id = ?4 AND move = ?5 "
        "AND (minimax_value IS NOT ?1 OR minimax_depth IS NOT ?2 "
        "OR (child_id IS NULL AND ?3 IS NOT NULL))", move_values)
    updated = conn.total_changes - before
    conn.executemany(
        "INSERT INTO moves(position_id, move, ponder, value, depth, count, child_id, "
        "minimax_value, minimax_depth, run_id) VALUES (?, ?, NULL, NULL, NULL, 0, ?, ?, ?, ?)",
        new_rows)
    conn.executemany("UPDATE positions SET minimax_value = ?, minimax_depth = ? WHERE id = ?",
                     position_values)
    return updated
