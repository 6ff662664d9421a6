"""Book tables as numpy columns: SQLite aggregates, numpy parses.

:func:`sql_int_columns` reads integer columns of any query as int64 arrays
(:data:`bookgen.arrays.NULL` for an SQL NULL). :func:`load_position_columns`
and :func:`load_move_columns` read the ``positions`` and ``moves`` tables,
the columns asked for, for :class:`bookgen.store.index.BookIndex`;
:func:`minimax_move_columns` and :func:`minimax_position_columns` the values
``refine minimax`` stored, for its writer.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bookgen.arrays import NULL
from bookgen.store.own_moves import (
    MoveRows,
    ValueColumn,
    link_run_ids,
    own_rows_sql,
    transposition_row_sql,
    value_sql,
)
from bookgen.store.queries import may_have_transposition_rows

__all__ = ["EDGE_COLUMNS", "NOT_AN_INTEGER", "POSITION_COLUMNS", "MoveColumns",
           "MinimaxMoveTable", "load_move_columns", "load_position_columns", "load_sfens",
           "load_sfens_of",
           "minimax_move_columns", "minimax_move_table",
           "minimax_position_columns", "mistake_position_ids", "move_codes", "sql_int_columns"]

# The position columns a BookIndex can hold, and their SQL (all integers).
POSITION_COLUMNS: dict[str, str] = {
    "ply": "ply",
    "turn": "turn",
    "visits": "visits",
    "value": "value",
    "minimax_value": "minimax_value",
    "expanded": "expanded_run IS NOT NULL",   # 1 when a run expanded the position
    "zobrist": "zobrist",                     # signed, as stored
}

# The move columns a BookIndex can hold besides the move, its child and its values.
EDGE_COLUMNS = ("count", "own", "depth", "ponder")

_MAX_MOVE_CHARS = 9            # 7 bits per ASCII character in an int64 move code


def sql_int_columns(conn: sqlite3.Connection, sql: str, columns: Sequence[str],
                    args: Sequence[Any] = ()) -> list[np.ndarray]:
    """Integer ``columns`` of the rows of ``sql``, each an int64 array (NULL is
    :data:`NULL`), in the rows' order.

    SQLite joins each column into one text (``group_concat``) that numpy
    parses: much faster and leaner than a Python tuple per row. (SQLite keeps
    the ORDER BY of a FROM subquery under ``group_concat``; the callers check
    their key columns anyway.)
    """
    joined = ", ".join(f"group_concat(coalesce({c}, {NULL}))" for c in columns)
    texts = conn.execute(f"SELECT {joined} FROM ({sql})", args).fetchone()
    arrays = []
    for column, text in zip(columns, texts):
        if not text:
            arrays.append(np.empty(0, dtype=np.int64))
            continue
        try:
            arrays.append(np.fromstring(text, dtype=np.int64, sep=","))
        except ValueError:  # not all integers (REAL or TEXT in the column)
            arrays.append(np.array(
                [NULL if row[0] is None else int(row[0]) for row in
                 conn.execute(f"SELECT {column} FROM ({sql})", args)], dtype=np.int64))
    return arrays


def move_codes(text: str, n: int) -> tuple[np.ndarray, list[str]] | None:
    """Ranks (in sorted order of the moves) and names of ``n`` space-joined moves;
    None unless every move is at most 9 printable ASCII characters."""
    raw = text.encode("utf-8")
    buf = np.frombuffer(raw, dtype=np.uint8)
    if buf.size and (int(buf.max()) > 126 or int(buf.min()) < 32):
        return None
    starts = np.zeros(n, dtype=np.int64)
    separators = np.flatnonzero(buf == 32)
    if len(separators) != n - 1:
        return None
    starts[1:] = separators + 1
    del separators
    ends = np.append(starts[1:] - 1, len(buf))
    width = int((ends - starts).max())
    if width > _MAX_MOVE_CHARS:
        return None
    code = np.zeros(n, dtype=np.int64)
    block = 1 << 20
    for at in range(0, n, block):  # (bounded temporaries)
        first, end = starts[at:at + block], ends[at:at + block]
        part = code[at:at + block]
        for column in range(width):  # big-endian, zero padded: code order is string order
            where = first + column
            inside = where < end
            part <<= 7
            part[inside] |= buf[where[inside]]
    codes = np.unique(code)
    names = ["".join(chr((c >> 7 * (width - 1 - i)) & 127) for i in range(width)).rstrip("\0")
             for c in codes.tolist()]
    return np.searchsorted(codes, code).astype(np.int32), names




def load_position_columns(conn: sqlite3.Connection, names: Collection[str]
                          ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The ids of every position, ascending, and its columns ``names`` (keys of
    :data:`POSITION_COLUMNS`; NULL is :data:`NULL`) in the same order."""
    unknown = set(names) - set(POSITION_COLUMNS)
    if unknown:
        raise ValueError(f"unknown position columns: {', '.join(sorted(unknown))}")
    wanted = [name for name in POSITION_COLUMNS if name in names]
    select = ", ".join(["id", *(name if POSITION_COLUMNS[name] == name
                               else f"{POSITION_COLUMNS[name]} AS {name}" for name in wanted)])
    ids, *columns = sql_int_columns(conn, f"SELECT {select} FROM positions ORDER BY id",
                                    ["id", *wanted])
    if np.any(ids[1:] <= ids[:-1]):
        order = np.argsort(ids, kind="stable")
        ids, columns = ids[order], [column[order] for column in columns]
    return ids, dict(zip(wanted, columns))


