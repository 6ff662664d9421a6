"""Book tables as numpy columns: SQLite aggregates, numpy parses.

:func:`sql_int_columns` reads integer columns of any query as int64 arrays
(:data:`bookgen.arrays.NULL` for an SQL NULL); :func:`load_move_columns`
reads the whole ``moves`` table, ordered by (position id, move), for
:class:`bookgen.store.index.BookIndex`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from bookgen.arrays import NULL

__all__ = ["load_move_columns", "move_codes", "sql_int_columns"]

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


def load_move_columns(conn: sqlite3.Connection, values: bool = True
                ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None,
                           np.ndarray | None, np.ndarray]:
    """Every moves row ordered by (position id, move): position ids, move ranks
    (indices into the sorted move names), move names, values (minimax when
    present) and counts (None unless ``values``) and child ids."""
    order = "FROM moves ORDER BY position_id, move"
    pids, child = sql_int_columns(conn, f"SELECT position_id, child_id {order}",
                                  ["position_id", "child_id"])
    text = conn.execute(f"SELECT group_concat(move, ' ') FROM (SELECT move {order})"
                        ).fetchone()[0] or ""
    coded = move_codes(text, len(pids)) if len(pids) else (np.empty(0, np.int32), [])
    del text
    if coded is not None:
        ranks, names = coded
        same = pids[1:] == pids[:-1]
        if np.all((pids[1:] > pids[:-1]) | (same & (ranks[1:] > ranks[:-1]))):
            value = count = None
            if values:
                value, count = sql_int_columns(
                    conn, f"SELECT coalesce(minimax_value, value) AS v, count {order}",
                    ["v", "count"])
            return pids, ranks, names, value, count, child
    del pids, child
    # Unusual move text: one Python tuple per row.
    rows = conn.execute("SELECT position_id, move, coalesce(minimax_value, value), count, "
                        f"child_id {order}").fetchall()
    names = sorted({row[1] for row in rows})
    rank = {name: i for i, name in enumerate(names)}

    def column(i: int) -> np.ndarray:
        return np.array([NULL if r[i] is None else int(r[i]) for r in rows], dtype=np.int64)

    pids = column(0)
    ranks = np.array([rank[r[1]] for r in rows], dtype=np.int32)
    order_ = np.lexsort((ranks, pids))
    value, count = (column(2)[order_], column(3)[order_]) if values else (None, None)
    return pids[order_], ranks[order_], names, value, count, column(4)[order_]
