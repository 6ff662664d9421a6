"""``bookgen stats``: the size of a book and the distributions its users publish.

dlshogi's author describes his books with pandas ``describe()`` tables of the
ply of book positions and of the best move's value, separately for black and
white to move; the same tables are computed here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from bookgen.store import DEFAULT_BOOK, Book, MoveRows, queries

DESCRIBE_KEYS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


def _describe(series: pd.Series) -> dict[str, float | None]:
    described = series.dropna().astype(float).describe()
    result: dict[str, float | None] = {}
    for key in DESCRIBE_KEYS:
        value = float(described[key]) if key in described else math.nan
        result[key] = None if math.isnan(value) else value
    result["count"] = float(series.dropna().shape[0])
    return result


def book_stats(book: str | Path = DEFAULT_BOOK) -> dict[str, Any]:
    """Counts and describe() tables of ply and best value by side to move."""
    with Book(book, create=False, readonly=True) as store:
        conn = store.conn
        positions = store.count_positions()
        # The book's own moves: refine's transposition rows are left out.
        moves = store.count_moves(MoveRows.OWN)
        with_moves = queries.positions_with_moves(conn, MoveRows.OWN)
        # Book positions are those with moves; grown books also hold rows for
        # children not expanded yet (the frontier), which are not counted here.
        ply = pd.Series(queries.plies_of_positions_with_moves(conn, MoveRows.OWN), dtype=float)
        best = pd.DataFrame(queries.best_values_by_turn(conn, rows=MoveRows.OWN),
                            columns=["turn", "best"], dtype=float)
        runs = queries.count_runs(conn)
    return {
        "book": str(book),
        "positions": positions,
        "positions_with_moves": with_moves,
        "moves": moves,
        "runs": runs,
        "ply": _describe(ply),
        "value_black": _describe(best.loc[best["turn"] == 0, "best"]),
        "value_white": _describe(best.loc[best["turn"] == 1, "best"]),
    }


def format_stats(stats: dict[str, Any]) -> str:
    """The stats as text: counts, then one describe() column per distribution."""
    lines = [
        f"book:       {stats['book']}",
        f"positions:  {stats['positions']} ({stats['positions_with_moves']} with moves)",
        f"moves:      {stats['moves']}",
        f"runs:       {stats['runs']}",
        "",
    ]
    table = pd.DataFrame({name: stats[name] for name in ("ply", "value_black", "value_white")})
    table = table.reindex(list(DESCRIBE_KEYS))
    lines.append(table.to_string(float_format=lambda v: f"{v:.2f}", na_rep="-"))
    return "\n".join(lines)
