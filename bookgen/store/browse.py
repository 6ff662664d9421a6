"""Reads for browsing a book one position at a time (``bookgen serve``).

Each function is a point read through an index (a position by its sfen, the
moves, analyses and mistakes of one position id) or a short list (the runs,
the largest mistakes), so that a page answers at once on a large book. Every
value comes from a bound parameter: no SQL here is built from request text.
The rows come back as dicts keyed by column name, the book's own column names
(``docs/schema.md``); tables a book of an older schema lacks read as empty.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from bookgen.store.own_moves import own_rows_sql

__all__ = ["ANALYSIS_COLUMNS", "MISTAKE_COLUMNS", "MOVE_COLUMNS", "POSITION_COLUMNS",
           "RUN_COLUMNS", "analyses_of", "largest_mistakes", "mistakes_at", "moves_of",
           "position_of", "positions_of", "runs"]

POSITION_COLUMNS = ("id", "sfen", "ply", "turn", "visits", "value", "win_rate",
                    "minimax_value", "minimax_depth", "created_run", "expanded_run")
MOVE_COLUMNS = ("move", "ponder", "value", "depth", "count", "visits", "prior", "win_rate",
                "child_id", "eval_value", "minimax_value", "minimax_depth", "engine_score",
                "run_id")
ANALYSIS_COLUMNS = ("run_id", "engine", "score", "mate", "bound", "depth", "seldepth", "nodes",
                    "bestmove", "pv", "created_at")
MISTAKE_COLUMNS = ("run_id", "iteration", "position_id", "analysis_run_id", "kind",
                   "book_value", "engine_value", "difference", "book_move", "engine_move",
                   "reason", "created_at")
RUN_COLUMNS = ("id", "command", "params", "evaluator", "started_at", "ended_at", "status",
               "positions_added", "moves_added", "moves_updated", "counts", "bookgen_version")


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def position_of(conn: sqlite3.Connection, sfen: str) -> dict[str, Any] | None:
    """Every column of the position ``sfen`` (normalised, no move number); None if absent."""
    found = _dicts(conn.execute(
        f"SELECT {', '.join(POSITION_COLUMNS)} FROM positions WHERE sfen = ?", (sfen,)))
    return found[0] if found else None


def positions_of(conn: sqlite3.Connection, sfens: Sequence[str]) -> dict[str, tuple[int, int]]:
    """sfen -> (id, number of own moves) of those of ``sfens`` in the book (at most a few
    hundred: one query per position, each through the sfen index)."""
    found: dict[str, tuple[int, int]] = {}
    for sfen in dict.fromkeys(sfens):
        row = conn.execute(
            f"SELECT p.id, (SELECT count(*) FROM moves m WHERE m.position_id = p.id "
            f"AND {own_rows_sql()}) FROM positions p WHERE p.sfen = ?", (sfen,)).fetchone()
        if row is not None:
            found[sfen] = (int(row[0]), int(row[1]))
    return found


def moves_of(conn: sqlite3.Connection, position_id: int) -> list[dict[str, Any]]:
    """Every ``moves`` row of the position, every column, with ``own`` (1 for the book's
    own moves, 0 for refine minimax's transposition rows), in move order."""
    return _dicts(conn.execute(
        f"SELECT {', '.join('m.' + c for c in MOVE_COLUMNS)}, {own_rows_sql()} AS own "
        "FROM moves m WHERE m.position_id = ? ORDER BY m.move", (position_id,)))


def analyses_of(conn: sqlite3.Connection, position_id: int) -> list[dict[str, Any]]:
    """The engine analyses of the position (``refine search``), newest run first."""
    if not _has_table(conn, "analyses"):
        return []
    return _dicts(conn.execute(
        f"SELECT {', '.join(ANALYSIS_COLUMNS)} FROM analyses WHERE position_id = ? "
        "ORDER BY run_id DESC", (position_id,)))


def mistakes_at(conn: sqlite3.Connection, position_id: int) -> list[dict[str, Any]]:
    """The mistakes found at the position (``refine mistakes``), newest run first."""
    if not _has_table(conn, "mistakes"):
        return []
    return _dicts(conn.execute(
        f"SELECT {', '.join(MISTAKE_COLUMNS)} FROM mistakes WHERE position_id = ? "
        "ORDER BY run_id DESC, iteration DESC", (position_id,)))


def largest_mistakes(conn: sqlite3.Connection, limit: int, offset: int = 0
                     ) -> tuple[int, list[dict[str, Any]]]:
    """(number of mistakes, the ``limit`` largest from ``offset`` on, by size |difference|,
    each with its position's ``sfen`` and ``ply``)."""
    if not _has_table(conn, "mistakes"):
        return 0, []
    total = int(conn.execute("SELECT count(*) FROM mistakes").fetchone()[0])
    # the page of mistakes first (one scan of the mistakes table), then their positions
    order = "abs(k.difference) DESC, k.run_id, k.iteration, k.position_id"
    rows = _dicts(conn.execute(
        f"SELECT {', '.join('k.' + c for c in MISTAKE_COLUMNS)}, p.sfen, p.ply "
        f"FROM (SELECT * FROM mistakes k ORDER BY {order} LIMIT ? OFFSET ?) k "
        f"JOIN positions p ON p.id = k.position_id ORDER BY {order}",
        (int(limit), int(offset))))
    return total, rows


def runs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every run of the book, every column, in id order."""
    return _dicts(conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY id"))
