"""Writes to a book outside the bulk loader: grow's expansions, analyses, mistakes,
engine moves and ``refine minimax``'s values.

Every function takes an open connection to a book opened for writing
(``Book.conn``) and writes in the caller's transaction; the callers prepare
the rows (plain values), the SQL is here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

__all__ = ["GrownMoveRow", "add_position", "foreign_keys_off", "insert_analysis",
           "insert_mistakes", "link_child", "link_children", "record_expansion",
           "set_move_line", "set_position_value", "upsert_engine_move", "upsert_grown_move",
           "upsert_position", "write_minimax"]


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


# -- grow ------------------------------------------------------------------------------


class GrownMoveRow(NamedTuple):
    """A ``moves`` row as ``grow`` writes it (the columns in :func:`upsert_grown_move`'s
    order)."""

    position_id: int
    move: str
    ponder: str | None
    value: int
    depth: int
    count: int  # type: ignore[assignment]  # shadows tuple.count, as BookMove.count does
    visits: int | None
    prior: float | None
    win_rate: float | None
    child_id: int
    eval_value: int
    run_id: int


def upsert_position(conn: sqlite3.Connection, sfen: str, zobrist: int, ply: int | None,
                    turn: int, created_run: int) -> tuple[int, bool]:
    """The id of the position ``sfen`` and whether its row was inserted now. A
    position already there gets the smaller ``ply``; a new one is inserted with
    ``zobrist``, ``ply``, ``turn`` and ``created_run`` (:func:`add_position`)."""
    row = conn.execute("SELECT id, ply FROM positions WHERE sfen = ?", (sfen,)).fetchone()
    if row is not None:
        if ply is not None and (row[1] is None or ply < row[1]):
            conn.execute("UPDATE positions SET ply = ? WHERE id = ?", (ply, row[0]))
        return int(row[0]), False
    return add_position(conn, sfen, zobrist, ply, turn, created_run), True


def record_expansion(conn: sqlite3.Connection, position_id: int, visits: int, value: int,
                     win_rate: float, run_id: int) -> None:
    """Mark the position expanded by ``run_id``, with its search's visits, value and
    win rate."""
    conn.execute(
        "UPDATE positions SET visits = ?, value = ?, win_rate = ?, expanded_run = ? "
        "WHERE id = ?", (visits, value, win_rate, run_id, position_id))


def set_position_value(conn: sqlite3.Connection, position_id: int, value: int) -> None:
    conn.execute("UPDATE positions SET value = ? WHERE id = ?", (value, position_id))


def link_child(conn: sqlite3.Connection, position_id: int, move: str, child_id: int) -> bool:
    """Link ``move`` of ``position_id`` to ``child_id`` unless it has a link already;
    returns whether the row changed."""
    cursor = conn.execute("UPDATE moves SET child_id = ? WHERE position_id = ? "
                          "AND move = ? AND child_id IS NULL", (child_id, position_id, move))
    return bool(cursor.rowcount)


def link_children(conn: sqlite3.Connection, links: Iterable[tuple[int, int, str]]) -> None:
    """Set the links (child_id, position_id, move), over any link there."""
    conn.executemany(
        "UPDATE moves SET child_id = ? WHERE position_id = ? AND move = ?", links)


def upsert_grown_move(conn: sqlite3.Connection, row: GrownMoveRow) -> None:
    """Insert ``row``, or overwrite every column of the row already there but its
    minimax value and depth."""
    conn.execute(
        "INSERT INTO moves(position_id, move, ponder, value, depth, count, visits, "
        "prior, win_rate, child_id, eval_value, run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(position_id, move) DO UPDATE SET ponder = excluded.ponder, "
        "value = excluded.value, depth = excluded.depth, "
        "count = excluded.count, visits = excluded.visits, prior = excluded.prior, "
        "win_rate = excluded.win_rate, child_id = excluded.child_id, "
        "eval_value = excluded.eval_value, run_id = excluded.run_id", row)


def set_move_line(conn: sqlite3.Connection, position_id: int, move: str, value: int,
                  depth: int, ponder: str | None) -> None:
    """Set the value, depth and ponder of one move (grow's propagation)."""
    conn.execute(
        "UPDATE moves SET value = ?, depth = ?, ponder = ? WHERE position_id = ? AND move = ?",
        (value, depth, ponder, position_id, move))