def load_sfens(conn: sqlite3.Connection) -> list[str]:
    """The sfen of every position, in id order."""
    return [sfen for (sfen,) in conn.execute("SELECT sfen FROM positions ORDER BY id")]


def load_sfens_of(conn: sqlite3.Connection, ids: np.ndarray) -> list[str]:
    """The sfens of the positions ``ids`` (distinct), in that order, each looked up by
    its id (the ids go in as one JSON array); raises RuntimeError when any is missing
    (the book changed since the ids were read: call in the same read transaction)."""
    sfens = [sfen for (sfen,) in conn.execute(
        "SELECT p.sfen FROM json_each(?) j JOIN positions p ON p.id = j.value ORDER BY j.key",
        (json.dumps(np.asarray(ids, dtype=np.int64).tolist()),))]
    if len(sfens) != len(ids):
        raise RuntimeError("the book changed while it was read")
    return sfens


# What a minimax column reads as when it holds neither an integer nor NULL: equal to no
# value ``refine minimax`` writes (values within +-MATE_VALUE, depths below 2**20).
NOT_AN_INTEGER = 1 << 62


def _integer(column: str) -> str:
    return (f"CASE typeof({column}) WHEN 'integer' THEN {column} WHEN 'null' THEN NULL "
            f"ELSE {NOT_AN_INTEGER} END")


def minimax_move_columns(conn: sqlite3.Connection) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ``moves`` row's position id, ``minimax_value`` and ``minimax_depth``
    (:data:`NULL` for NULL, :data:`NOT_AN_INTEGER` for anything but an integer),
    ordered by (position id, move)."""
    pids, values, depths = sql_int_columns(
        conn, f"SELECT position_id, {_integer('minimax_value')} AS v, "
        f"{_integer('minimax_depth')} AS d FROM moves ORDER BY position_id, move",
        ["position_id", "v", "d"])
    return pids, values, depths


@dataclass(frozen=True)
class MinimaxMoveTable:
    """The ``moves`` table as one scan reads it (:func:`minimax_move_table`), in the
    order of the scan, which is the primary key's: each row's position id, its move
    (``moves``: the moves joined by single spaces), its ``minimax_value`` and
    ``minimax_depth`` (:data:`NULL` for NULL; both None when any is neither NULL nor
    an integer: :func:`minimax_move_columns` reads those)."""

    position_id: np.ndarray
    moves: str
    value: np.ndarray | None
    depth: np.ndarray | None


def _int_list(text: str | None, count: int) -> np.ndarray | None:
    """``count`` comma-separated integers; None unless ``text`` is exactly that."""
    if not count:
        return np.empty(0, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # (numpy warns, and stops, at a non-integer)
        try:
            column = np.fromstring(text or "", dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return column if len(column) == count else None


def minimax_move_table(conn: sqlite3.Connection, start: int | None = None,
                       stop: int | None = None) -> MinimaxMoveTable:
    """The keys and minimax values of the ``moves`` rows with ``start <= position_id <
    stop`` (None: no bound) in one plain scan of that range of the primary key
    (about half the cost of :func:`minimax_move_columns`' ordered subquery; a table
    without row ids is scanned in key order, which the caller checks)."""
    bounds = [f"position_id {op} {int(bound)}" for op, bound in ((">=", start), ("<", stop))
              if bound is not None]
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    count, pids, moves, values, depths = conn.execute(
        f"SELECT count(*), group_concat(position_id), group_concat(move, ' '), "
        f"group_concat(coalesce(minimax_value, {NULL})), "
        f"group_concat(coalesce(minimax_depth, {NULL})) FROM moves{where}").fetchone()
    position_id = _int_list(pids, count)
    if position_id is None:
        raise RuntimeError("moves.position_id holds a value that is no integer")
    value, depth = _int_list(values, count), _int_list(depths, count)
    if value is None or depth is None:
        value = depth = None
    return MinimaxMoveTable(position_id, moves or "", value, depth)


def minimax_position_columns(conn: sqlite3.Connection
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every position's id, ``minimax_value`` and ``minimax_depth`` (as in
    :func:`minimax_move_columns`), in id order."""
    ids, values, depths = sql_int_columns(
        conn, f"SELECT id, {_integer('minimax_value')} AS v, {_integer('minimax_depth')} AS d "
        "FROM positions ORDER BY id", ["id", "v", "d"])
    return ids, values, depths


