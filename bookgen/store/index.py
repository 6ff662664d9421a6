"""The book read into memory: positions and their moves as numpy columns.

:class:`BookIndex` holds every position (rows in id order) and every
``moves`` row as an edge in CSR form, with its child row. It answers the
selections of ``refine search`` (all, leaves, principal lines), the lines
``refine mistakes`` prints and what ``starts`` cuts (shortest lines from the
initial position, principal lines).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from bookgen.arrays import NULL, find_rows, ranges
from bookgen.position import STARTPOS_SFEN
from bookgen.store.book import Book
from bookgen.store.columns import load_move_columns, sql_int_columns
from bookgen.store.links import resolve_children

__all__ = ["BookEdge", "BookIndex"]


class BookEdge(NamedTuple):
    move: str
    value: int | None          # minimax_value when present, else value
    count: int  # type: ignore[assignment]  # shadows tuple.count, as BookMove.count does
    child: int | None          # child position id, when the child is in the book



class BookIndex:
    """Positions with their book moves and child links, read once from the book
    into numpy columns.

    Positions are rows ``0..N-1`` in id order (``ids``); their moves are edges
    in CSR form (the edges of row ``r`` are ``indptr[r]:indptr[r + 1]``,
    ordered by move), with the move as an index into the sorted
    ``move_names``, the value (``minimax_value`` when present, else
    ``value``; :data:`NULL` for none), the count and the child row (-1 when
    the child is not in the book). Moves without a stored child link
    (imported books) get their child by playing the move and finding the
    position by its zobrist key, confirmed by the exact position; nothing is
    written.

    ``sfen``, ``ply``, ``visits``, ``minimax`` and ``edges`` are read-only
    mappings by position id (``sfen`` reads the book, which must still be
    open).
    """

    def __init__(self, conn: sqlite3.Connection, ids: np.ndarray, ply: np.ndarray,
                 visits: np.ndarray, minimax: np.ndarray, indptr: np.ndarray,
                 move_names: list[str], edge_move: np.ndarray, edge_value: np.ndarray | None,
                 edge_count: np.ndarray | None, edge_child: np.ndarray,
                 edge_linked: np.ndarray,
                 start: int) -> None:
        self.ids = ids
        self.ply_column = ply
        self.visits_column = visits
        self.minimax_column = minimax
        self.indptr = indptr
        self.move_names = move_names
        self.edge_move = edge_move
        self.edge_value = edge_value
        self.edge_count = edge_count
        self.edge_child = edge_child
        self.edge_linked = edge_linked      # the moves row has its child_id stored
        self.start = start                  # row of the initial position, -1 if absent
        self.degree = np.diff(indptr)       # moves per row
        self.has_moves = self.degree > 0
        self.sfen: Mapping[int, str] = _SfenLookup(self, conn)
        self.ply: Mapping[int, int | None] = _ColumnLookup(self, ply)
        self.visits: Mapping[int, int | None] = _ColumnLookup(self, visits)
        self.minimax: Mapping[int, int] = _ColumnLookup(self, minimax, skip_null=True)
        self.edges: Mapping[int, list[BookEdge]] = _EdgeLookup(self)

    @classmethod
    def load(cls, book: Book, values: bool = True, workers: int = 1) -> BookIndex:
        """Read the index from ``book`` (in one read transaction). ``values`` False
        leaves the move values and counts out (``edge_value`` and ``edge_count`` are
        None): enough for :meth:`shortest_tree`, :meth:`roots` and :meth:`leaves`.
        ``workers`` > 1 plays the unlinked moves of large books on that many forked
        processes."""
        conn = book.conn
        own = not conn.in_transaction
        if own:  # one snapshot of the book for all the queries
            conn.execute("BEGIN")
        try:
            return cls._load(conn, values, workers)
        finally:
            if own and conn.in_transaction:
                conn.execute("COMMIT")

    @classmethod
    def _load(cls, conn: sqlite3.Connection, values: bool, workers: int) -> BookIndex:
        ids, ply, visits, minimax = sql_int_columns(
            conn, "SELECT id, ply, visits, minimax_value FROM positions ORDER BY id",
            ["id", "ply", "visits", "minimax_value"])
        if np.any(ids[1:] <= ids[:-1]):
            order = np.argsort(ids, kind="stable")
            ids, ply, visits, minimax = ids[order], ply[order], visits[order], minimax[order]
        pids, move, names, value, count, child_ids = load_move_columns(conn, values)
        rows, known = find_rows(ids, pids)
        del pids
        if not known.all():  # moves of positions missing from the book: ignored
            rows, move, child_ids = rows[known], move[known], child_ids[known]
            if value is not None and count is not None:
                value, count = value[known], count[known]
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(ids)), out=indptr[1:])
        linked = child_ids != NULL
        child = np.full(len(child_ids), -1, dtype=np.int32)
        found, inside = find_rows(ids, child_ids[linked])
        child[np.flatnonzero(linked)[inside]] = found[inside]
        del child_ids, found, inside
        start = conn.execute("SELECT id FROM positions WHERE sfen = ?",
                             (STARTPOS_SFEN,)).fetchone()
        start_row = int(find_rows(ids, np.array([start[0]]))[0][0]) if start else -1
        index = cls(conn, ids, ply, visits, minimax, indptr, names, move, value, count,
                    child, linked, start_row)
        if not linked.all():
            resolve_children(conn, index, rows, workers)
        return index

    # -- lookups ------------------------------------------------------------

    def row(self, pid: int | np.integer) -> int | None:
        """The row of position ``pid``, None if it is not in the book."""
        rows, found = find_rows(self.ids, np.array([pid], dtype=np.int64))
        return int(rows[0]) if found[0] else None

    def rows(self, pids: np.ndarray) -> np.ndarray:
        """Rows of the positions ``pids`` (all in the book)."""
        return find_rows(self.ids, pids)[0]

    def _values(self) -> tuple[np.ndarray, np.ndarray]:
        if self.edge_value is None or self.edge_count is None:
            raise ValueError("BookIndex loaded without values")
        return self.edge_value, self.edge_count

    def _edge_objects(self, row: int) -> list[BookEdge]:
        edge_value, edge_count = self._values()
        edges = []
        for e in range(int(self.indptr[row]), int(self.indptr[row + 1])):
            value = int(edge_value[e])
            child = int(self.edge_child[e])
            edges.append(BookEdge(self.move_names[self.edge_move[e]],
                                  None if value == NULL else value, int(edge_count[e]),
                                  None if child < 0 else int(self.ids[child])))
        return edges

    def with_moves_rows(self) -> np.ndarray:
        """Rows with book moves, shallow first (unknown ply last), then by id."""
        rows = np.flatnonzero(self.has_moves)
        ply = self.ply_column[rows]
        unknown = ply == NULL
        return rows[np.lexsort((rows, np.where(unknown, 0, ply), unknown))]

    def with_moves(self) -> list[int]:
        """Positions with book moves, shallow first (unknown ply last), then by id."""
        return self.ids[self.with_moves_rows()].tolist()

    def book_score(self, pid: int) -> int | None:
        """The book's value for the side to move: minimax when present, else the best move's."""
        row = self.row(pid)
        if row is None:
            return None
        if self.minimax_column[row] != NULL:
            return int(self.minimax_column[row])
        values = self._values()[0][self.indptr[row]:self.indptr[row + 1]]
        values = values[values != NULL]
        return int(values.max()) if len(values) else None

    def best_edge(self, pid: int) -> BookEdge | None:
        row = self.row(pid)
        edges = [e for e in self._edge_objects(row) if e.value is not None] if row is not None \
            else []
        if not edges:
            return None
        return max(edges, key=lambda e: (e.value, e.count, e.move))

    def _edge_sources(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.ids), dtype=np.int32), np.diff(self.indptr))

    def best_values(self) -> np.ndarray:
        """Each row's best move value (:data:`NULL` when it has no move with a value)."""
        best = np.full(len(self.ids), NULL, dtype=np.int64)
        rows = np.flatnonzero(self.has_moves)
        if len(rows):  # NULL is the smallest int64: max() skips it
            best[rows] = np.maximum.reduceat(self._values()[0], self.indptr[rows])
        return best

    def root_rows(self) -> np.ndarray:
        """Rows of :meth:`roots`."""
        reached = np.zeros(len(self.ids), dtype=bool)
        reached[self.edge_child[self.edge_child >= 0]] = True
        rows = self.with_moves_rows()
        roots = rows[~reached[rows]]
        if self.start >= 0 and self.has_moves[self.start] and reached[self.start]:
            roots = np.concatenate([[self.start], roots])
        return roots

    def roots(self) -> list[int]:
        """The initial position (if in the book) and the positions with moves that no
        book move leads to."""
        return self.ids[self.root_rows()].tolist()

    def leaf_rows(self) -> np.ndarray:
        """Rows of :meth:`leaves`."""
        inner = self.edge_child >= 0
        inner[inner] = self.has_moves[self.edge_child[inner]]
        has_inner = np.zeros(len(self.ids), dtype=bool)
        has_inner[self._edge_sources()[inner]] = True
        rows = self.with_moves_rows()
        return rows[~has_inner[rows]]

    def leaves(self) -> list[int]:
        """Positions with moves none of whose moves leads to a position with moves."""
        return self.ids[self.leaf_rows()].tolist()

    def principal_rows(self, margin: int) -> np.ndarray:
        """Rows of :meth:`principal`."""
        roots = self.root_rows()
        seen = np.zeros(len(self.ids), dtype=bool)
        seen[roots] = True
        best = self.best_values()
        levels = [roots]
        frontier = roots
        while len(frontier):
            edges = ranges(self.indptr[frontier], self.indptr[frontier + 1])
            owner = np.repeat(np.arange(len(frontier)), self.degree[frontier])
            # A node's edges in the book's order: linked moves, then the others.
            order = np.argsort(owner * 2 + ~self.edge_linked[edges], kind="stable")
            edges, owner = edges[order], owner[order]
            top = best[frontier][owner]
            value = self._values()[0][edges]
            child = self.edge_child[edges]
            follow = (top == NULL) | ((value != NULL) & (value >= top - margin))
            follow &= child >= 0
            follow[follow] = self.has_moves[child[follow]] & ~seen[child[follow]]
            child = child[follow]
            _unique, first = np.unique(child, return_index=True)
            frontier = child[np.sort(first)]
            seen[frontier] = True
            levels.append(frontier)
        return np.concatenate(levels)

    def principal(self, margin: int) -> list[int]:
        """Breadth first from the roots along every move within ``margin`` of the best."""
        return self.ids[self.principal_rows(margin)].tolist()

    def shortest_tree(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The shortest book lines from the initial position, as a tree over rows:
        (parent row, move index into ``move_names``, depth), -1 where a row is not
        reached. Breadth first; at equal depth the first parent, in order, with the
        first move by name wins."""
        n = len(self.ids)
        parent = np.full(n, -1, dtype=np.int32)
        move = np.full(n, -1, dtype=np.int32)
        depth = np.full(n, -1, dtype=np.int32)
        if self.start < 0:
            return parent, move, depth
        depth[self.start] = 0
        frontier = np.array([self.start], dtype=np.int64)
        level = 0
        while len(frontier):
            edges = ranges(self.indptr[frontier], self.indptr[frontier + 1])
            child = self.edge_child[edges]
            new = child >= 0
            new[new] = depth[child[new]] < 0
            edges, child = edges[new], child[new]
            _unique, first = np.unique(child, return_index=True)
            first.sort()
            edges, frontier = edges[first], child[first].astype(np.int64)
            level += 1
            parent[frontier] = np.searchsorted(self.indptr, edges, side="right") - 1
            move[frontier] = self.edge_move[edges]
            depth[frontier] = level
        return parent, move, depth

    def paths_from_start(self) -> Mapping[int, list[str]]:
        """The shortest book line (USI moves) from the initial position to each position
        reachable from it (a read-only mapping by position id)."""
        return _PathLookup(self, *self.shortest_tree())


class _RowMapping(Mapping):
    """A read-only mapping by position id over some rows of a BookIndex."""

    def __init__(self, index: BookIndex) -> None:
        self._index = index

    def _row(self, pid: Any) -> int:
        row = self._index.row(pid) if isinstance(pid, (int, np.integer)) else None
        if row is None or not self._has(row):
            raise KeyError(pid)
        return row

    def _has(self, row: int) -> bool:
        return True

    def _rows(self) -> np.ndarray:
        return np.arange(len(self._index.ids))

    def __contains__(self, pid: object) -> bool:
        try:
            self._row(pid)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(self._index.ids[self._rows()].tolist())

    def __len__(self) -> int:
        return len(self._rows())


class _ColumnLookup(_RowMapping):
    def __init__(self, index: BookIndex, column: np.ndarray, skip_null: bool = False) -> None:
        super().__init__(index)
        self._column = column
        self._skip_null = skip_null

    def _has(self, row: int) -> bool:
        return not self._skip_null or self._column[row] != NULL

    def _rows(self) -> np.ndarray:
        if self._skip_null:
            return np.flatnonzero(self._column != NULL)
        return super()._rows()

    def __getitem__(self, pid: int) -> int | None:
        value = int(self._column[self._row(pid)])
        return None if value == NULL else value


class _SfenLookup(_RowMapping):
    def __init__(self, index: BookIndex, conn: sqlite3.Connection) -> None:
        super().__init__(index)
        self._conn = conn

    def __getitem__(self, pid: int) -> str:
        self._row(pid)
        return self._conn.execute("SELECT sfen FROM positions WHERE id = ?",
                                  (int(pid),)).fetchone()[0]


class _EdgeLookup(_RowMapping):
    def _has(self, row: int) -> bool:
        return bool(self._index.has_moves[row])

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._index.has_moves)

    def __getitem__(self, pid: int) -> list[BookEdge]:
        return self._index._edge_objects(self._row(pid))


class _PathLookup(_RowMapping):
    def __init__(self, index: BookIndex, parent: np.ndarray, move: np.ndarray,
                 depth: np.ndarray) -> None:
        super().__init__(index)
        self._parent, self._move, self._depth = parent, move, depth

    def _has(self, row: int) -> bool:
        return bool(self._depth[row] >= 0)

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._depth >= 0)

    def __getitem__(self, pid: int) -> list[str]:
        row = self._row(pid)
        line = []
        while self._parent[row] >= 0:
            line.append(self._index.move_names[self._move[row]])
            row = int(self._parent[row])
        return line[::-1]
