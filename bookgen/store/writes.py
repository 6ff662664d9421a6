"""Writes to a book outside the bulk loader: grow's expansions, analyses, mistakes,
engine moves and ``refine minimax``'s values.

Every function takes an open connection to a book opened for writing
(``Book.conn``) and writes in the caller's transaction; the callers prepare
the rows (plain values; ``refine minimax``'s as numpy columns), the SQL is here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from bookgen.arrays import NULL, find_rows
from bookgen.signals import fault_point
from bookgen.store.columns import minimax_move_columns, minimax_move_table, minimax_position_columns
from bookgen.store.queries import refined

__all__ = ["STREAM_SHARE", "GrownMoveRow", "MinimaxMoves", "MinimaxPositions", "add_position",
           "foreign_keys_off", "insert_analysis", "insert_mistakes", "link_child",
           "link_children", "record_expansion",
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


@dataclass(frozen=True)
class MinimaxMoves:
    """``refine minimax``'s values of ``moves`` rows, one numpy column each (rows in
    any order): ``position_id``; ``move``, an index into ``names``; ``value``;
    ``depth`` (:data:`~bookgen.arrays.NULL` for NULL); ``stored``, whether the row
    is in the book (its values are set, and ``child`` links it unless it has a link
    already) or a new transposition row (inserted with ``child`` as its link);
    ``child`` (:data:`~bookgen.arrays.NULL`: none)."""

    position_id: np.ndarray
    move: np.ndarray
    names: Sequence[str]
    value: np.ndarray
    depth: np.ndarray
    child: np.ndarray
    stored: np.ndarray


@dataclass(frozen=True)
class MinimaxPositions:
    """``refine minimax``'s values of positions, one numpy column each: ``id``,
    ``value``, ``depth`` (:data:`~bookgen.arrays.NULL` for NULL)."""

    id: np.ndarray
    value: np.ndarray
    depth: np.ndarray


_BATCH = 1 << 18   # rows per executemany: bounds the Python objects alive at once


def _params(column: np.ndarray) -> list[Any]:
    """A numpy integer column as SQL parameters (:data:`~bookgen.arrays.NULL`: None)."""
    values = column.tolist()
    for row in np.flatnonzero(column == NULL).tolist():
        values[row] = None
    return values


def _in_batches(conn: sqlite3.Connection, sql: str, rows: np.ndarray,
                params: Callable[[np.ndarray], list[list[Any]]]) -> None:
    """``sql`` once per row of ``rows`` (indices), a batch at a time; ``params(batch)``
    gives the batch's parameters, a list per column."""
    for start in range(0, len(rows), _BATCH):
        conn.executemany(sql, zip(*params(rows[start:start + _BATCH])))


def _joined_moves_are(text: str, names: np.ndarray, moves: np.ndarray) -> bool:
    """Whether ``text`` is the ``names`` of ``moves`` joined by single spaces
    (compared a batch at a time: no second copy of the whole text)."""
    at = 0
    for start in range(0, len(moves), _BATCH):
        part = " ".join(names[moves[start:start + _BATCH]].tolist())
        end = at + len(part)
        if text[at:end] != part or text[end:end + 1] not in ("", " "):
            return False
        at = end + 1
    return at >= len(text)


_STREAM_BATCH = 1 << 16   # items of a streamed column made at once


def _streamed(column: np.ndarray, rows: np.ndarray) -> Iterator[Any]:
    """The items ``rows`` of a numpy integer column as SQL values
    (:data:`~bookgen.arrays.NULL`: None), made a batch at a time."""
    return chain.from_iterable(_params(column[rows[start:start + _STREAM_BATCH]])
                               for start in range(0, len(rows), _STREAM_BATCH))


