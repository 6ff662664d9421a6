"""``bookgen stats``: the size of a book and the distributions its users publish.

dlshogi's author describes his books with pandas ``describe()`` tables of the
ply of book positions and of the best move's value, separately for black and
white to move; the same tables are computed here, from the book's
:class:`~bookgen.store.index.BookIndex`. :func:`book_distributions` is shared
with the book part of ``bookgen report``.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bookgen.arrays import NULL
from bookgen.store import DEFAULT_BOOK, Book, ValueColumn, queries
from bookgen.store.index import BookIndex, IndexSpec

__all__ = ["DESCRIBE_KEYS", "BookDistributions", "BookStats", "book_distributions",
           "book_stats", "format_stats", "read_distributions"]

DESCRIBE_KEYS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")

# What the distributions read: every moves row (a position with only refine
# minimax's transposition rows has own moves too), the own mask, raw values.
DISTRIBUTIONS_SPEC = IndexSpec(positions=frozenset({"ply", "turn"}), values=(ValueColumn.RAW,),
                               edges=frozenset({"own"}), resolve_children=False)


@dataclass(frozen=True)
class BookDistributions:
    """The size of a book and the distributions of its positions with moves, in
    position id order (pandas sums in that order: the last bits of a mean
    depend on it).

    ``moves`` and ``positions_with_moves`` count the book's own moves (refine
    minimax's transposition rows left out); ``plies`` holds the known ply of
    every position with moves; ``values`` the best own move's raw value of
    every position with own moves that has a valued one, black to move and
    white to move.
    """

    positions: int
    positions_with_moves: int
    moves: int
    plies: list[int]
    values: tuple[list[int], list[int]]


def book_distributions(index: BookIndex) -> BookDistributions:
    """The distributions of ``index`` (read as :data:`DISTRIBUTIONS_SPEC` says)."""
    own = index.own_mask()
    own_rows = np.unique(index.edge_rows()[own])
    ply = index.column("ply")[index.has_moves]
    best = index.best_values(own_only=True, values=ValueColumn.RAW)
    valued = best != NULL
    turn = index.column("turn")
    return BookDistributions(
        positions=len(index.ids), positions_with_moves=len(own_rows), moves=int(own.sum()),
        plies=ply[ply != NULL].tolist(),
        values=(best[valued & (turn == 0)].tolist(), best[valued & (turn == 1)].tolist()))


def read_distributions(book: Book | sqlite3.Connection) -> BookDistributions:
    """The distributions of ``book`` (a :class:`Book` or a connection to one)."""
    return book_distributions(BookIndex.load(book, DISTRIBUTIONS_SPEC))


def _describe(values: list[int]) -> dict[str, float | None]:
    described = pd.Series(values, dtype=float).describe()
    result: dict[str, float | None] = {}
    for key in DESCRIBE_KEYS:
        value = float(described[key]) if key in described else math.nan
        result[key] = None if math.isnan(value) else value
    result["count"] = float(len(values))
    return result


@dataclass(frozen=True)
class BookStats:
    """What ``bookgen stats`` reports: counts (moves and positions with moves:
    the book's own moves; ``runs``: the commands that wrote the book,
    ``link_runs`` the runs of stored links its imports and merges added) and
    describe() tables (``DESCRIBE_KEYS``; None where undefined) of the ply and of
    the best move's value by side to move."""

    book: str
    positions: int
    positions_with_moves: int
    moves: int
    runs: int
    link_runs: int
    ply: dict[str, float | None]
    value_black: dict[str, float | None]
    value_white: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``bookgen stats --json``."""
        return {"book": self.book, "positions": self.positions,
                "positions_with_moves": self.positions_with_moves, "moves": self.moves,
                "runs": self.runs, "link_runs": self.link_runs, "ply": self.ply,
                "value_black": self.value_black, "value_white": self.value_white}


def book_stats(book: str | Path = DEFAULT_BOOK) -> BookStats:
    """Counts and describe() tables of ply and best value by side to move."""
    with Book(book, create=False, readonly=True) as store:
        # Book positions are those with moves; grown books also hold rows for
        # children not expanded yet (the frontier), which are not counted here.
        found = read_distributions(store)
        runs, link_runs = queries.count_runs(store.conn)
    black, white = found.values
    return BookStats(str(book), found.positions, found.positions_with_moves, found.moves, runs,
                     link_runs,
                     _describe(found.plies), _describe(black), _describe(white))


def format_stats(stats: BookStats) -> str:
    """The stats as text: counts, then one describe() column per distribution."""
    lines = [
        f"book:       {stats.book}",
        f"positions:  {stats.positions} ({stats.positions_with_moves} with moves)",
        f"moves:      {stats.moves}",
        f"runs:       {stats.runs}" + (f" (+{stats.link_runs} link)" if stats.link_runs
                                         else ""),
        "",
    ]
    table = pd.DataFrame({"ply": stats.ply, "value_black": stats.value_black,
                          "value_white": stats.value_white})
    table = table.reindex(list(DESCRIBE_KEYS))
    lines.append(table.to_string(float_format=lambda v: f"{v:.2f}", na_rep="-"))
    return "\n".join(lines)
