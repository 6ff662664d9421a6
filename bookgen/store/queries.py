"""Reads of a book's positions and moves, each saying which rows and values it means.

Every function takes an open connection to a book (``Book.conn``, or one of
:func:`bookgen.store.snapshot.open_book_snapshot`) and reads in the caller's
transaction. ``rows`` (:class:`~bookgen.store.own_moves.MoveRows`) chooses
the book's own moves or every ``moves`` row, ``values``
(:class:`~bookgen.store.own_moves.ValueColumn`) the raw or the minimax value.
The readers of each command keep their own choice (``docs/schema.md``):

- grow, stats, report, suites, export ``--values raw``, merge and the
  "is it a book move" test of ``refine mistakes`` read the own moves;
- ``refine minimax`` reads every row (its earlier transposition rows are
  flagged), as do export ``--values minimax``, ``refine search``, ``refine
  mistakes`` and ``starts`` (through
  :class:`~bookgen.store.index.BookIndex`, whose
  :class:`~bookgen.store.index.IndexSpec` names its rows) and the blend
  evaluator's book moves.

:func:`begin` and :func:`commit` bracket reads that must see one snapshot.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from bookgen.store.own_moves import (
    LINK_COMMAND,
    LINK_ROW_COMMANDS,
    REFINE_MINIMAX_COMMAND,
    MoveRows,
    ValueColumn,
    own_rows_sql,
    value_sql,
)

__all__ = ["begin", "commit", "count_moves", "count_positions", "count_runs",
           "data_version", "has_move", "ids_and_sfens_by_sfen", "ids_by_sfen", "minimax_rows",
           "mistake_counts", "move_names", "moves_by_run", "position_id", "position_moves",
           "positions_by_created_run", "positions_with_moves", "refined", "runs_table",
           "set_cache_size", "sfens_of", "table_names",
           "unrefined_move_count"]


# -- counts ---------------------------------------------------------------------------


def count_positions(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM positions").fetchone()[0])


def count_moves(conn: sqlite3.Connection, rows: MoveRows = MoveRows.ALL) -> int:
    """The number of ``moves`` rows (``rows``)."""
    if rows == MoveRows.OWN:
        return int(conn.execute(
            f"SELECT count(*) FROM moves m WHERE {own_rows_sql()}").fetchone()[0])
    return int(conn.execute("SELECT count(*) FROM moves").fetchone()[0])


def positions_with_moves(conn: sqlite3.Connection, rows: MoveRows = MoveRows.OWN) -> int:
    """The number of positions with at least one move (``rows``)."""
    if rows == MoveRows.OWN:
        return int(conn.execute(
            f"SELECT count(DISTINCT position_id) FROM moves m WHERE {own_rows_sql()}"
        ).fetchone()[0])
    return int(conn.execute("SELECT count(DISTINCT position_id) FROM moves").fetchone()[0])


def count_runs(conn: sqlite3.Connection) -> tuple[int, int]:
    """The runs that wrote the book: the commands run on it, and the ``link`` runs
    (the rows of stored links an import or merge added, a run of their own)."""
    links, total = conn.execute("SELECT count(*) FILTER (WHERE command = ?), count(*) "
                                "FROM runs", (LINK_COMMAND,)).fetchone()
    return int(total) - int(links), int(links)


def unrefined_move_count(conn: sqlite3.Connection) -> int:
    """The number of ``moves`` rows without a minimax value."""
    return int(conn.execute(
        "SELECT count(*) FROM moves WHERE minimax_value IS NULL").fetchone()[0])


# -- runs -----------------------------------------------------------------------------


def runs_table(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """(id, command, status, started_at, positions_added, moves_added, moves_updated,
    counts) of every run, in id order."""
    return conn.execute(
        "SELECT id, command, status, started_at, positions_added, moves_added, "
        "moves_updated, counts FROM runs ORDER BY id").fetchall()


def positions_by_created_run(conn: sqlite3.Connection) -> dict[int | None, int]:
    """Positions per run that created them (``created_run``)."""
    return dict(conn.execute(
        "SELECT created_run, count(*) FROM positions GROUP BY created_run").fetchall())


def moves_by_run(conn: sqlite3.Connection, rows: MoveRows = MoveRows.OWN
                 ) -> dict[int | None, int]:
    """Moves (``rows``) per run that last wrote them (``run_id``)."""
    where = f" WHERE {own_rows_sql()}" if rows == MoveRows.OWN else ""
    return dict(conn.execute(
        f"SELECT run_id, count(*) FROM moves m{where} GROUP BY run_id").fetchall())


def mistake_counts(conn: sqlite3.Connection) -> list[tuple[int, int, str | None, str, int]]:
    """(run_id, iteration, the run's started_at, kind, mistakes) per run, round and kind
    of the ``mistakes`` table (none when the book has no such table)."""
    has_mistakes = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = "
                                "'table' AND name = 'mistakes'").fetchone()[0]
    if not has_mistakes:
        return []
    return conn.execute(
        "SELECT m.run_id, m.iteration, r.started_at, m.kind, count(*) "
        "FROM mistakes m LEFT JOIN runs r ON r.id = m.run_id "
        "GROUP BY m.run_id, m.iteration, m.kind ORDER BY m.run_id, m.iteration, m.kind"
    ).fetchall()


def may_have_transposition_rows(conn: sqlite3.Connection) -> bool:
    """Whether a run that adds transposition rows (``refine minimax``, ``link``) ever
    ran on the book: without one, every ``moves`` row is one of the book's own."""
    marks = ", ".join("?" * len(LINK_ROW_COMMANDS))
    return conn.execute(f"SELECT 1 FROM runs WHERE command IN ({marks}) LIMIT 1",
                        LINK_ROW_COMMANDS).fetchone() is not None


def refined(conn: sqlite3.Connection, besides: int | None = None) -> bool:
    """Whether ``refine minimax`` ever ran on the book (in a run other than
    ``besides``)."""
    return conn.execute("SELECT 1 FROM runs WHERE command = ? AND id IS NOT ? LIMIT 1",
                        (REFINE_MINIMAX_COMMAND, besides)).fetchone() is not None


# -- moves ----------------------------------------------------------------------------


def has_move(conn: sqlite3.Connection, position_id: int, move: str,
             rows: MoveRows = MoveRows.OWN) -> bool:
    """Whether position ``position_id`` has ``move`` among its moves (``rows``)."""
    if rows == MoveRows.OWN:
        return conn.execute(
            "SELECT 1 FROM moves m WHERE position_id = ? AND move = ? "
            f"AND {own_rows_sql()}", (position_id, move)).fetchone() is not None
    return conn.execute("SELECT 1 FROM moves WHERE position_id = ? AND move = ?",
                        (position_id, move)).fetchone() is not None


def move_names(conn: sqlite3.Connection, position_id: int) -> set[str]:
    """The moves of position ``position_id``, every row (transposition rows included)."""
    return {row[0] for row in conn.execute(
        "SELECT move FROM moves WHERE position_id = ?", (position_id,))}


def minimax_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, int | None, int, str,
                                                             str | None, int | None,
                                                             int | None, int]]:
    """(sfen, ply, turn, move, ponder, minimax_value, minimax_depth, count) of every
    ``moves`` row, transposition rows included, ordered by sfen (export
    ``--values minimax``)."""
    yield from conn.execute(
        "SELECT p.sfen, p.ply, p.turn, m.move, m.ponder, m.minimax_value, m.minimax_depth, "
        "m.count FROM positions p JOIN moves m ON m.position_id = p.id ORDER BY p.sfen")