def mistake_position_ids(conn: sqlite3.Connection) -> np.ndarray:
    """The ids of the positions of the ``mistakes`` table (each once)."""
    return sql_int_columns(conn, "SELECT DISTINCT position_id AS id FROM mistakes", ["id"])[0]


@dataclass
class MoveColumns:
    """``moves`` rows as columns, ordered by (position id, move).

    ``move`` and ``ponder`` are ranks into the sorted ``names`` and
    ``ponder_names`` (``ponder`` -1: NULL); ``values`` holds the value
    columns read (NULL is :data:`NULL`); ``count``, ``own`` (the row is one
    of the book's own moves, :class:`~bookgen.store.own_moves.MoveRows`),
    ``depth`` and ``ponder`` are None unless read.
    """

    pids: np.ndarray
    move: np.ndarray
    names: list[str]
    child: np.ndarray
    values: dict[ValueColumn, np.ndarray]
    count: np.ndarray | None = None
    own: np.ndarray | None = None
    depth: np.ndarray | None = None
    ponder: np.ndarray | None = None
    ponder_names: list[str] | None = None

    def take(self, keep: np.ndarray) -> MoveColumns:
        """The rows ``keep`` (a mask or indices)."""
        def pick(column: np.ndarray | None) -> np.ndarray | None:
            return None if column is None else column[keep]
        return MoveColumns(self.pids[keep], self.move[keep], self.names, self.child[keep],
                           {v: column[keep] for v, column in self.values.items()},
                           pick(self.count), pick(self.own), pick(self.depth),
                           pick(self.ponder), self.ponder_names)


def _text_ranks(values: list[str]) -> tuple[np.ndarray, list[str]]:
    names = sorted(set(values))
    rank = {name: i for i, name in enumerate(names)}
    return np.array([rank[v] for v in values], dtype=np.int32), names