def _changed_moves(conn: sqlite3.Connection, moves: MinimaxMoves, stored: np.ndarray,
                   names: np.ndarray) -> tuple[np.ndarray, bool]:
    """Which of the ``stored`` rows would change: their values (a value that is no
    integer always does, as for the keyed ``UPDATE``'s ``IS NOT``: an integral REAL
    or TEXT is stored as an integer in these columns), or their link (only rows
    without one get a ``child``). And whether the table's rows are these rows, in
    this order (``stored`` is in primary key order); if not, every row is said to
    change (the keyed ``UPDATE`` then finds which do)."""
    pids = moves.position_id[stored]
    changed = moves.child[stored] != NULL
    integers = True
    # A range of positions at a time (the texts SQLite joins stay small).
    bounds = np.unique(pids[_BATCH::_BATCH]).tolist()
    for start, stop in zip([None, *bounds], [*bounds, None]):
        first = 0 if start is None else int(np.searchsorted(pids, start))
        end = len(pids) if stop is None else int(np.searchsorted(pids, stop))
        rows = stored[first:end]
        table = minimax_move_table(conn, start, stop)
        if not (np.array_equal(table.position_id, pids[first:end])
                and _joined_moves_are(table.moves, names, moves.move[rows])):
            return np.ones(len(stored), dtype=bool), False
        if table.value is None or table.depth is None:
            integers = False
        else:
            changed[first:end] |= ((table.value != moves.value[rows])
                                   | (table.depth != moves.depth[rows]))
    if not integers:   # values that are no integers: read as NOT_AN_INTEGER
        _pids, values, depths = minimax_move_columns(conn)
        changed |= (values != moves.value[stored]) | (depths != moves.depth[stored])
    return changed, True


# The stream rewrites every row; the keyed UPDATEs only the rows that change, but at
# several times the cost per row. Measured at 1 M positions, 3.7 M rows: 2.3 s of CPU
# to stream them all changed, 1.7 s unchanged, 7.7 s to update them all by key; the
# two cost the same at about a quarter of the rows changed. (Rebuilding the table in
# key order, a new table filled by INSERT ... SELECT with the values streamed the
# same way and swapped in, cost 4.3-5.3 s: the copy, the drop of the old table and
# the index built again; and SQLite keeps the renamed table's text quoted.)
STREAM_SHARE = 0.25   # stream when at least this share of the rows change


def _stream_moves(conn: sqlite3.Connection, moves: MinimaxMoves, stored: np.ndarray) -> None:
    """Set the values (and missing links) of every ``moves`` row in one ``UPDATE``
    over the whole table: the values come, row after row in primary key order, from
    functions that each return the next item of a column (``stored``: every row of
    the table, in that order). SQLite scans the table in key order and rewrites each
    row where it is, with no lookup by key and no parameters bound per row; a row
    written with its own content is left as it was (no page changes).

    Each row's position id is checked against the column's as the scan meets it: a
    row out of step is not written and the count tells, and nothing is kept."""
    columns = {"bookgen_position": moves.position_id, "bookgen_value": moves.value,
               "bookgen_depth": moves.depth}
    sets = "minimax_value = bookgen_value(), minimax_depth = bookgen_depth()"
    if (moves.child[stored] != NULL).any():
        # coalesce evaluates its first argument for every row (the stream must move
        # on at each row); a row with a link has no child here (it keeps its own).
        columns["bookgen_child"] = moves.child
        sets += ", child_id = coalesce(bookgen_child(), child_id)"
    for name, column in columns.items():
        conn.create_function(name, 0, _streamed(column, stored).__next__)
    try:
        # (+position_id: a comparison the planner cannot serve by a key lookup)
        written = conn.execute(f"UPDATE moves SET {sets} "
                               "WHERE +position_id = bookgen_position()").rowcount
    finally:
        for name in columns:
            conn.create_function(name, 0, None)
    if written != len(stored):
        raise RuntimeError(f"moves rows out of step with their values: {written} of "
                           f"{len(stored)} written")


def _changed_positions(conn: sqlite3.Connection, positions: MinimaxPositions,
                       rows: np.ndarray) -> np.ndarray:
    """Which of the positions ``rows`` would change their values."""
    ids, values, depths = minimax_position_columns(conn)
    if not len(ids):
        return np.ones(len(rows), dtype=bool)
    at, found = find_rows(ids, positions.id[rows])
    at = np.where(found, at, 0)
    return ~found | (values[at] != positions.value[rows]) | (depths[at] != positions.depth[rows])