# -- snapshots and settings -------------------------------------------------------------


def begin(conn: sqlite3.Connection) -> None:
    """Begin a transaction: the reads until :func:`commit` see one snapshot of the book."""
    conn.execute("BEGIN")


def commit(conn: sqlite3.Connection) -> None:
    conn.execute("COMMIT")


def data_version(conn: sqlite3.Connection) -> int:
    """SQLite's ``data_version``: changes when another connection commits to the file."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def set_cache_size(conn: sqlite3.Connection, kib: int) -> None:
    """Set the connection's page cache to ``kib`` KiB."""
    conn.execute(f"PRAGMA cache_size = -{kib}")


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The names of the book's tables."""
    return {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


# -- positions by sfen --------------------------------------------------------------------


def position_id(conn: sqlite3.Connection, sfen: str) -> int | None:
    """The id of the position ``sfen``, None if the book has none."""
    row = conn.execute("SELECT id FROM positions WHERE sfen = ?", (sfen,)).fetchone()
    return None if row is None else int(row[0])


def ids_by_sfen(conn: sqlite3.Connection) -> Iterator[tuple[int]]:
    """(id,) of every position, in sfen order (the sfen index)."""
    return conn.execute("SELECT id FROM positions ORDER BY sfen")


def ids_and_sfens_by_sfen(conn: sqlite3.Connection) -> Iterator[tuple[int, str]]:
    """(id, sfen) of every position, in sfen order (the sfen index)."""
    return conn.execute("SELECT id, sfen FROM positions ORDER BY sfen")


def sfens_of(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    """id -> sfen of the positions ``ids`` (at most SQLite's number of parameters)."""
    return dict(conn.execute(
        f"SELECT id, sfen FROM positions WHERE id IN ({','.join('?' * len(ids))})", ids))


def position_moves(conn: sqlite3.Connection, sfen: str,
                   values: ValueColumn = ValueColumn.RAW) -> list[tuple[str, int, int | None]]:
    """(move, count, value) of every ``moves`` row (all rows, transposition rows
    included) of the position ``sfen``; empty when the book does not hold it."""
    return conn.execute(
        f"SELECT m.move, m.count, {value_sql(values)} FROM moves m "
        "JOIN positions p ON p.id = m.position_id WHERE p.sfen = ?",
        (sfen,)).fetchall()