def load_move_columns(conn: sqlite3.Connection, rows: MoveRows = MoveRows.ALL,
                      values: Sequence[ValueColumn] = (ValueColumn.MINIMAX,),
                      extra: Collection[str] = ("count",)) -> MoveColumns:
    """The ``moves`` rows ``rows``, ordered by (position id, move): position ids,
    moves, child ids, the value columns ``values`` and the columns ``extra`` (of
    :data:`EDGE_COLUMNS`)."""
    unknown = set(extra) - set(EDGE_COLUMNS)
    if unknown:
        raise ValueError(f"unknown move columns: {', '.join(sorted(unknown))}")
    # (Without a refine minimax or link run there are no transposition rows.)
    split = may_have_transposition_rows(conn)
    run_ids = link_run_ids(conn) if split else []   # (a list in the SQL: no subquery a row)
    where = f" WHERE {own_rows_sql(run_ids=run_ids)}" if rows == MoveRows.OWN and split else ""
    order = f"FROM moves m{where} ORDER BY m.position_id, m.move"
    # the integer columns: (name, SQL)
    ints = [(f"v{i}", value_sql(v)) for i, v in enumerate(values)]
    own_sql = own_rows_sql(run_ids=run_ids) if "own" in extra and rows == MoveRows.ALL and split \
        else None
    # With the counts, a transposition row (count 0 by definition) reads its count as
    # NULL (a count never is): one column fewer to read.
    own_in_count = own_sql is not None and "count" in extra
    if own_in_count:
        ints.append(("count", f"CASE WHEN {transposition_row_sql(run_ids)} THEN NULL "
                              "ELSE m.count END"))
    elif "count" in extra:
        ints.append(("count", "m.count"))
    if own_sql is not None and not own_in_count:
        ints.append(("own", own_sql))
    if "depth" in extra:
        ints.append(("depth", "m.depth"))
    if "ponder" in extra:
        ints.append(("ponder_null", "m.ponder IS NULL"))
    # One scan for every integer column. Unlinked moves are read as 0 when every link
    # is a positive id (the usual case), rather than as NULL's 20 digits.
    lowest = conn.execute("SELECT child_id FROM moves WHERE child_id IS NOT NULL "
                          "ORDER BY child_id LIMIT 1").fetchone()
    zero_unlinked = lowest is None or (isinstance(lowest[0], int) and lowest[0] > 0)
    child_sql = "coalesce(m.child_id, 0)" if zero_unlinked else "m.child_id"
    every = [("position_id", "m.position_id"), ("child_id", child_sql), *ints]
    pids, child, *int_columns = sql_int_columns(
        conn, f"SELECT {', '.join(f'{sql} AS {name}' for name, sql in every)} {order}",
        [name for name, _sql in every])
    if zero_unlinked:
        child[child == 0] = NULL
    if own_in_count:
        at = [name for name, _sql in every].index("count") - 2
        counts = int_columns[at]
        own = counts != NULL
        counts[~own] = 0
        int_columns.append(own.astype(np.int64))
        ints.append(("own", own_sql or ""))
    n = len(pids)
    text = conn.execute(f"SELECT group_concat(move, ' ') FROM (SELECT m.move {order})"
                        ).fetchone()[0] or ""
    coded = move_codes(text, n) if n else (np.empty(0, np.int32), [])
    del text
    if coded is not None:
        ranks, names = coded
        same = pids[1:] == pids[:-1]
        if np.all((pids[1:] > pids[:-1]) | (same & (ranks[1:] > ranks[:-1]))):
            columns = dict(zip([name for name, _sql in ints], int_columns))
            ponder = ponder_names = None
            if "ponder" in extra:
                text = conn.execute(
                    "SELECT group_concat(p, ' ') FROM "
                    f"(SELECT coalesce(m.ponder, '') AS p {order})").fetchone()[0] or ""
                coded = move_codes(text, n) if n else (np.empty(0, np.int32), [])
                del text
                if coded is None:  # unusual text: one Python string per row
                    coded = _text_ranks([p for (p,) in conn.execute(
                        f"SELECT coalesce(m.ponder, '') {order}")])
                ponder, ponder_names = coded
                ponder[columns["ponder_null"] == 1] = -1
            return _move_columns(pids, ranks, names, child, values, extra, rows, columns,
                                 ponder, ponder_names)
    del pids, child, int_columns
    # Unusual move text: one Python tuple per row.
    plain = [(name, "m.count" if name == "count" else sql) for name, sql in ints
             if name != "ponder_null"]
    sqls = [sql for _name, sql in plain]
    names_ = [name for name, _sql in plain]
    if "ponder" in extra:
        sqls.append("m.ponder")
    table = conn.execute(f"SELECT m.position_id, m.move, m.child_id"
                         f"{''.join(', ' + sql for sql in sqls)} {order}").fetchall()
    ranks, names = _text_ranks([r[1] for r in table])

    def column(i: int) -> np.ndarray:
        return np.array([NULL if r[i] is None else int(r[i]) for r in table], dtype=np.int64)

    pids = column(0)
    order_ = np.lexsort((ranks, pids))
    columns = {name: column(3 + i)[order_] for i, name in enumerate(names_)}
    ponder = ponder_names = None
    if "ponder" in extra:
        texts = [r[-1] for r in table]
        ponder, ponder_names = _text_ranks([t for t in texts if t is not None])
        full = np.full(len(texts), -1, dtype=np.int32)
        full[[i for i, t in enumerate(texts) if t is not None]] = ponder
        ponder = full[order_]
    return _move_columns(pids[order_], ranks[order_], names, column(2)[order_], values, extra,
                         rows, columns, ponder, ponder_names)


def _move_columns(pids: np.ndarray, ranks: np.ndarray, names: list[str], child: np.ndarray,
                  values: Sequence[ValueColumn], extra: Collection[str], rows: MoveRows,
                  columns: dict[str, np.ndarray], ponder: np.ndarray | None,
                  ponder_names: list[str] | None) -> MoveColumns:
    own = None
    if "own" in extra:
        own = columns["own"] == 1 if "own" in columns else np.ones(len(pids), dtype=bool)
    return MoveColumns(pids, ranks, names, child,
                       {v: columns[f"v{i}"] for i, v in enumerate(values)},
                       columns.get("count"), own, columns.get("depth"), ponder, ponder_names)
