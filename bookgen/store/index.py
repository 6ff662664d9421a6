"""The book read into memory: positions and their moves as numpy columns.

:class:`BookIndex` holds every position (rows in id order) and the ``moves``
rows an :class:`IndexSpec` asks for as edges in CSR form, with their child
rows. It is the one read model of the book: it answers the selections of
``refine search`` (all, leaves, principal lines), the lines ``refine
mistakes`` prints, what ``starts`` cuts (shortest lines from the initial
position, principal lines, values and counts), the suites' walk and the
distributions of ``stats`` and ``report``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from bookgen.arrays import NULL, find_rows, ranges
from bookgen.position import STARTPOS_SFEN
from bookgen.store.book import Book
from bookgen.store.columns import (
    EDGE_COLUMNS,
    POSITION_COLUMNS,
    load_move_columns,
    load_position_columns,
    load_sfens,
)
from bookgen.store.links import resolve_children
from bookgen.store.own_moves import MoveRows, ValueColumn
from bookgen.store.stored_links import links_complete

__all__ = ["BookEdge", "BookIndex", "IndexSpec"]


class BookEdge(NamedTuple):
    move: str
    value: int | None          # the index's value column (IndexSpec.values[0])
    count: int  # type: ignore[assignment]  # shadows tuple.count, as BookMove.count does
    child: int | None          # child position id, when the child is in the book


@dataclass(frozen=True)
class IndexSpec:
    """What :meth:`BookIndex.load` reads. The defaults are what ``refine search``,
    ``refine mistakes`` and ``starts`` read: every ``moves`` row (refine
    minimax's transposition rows are edges too), minimax values, counts, child
    links resolved by playing the unlinked moves.

    - ``positions``: the position columns (keys of
      :data:`bookgen.store.columns.POSITION_COLUMNS`: ``ply``, ``turn``,
      ``visits``, ``value``, ``minimax_value``, ``expanded``, ``zobrist``);
    - ``rows``: the book's own moves or every row
      (:class:`~bookgen.store.own_moves.MoveRows`);
    - ``values``: the value columns of the moves, the first being the index's
      value (:attr:`BookIndex.edge_value`, used by :meth:`BookIndex.best_edge`,
      :meth:`BookIndex.principal` and :meth:`BookIndex.book_score`); empty:
      no values;
    - ``edges``: more move columns (of
      :data:`bookgen.store.columns.EDGE_COLUMNS`): ``count``, ``own`` (the
      mask of the book's own moves among every row), ``depth``, ``ponder``;
    - ``resolve_children``: find the child of each move without a stored link
      by playing it (else such moves have no child);
    - ``sfens``: read every sfen at once (else :attr:`BookIndex.sfen` reads
      them one by one, from the still open book);
    - ``workers``: processes playing the unlinked moves of large books.
    """

    positions: frozenset[str] = frozenset({"ply", "visits", "minimax_value"})
    rows: MoveRows = MoveRows.ALL
    values: tuple[ValueColumn, ...] = (ValueColumn.MINIMAX,)
    edges: frozenset[str] = frozenset({"count"})
    resolve_children: bool = True
    sfens: bool = False
    workers: int = 1

    def __post_init__(self) -> None:
        unknown = (set(self.positions) - set(POSITION_COLUMNS)) | (
            set(self.edges) - set(EDGE_COLUMNS))
        if unknown:
            raise ValueError(f"unknown index columns: {', '.join(sorted(unknown))}")
        if len(set(self.values)) != len(self.values):
            raise ValueError("a value column is named twice")


class BookIndex:
    """Positions with their book moves and child links, read once from the book
    into numpy columns.

    Positions are rows ``0..N-1`` in id order (``ids``), with the position
    columns the spec asks for (:meth:`column`). Their moves (the spec's
    ``rows``) are edges in CSR form: the edges of row ``r`` are
    ``indptr[r]:indptr[r + 1]``, ordered by move, with the move as an index
    into the sorted ``move_names``, the child row (``edge_child``, -1 when the
    child is not in the book), whether the row stores its child
    (``edge_linked``) and the columns asked for: values (``edge_values``,
    ``edge_value`` the first; :data:`NULL` for none), ``edge_count``,
    ``edge_own``, ``edge_depth`` and ``edge_ponder`` (an index into
    ``ponder_names``, -1 for none); None when not read. Moves without a stored
    child link (books imported before stored links) get their child by playing
    the move and finding the position by its zobrist key, confirmed by the
    exact position; nothing is written. A book whose links are complete
    (:mod:`bookgen.store.stored_links`) and whose every position has moves
    needs none of that.

    ``sfen``, ``ply``, ``visits``, ``minimax`` and ``edges`` are read-only
    mappings by position id (``sfen`` reads the book, which must still be
    open, unless the sfens were read with the index).
    """

    def __init__(self, conn: sqlite3.Connection, spec: IndexSpec, ids: np.ndarray,
                 columns: dict[str, np.ndarray], indptr: np.ndarray, move_names: list[str],
                 edge_move: np.ndarray, edge_child: np.ndarray, edge_linked: np.ndarray,
                 edge_values: dict[ValueColumn, np.ndarray], start: int, *,
                 edge_count: np.ndarray | None = None, edge_own: np.ndarray | None = None,
                 edge_depth: np.ndarray | None = None, edge_ponder: np.ndarray | None = None,
                 ponder_names: list[str] | None = None, sfens: list[str] | None = None
                 ) -> None:
        self.spec = spec
        self.ids = ids
        self.columns = columns
        self.indptr = indptr
        self.move_names = move_names
        self.edge_move = edge_move
        self.edge_child = edge_child
        self.edge_linked = edge_linked      # the moves row has its child_id stored
        self.edge_values = edge_values
        self.edge_value = edge_values[spec.values[0]] if spec.values else None
        self.edge_count = edge_count
        self.edge_own = edge_own
        self.edge_depth = edge_depth
        self.edge_ponder = edge_ponder
        self.ponder_names = ponder_names
        self.start = start                  # row of the initial position, -1 if absent
        self.degree = np.diff(indptr)       # moves per row
        self.has_moves = self.degree > 0
        self._sfens = sfens
        self.sfen: Mapping[int, str] = _SfenLookup(self, conn)
        self.edges: Mapping[int, list[BookEdge]] = _EdgeLookup(self)

    @classmethod
    def load(cls, book: Book | sqlite3.Connection, spec: IndexSpec = IndexSpec()
             ) -> BookIndex:
        """Read the index ``spec`` describes from ``book`` (a :class:`Book` or a
        connection to one), in one read transaction."""
        conn = book.conn if isinstance(book, Book) else book
        own = not conn.in_transaction
        if own:  # one snapshot of the book for all the queries
            conn.execute("BEGIN")
        try:
            return cls._load(conn, spec)
        finally:
            if own and conn.in_transaction:
                conn.execute("COMMIT")

    @classmethod
    def _load(cls, conn: sqlite3.Connection, spec: IndexSpec) -> BookIndex:
        ids, columns = load_position_columns(conn, spec.positions)
        moves = load_move_columns(conn, spec.rows, spec.values, spec.edges)
        rows, known = find_rows(ids, moves.pids)
        if not known.all():  # moves of positions missing from the book: ignored
            rows, moves = rows[known], moves.take(known)
        child_ids = moves.child
        moves.pids = moves.child = np.empty(0, dtype=np.int64)
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
        sfens = load_sfens(conn) if spec.sfens else None
        if sfens is not None and len(sfens) != len(ids):
            raise RuntimeError("the book changed while it was read")
        index = cls(conn, spec, ids, columns, indptr, moves.names, moves.move, child, linked,
                    moves.values, start_row, edge_count=moves.count, edge_own=moves.own,
                    edge_depth=moves.depth, edge_ponder=moves.ponder,
                    ponder_names=moves.ponder_names, sfens=sfens)
        # A book whose links are complete and whose every position has moves has no
        # unlinked move into a book position: nothing to resolve.
        if spec.resolve_children and not linked.all() and not (
                index.has_moves.all() and links_complete(conn)):
            resolve_children(conn, index, rows, spec.workers)
        return index

    # -- columns --------------------------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """The position column ``name`` by row (:data:`NULL` for an SQL NULL)."""
        try:
            return self.columns[name]
        except KeyError:
            raise ValueError(f"BookIndex loaded without the position column {name!r}"
                             ) from None

    @property
    def ply(self) -> Mapping[int, int | None]:
        return _ColumnLookup(self, self.column("ply"))

    @property
    def visits(self) -> Mapping[int, int | None]:
        return _ColumnLookup(self, self.column("visits"))

    @property
    def minimax(self) -> Mapping[int, int]:
        return _ColumnLookup(self, self.column("minimax_value"), skip_null=True)

    def sfens(self) -> list[str]:
        """The sfen of every row (read with the index: ``IndexSpec(sfens=True)``)."""
        if self._sfens is None:
            raise ValueError("BookIndex loaded without sfens")
        return self._sfens

    def value_column(self, values: ValueColumn | None = None) -> np.ndarray:
        """The edges' value column ``values`` (default: the index's value)."""
        if values is None and self.spec.values:
            values = self.spec.values[0]
        if values is None or values not in self.edge_values:
            raise ValueError(f"BookIndex loaded without {values or 'values'}")
        return self.edge_values[values]

    def own_mask(self) -> np.ndarray:
        """Which edges are the book's own moves (IndexSpec ``edges`` with ``own``, or
        ``rows`` OWN)."""
        if self.edge_own is None:
            if self.spec.rows == MoveRows.OWN:
                return np.ones(len(self.edge_move), dtype=bool)
            raise ValueError("BookIndex loaded without the own moves mask")
        return self.edge_own

    def edge_rows(self) -> np.ndarray:
        """The row (source position) of each edge."""
        return np.repeat(np.arange(len(self.ids), dtype=np.int32), self.degree)

    # -- lookups ------------------------------------------------------------

    def row(self, pid: int | np.integer) -> int | None:
        """The row of position ``pid``, None if it is not in the book."""
        rows, found = find_rows(self.ids, np.array([pid], dtype=np.int64))
        return int(rows[0]) if found[0] else None

    def rows(self, pids: np.ndarray) -> np.ndarray:
        """Rows of the positions ``pids`` (all in the book)."""
        return find_rows(self.ids, pids)[0]

    def _edge_objects(self, row: int) -> list[BookEdge]:
        edge_value = self.value_column()
        if self.edge_count is None:
            raise ValueError("BookIndex loaded without counts")
        edges = []
        for e in range(int(self.indptr[row]), int(self.indptr[row + 1])):
            value = int(edge_value[e])
            child = int(self.edge_child[e])
            edges.append(BookEdge(self.move_names[self.edge_move[e]],
                                  None if value == NULL else value, int(self.edge_count[e]),
                                  None if child < 0 else int(self.ids[child])))
        return edges

    def with_moves_rows(self) -> np.ndarray:
        """Rows with book moves, shallow first (unknown ply last), then by id."""
        rows = np.flatnonzero(self.has_moves)
        ply = self.column("ply")[rows]
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
        minimax = self.column("minimax_value")
        if minimax[row] != NULL:
            return int(minimax[row])
        values = self.value_column()[self.indptr[row]:self.indptr[row + 1]]
        values = values[values != NULL]
        return int(values.max()) if len(values) else None

    def best_edge(self, pid: int) -> BookEdge | None:
        row = self.row(pid)
        edges = [e for e in self._edge_objects(row) if e.value is not None] if row is not None \
            else []
        if not edges:
            return None
        return max(edges, key=lambda e: (e.value, e.count, e.move))

    def best_values(self, own_only: bool = False, values: ValueColumn | None = None
                    ) -> np.ndarray:
        """Each row's best move value (:data:`NULL` when it has no move with a value),
        of the value column ``values`` (default: the index's value); ``own_only``:
        over the book's own moves only (:meth:`own_mask`)."""
        column = self.value_column(values)
        if own_only:
            column = np.where(self.own_mask(), column, NULL)
        best = np.full(len(self.ids), NULL, dtype=np.int64)
        rows = np.flatnonzero(self.has_moves)
        if len(rows):  # NULL is the smallest int64: max() skips it
            best[rows] = np.maximum.reduceat(column, self.indptr[rows])
        return best

    def total_counts(self) -> np.ndarray:
        """Each row's sum of its moves' counts (0 when it has no move)."""
        if self.edge_count is None:
            raise ValueError("BookIndex loaded without counts")
        total = np.zeros(len(self.ids), dtype=np.int64)
        rows = np.flatnonzero(self.has_moves)
        if len(rows):
            total[rows] = np.add.reduceat(self.edge_count, self.indptr[rows])
        return total

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
        has_inner[self.edge_rows()[inner]] = True
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
            value = self.value_column()[edges]
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
        row = self._row(pid)
        if self._index._sfens is not None:
            return self._index._sfens[row]
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
