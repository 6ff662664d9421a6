"""The book's own moves: which ``moves`` rows are book moves, defined once.

``refine minimax`` stores the transposition edges the book does not hold as
``moves`` rows of its own: no value, no depth, count 0, the ``run_id`` of a
``refine minimax`` run (:data:`REFINE_MINIMAX_COMMAND`); imports and merges
store the same rows under a ``link`` run of their own (:data:`LINK_COMMAND`,
see :mod:`bookgen.store.stored_links`). They are derived data, not book moves.
Every read of the ``moves`` table in the store says which rows it means
(:class:`MoveRows`: the book's own moves, or all rows) and, where it reads
values, which column (:class:`ValueColumn`).

The SQL of that rule is private to :mod:`bookgen.store`; code elsewhere calls
the store's functions. SQL written outside bookgen (tests, notebooks) can
read a temporary view of the own moves (:func:`create_own_moves_view`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from enum import StrEnum

__all__ = ["LINK_COMMAND", "LINK_ROW_COMMANDS", "REFINE_MINIMAX_COMMAND", "MoveRows",
           "ValueColumn", "create_own_moves_view"]

REFINE_MINIMAX_COMMAND = "refine minimax"
LINK_COMMAND = "link"   # the run of an import or merge that stored the book's links
# The runs whose count-0 rows without value and depth are transposition rows.
LINK_ROW_COMMANDS = (REFINE_MINIMAX_COMMAND, LINK_COMMAND)


class MoveRows(StrEnum):
    """Which ``moves`` rows a read means."""

    OWN = "own"   # the book's own moves: refine minimax's transposition rows left out
    ALL = "all"   # every row, transposition rows included


class ValueColumn(StrEnum):
    """Which value of a move a read means."""

    RAW = "raw"          # moves.value: the book's own value
    MINIMAX = "minimax"  # coalesce(minimax_value, value): refine minimax's when it has one


def _transposition_row(schema: str = "main", run_ids: Sequence[int] | None = None) -> str:
    """SQL true for a ``moves`` row (alias ``m``) that ``refine minimax`` (or an
    import's or merge's ``link`` run) added for a transposition edge, in the book
    attached as ``schema`` (``run_ids``: the ids of those runs, as
    :func:`link_run_ids` read them, written into the SQL instead of a subquery)."""
    commands = ", ".join(f"'{command}'" for command in LINK_ROW_COMMANDS)
    runs = (f"SELECT id FROM {schema}.runs WHERE command IN ({commands})" if run_ids is None
            else ", ".join(str(int(run)) for run in run_ids))
    return ("(m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT NULL "
            f"AND m.run_id IN ({runs}))")


def link_run_ids(conn: sqlite3.Connection) -> list[int]:
    """For the store only: the ids of the runs whose rows may be transposition rows
    (integers; read in the transaction of the query they go into)."""
    marks = ", ".join("?" * len(LINK_ROW_COMMANDS))
    return [int(run) for (run,) in conn.execute(
        f"SELECT id FROM runs WHERE command IN ({marks})",
        LINK_ROW_COMMANDS)]


def own_rows_sql(schema: str = "main", run_ids: Sequence[int] | None = None) -> str:
    """For the store's SQL only: a condition on a ``moves`` row aliased ``m``
    that is true for the book's own moves (of the book attached as ``schema``;
    ``run_ids`` as for the transposition rows)."""
    return f"NOT {_transposition_row(schema, run_ids)}"


def transposition_row_sql(run_ids: Sequence[int]) -> str:
    """For the store's SQL only: true for a transposition row (``moves`` aliased ``m``)
    of the runs ``run_ids`` (:func:`link_run_ids`)."""
    return _transposition_row(run_ids=run_ids)


def value_sql(values: ValueColumn, alias: str = "m.") -> str:
    """For the store's SQL only: the value column ``values`` of a ``moves`` row
    (``alias`` prefixes the columns, ``"m."`` or ``""``)."""
    if values == ValueColumn.MINIMAX:
        return f"coalesce({alias}minimax_value, {alias}value)"
    return f"{alias}value"


def create_own_moves_view(conn: sqlite3.Connection, name: str = "own_moves") -> str:
    """Create the temporary view ``name`` (``moves`` without refine minimax's
    transposition rows) on ``conn``, a connection opened for writing (SQLite
    keeps the view in the connection's temporary schema, never in the file);
    returns ``name``."""
    conn.execute(f"CREATE TEMP VIEW IF NOT EXISTS {name} AS "
                 f"SELECT m.* FROM main.moves m WHERE {own_rows_sql()}")
    return name