def _move_params(moves: MinimaxMoves, names: np.ndarray, rows: np.ndarray
                 ) -> list[list[Any]]:
    """The SQL parameters of ``rows``: ?1 value, ?2 depth, ?3 ?4 the key."""
    return [moves.value[rows].tolist(), _params(moves.depth[rows]),
            moves.position_id[rows].tolist(), names[moves.move[rows]].tolist()]


def _keyed_moves(conn: sqlite3.Connection, moves: MinimaxMoves, names: np.ndarray,
                 rows: np.ndarray) -> int:
    """Set the values (and missing links) of the stored ``rows`` by key, a batch at a
    time, those that gain a link apart from the others (only those change
    ``child_id``, which costs SQLite an update of ``moves_child`` and a foreign key
    check, when on); returns how many rows changed."""
    linked = moves.child[rows] != NULL
    before = conn.total_changes
    _in_batches(conn, "UPDATE moves SET minimax_value = ?1, minimax_depth = ?2 "
                "WHERE position_id = ?3 AND move = ?4 "
                "AND (minimax_value IS NOT ?1 OR minimax_depth IS NOT ?2)",
                rows[~linked], lambda batch: _move_params(moves, names, batch))
    _in_batches(conn, "UPDATE moves SET minimax_value = ?1, minimax_depth = ?2, "
                "child_id = coalesce(child_id, ?5) WHERE position_id = ?3 AND move = ?4 "
                "AND (minimax_value IS NOT ?1 OR minimax_depth IS NOT ?2 OR child_id IS NULL)",
                rows[linked], lambda batch: [*_move_params(moves, names, batch),
                                             moves.child[batch].tolist()])
    return conn.total_changes - before


def write_minimax(conn: sqlite3.Connection, stale: Sequence[tuple[int, str]],
                  moves: MinimaxMoves, positions: MinimaxPositions, run_id: int) -> int:
    """Store ``refine minimax``'s values: delete the ``stale`` transposition rows
    (position_id, move), set the values of the stored ``moves`` rows (and their
    links), insert the new transposition rows (count 0, value and depth NULL, the
    run ``run_id``), set the positions' values. Returns how many stored rows
    changed (values or link).

    The values stored are read first (one scan): a row whose values and link are
    already what they should be is not counted, nor rewritten. When at least
    :data:`STREAM_SHARE` of the rows change, the whole table is rewritten in one
    streamed ``UPDATE`` (:func:`_stream_moves`); otherwise, or when the table's rows
    are not the stored rows, the rows that change are updated by key
    (:func:`_keyed_moves`), in primary key order and in batches."""
    if stale:
        conn.executemany("DELETE FROM moves WHERE position_id = ? AND move = ?", stale)
    names = np.array(moves.names, dtype=object)
    name_rank = np.argsort(np.argsort(names)).astype(np.int64)
    order = np.lexsort((name_rank[moves.move], moves.position_id))
    stored, new = order[moves.stored[order]], order[~moves.stored[order]]
    position_rows = np.argsort(positions.id, kind="stable")
    changed, aligned = _changed_moves(conn, moves, stored, names)
    if refined(conn, besides=run_id):   # an earlier refine's values: skip the rows they fit
        position_rows = position_rows[_changed_positions(conn, positions, position_rows)]
    if aligned and changed.sum() >= STREAM_SHARE * len(stored):
        _stream_moves(conn, moves, stored)
        updated = int(changed.sum())
    else:
        updated = _keyed_moves(conn, moves, names, stored[changed])
    fault_point("refine-minimax-moves-written")  # the crash tests' kill in mid-write
    _in_batches(conn, "INSERT INTO moves(position_id, move, ponder, value, depth, count, "
                "child_id, minimax_value, minimax_depth, run_id) "
                "VALUES (?3, ?4, NULL, NULL, NULL, 0, ?5, ?1, ?2, ?6)",
                new, lambda rows: [*_move_params(moves, names, rows), _params(moves.child[rows]),
                                   [run_id] * len(rows)])
    _in_batches(conn, "UPDATE positions SET minimax_value = ?1, minimax_depth = ?2 "
                "WHERE id = ?3 AND (minimax_value IS NOT ?1 OR minimax_depth IS NOT ?2)",
                position_rows, lambda rows: [positions.value[rows].tolist(),
                                             _params(positions.depth[rows]),
                                             positions.id[rows].tolist()])
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
