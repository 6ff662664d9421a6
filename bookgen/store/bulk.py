"""Bulk writes: rows straight into the book, in the caller's transaction.

Imports go through :class:`BulkWriter`, merges through :func:`attach_source`
and :func:`merge_attached`; :data:`MOVE_UPSERT_SQL` and
:data:`PLY_UPSERT_SQL` are the merge rules that import and merge share.

Both leave the book's links complete (:mod:`bookgen.store.stored_links`). A
load into an empty book keeps its moves as numpy columns until the end, finds
the links between the loaded positions, and inserts every ``moves`` row once,
in primary key order, with its ``child_id`` already set; the secondary
indexes ``positions_zobrist`` and ``moves_child`` are built after the rows.
"""

from __future__ import annotations

import os
import sqlite3
import time
from array import array
from functools import cache
from typing import TYPE_CHECKING, Any

from bookgen.signals import fault_point
from bookgen.store.book import BOOK_CACHE_KIB, Book
from bookgen.store.connection import readonly_uris
from bookgen.store.own_moves import LINK_COMMAND, own_rows_sql
from bookgen.store.queries import set_cache_size
from bookgen.store.schema import MIGRATIONS

if TYPE_CHECKING:
    import numpy as np

    from bookgen.store.stored_links import LinkCounts

# numpy, the legal moves and the links are imported where they are used: the store's
# package (and so every command's --help) loads no numpy.

__all__ = ["MOVE_UPSERT_SQL", "PLY_UPSERT_SQL", "BulkWriter", "attach_source", "merge_attached"]


# Merge rule shared by import and merge: an incoming move replaces the stored
# one only if it was searched deeper, or as deep with a greater count.
MOVE_UPSERT_SQL = """
    ON CONFLICT(position_id, move) DO UPDATE SET
        ponder = excluded.ponder, value = excluded.value, depth = excluded.depth,
        count = excluded.count, run_id = excluded.run_id
    WHERE coalesce(excluded.depth, -1) > coalesce(moves.depth, -1)
       OR (coalesce(excluded.depth, -1) = coalesce(moves.depth, -1)
           AND excluded.count > moves.count)
"""

PLY_UPSERT_SQL = """
    ON CONFLICT(sfen) DO UPDATE SET ply = CASE
        WHEN positions.ply IS NULL THEN excluded.ply
        WHEN excluded.ply IS NULL THEN positions.ply
        ELSE min(positions.ply, excluded.ply) END
"""


@cache
def _move16_of_usi() -> dict[str, int]:
    """cshogi's move16 of each USI move text."""
    import numpy as np

    from bookgen.store.legal_edges import move16_usi

    table = move16_usi(np.arange(1 << 16, dtype=np.uint16))
    return {text.decode(): code for code, text in enumerate(table.tolist()) if text}


def _schema_sql(kind: str, name: str) -> str:
    """The schema's CREATE statement of the index or trigger (``kind``) ``name``."""
    for step in MIGRATIONS:
        for statement in step:
            if statement.strip().startswith(f"CREATE {kind} {name} "):
                return statement
    raise KeyError(name)


class _MoveColumns:
    """Moves held back until the end of a load into an empty book: position id,
    move16, ponder (move16, 0: none), value, depth (:data:`NULL`: none), count."""

    def __init__(self) -> None:
        self.parts: list[list[np.ndarray | None]] = []

    def add(self, *columns: np.ndarray) -> None:
        self.parts.append(list(columns))

    def __len__(self) -> int:
        return sum(len(part[0]) for part in self.parts if part[0] is not None)

    def take(self) -> tuple[np.ndarray, ...]:
        """The columns, concatenated (and emptied here)."""
        import numpy as np

        parts, self.parts = self.parts, []
        if not parts:
            return (np.zeros(0, np.int64), np.zeros(0, np.uint16), np.zeros(0, np.uint16),
                    np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        columns = []
        for i in range(6):      # a column at a time, its parts freed as it is joined
            columns.append(np.concatenate([part[i] for part in parts]))
            for part in parts:
                part[i] = None
        return tuple(columns)


class BulkWriter:
    """Writes positions and moves straight into the book, in the caller's transaction.

    Used for imports: rows are buffered and written with ``executemany``;
    positions are matched by exact sfen (first within this load, then in the
    book), keep their minimum ply, and moves merge by the rule above. Call
    :meth:`finish` before committing (it leaves the book's links complete, on
    ``workers`` processes for large books); roll the transaction back to undo all.

    Into an empty book the moves are held as columns and written by
    :meth:`finish`, linked and in key order (the module docstring).
    """

    BATCH = 50_000
    HOLD = True   # hold an empty book's moves back (False: row by row, as into any book)
    HELD_CACHE_KIB = 64 << 10   # SQLite's page cache during a held load

    def __init__(self, book: Book, run_id: int, workers: int = 1) -> None:
        self.book = book
        self.conn = book.conn
        self.run_id = run_id
        self.workers = workers
        self.book_was_empty = book.count_positions() == 0
        # An empty book: moves held back, positions' book keys kept when given.
        self._held: _MoveColumns | None = None
        self._book_keys: array[int] | None = None
        if self.HOLD and self.book_was_empty and book.count_moves() == 0:
            self._held = _MoveColumns()
            self._book_keys = array("Q")
            self.conn.execute("DROP INDEX IF EXISTS positions_zobrist")
            # Rows go in mostly in key order: a smaller page cache (measured at 1 M
            # positions: the peak 150 MB lower), the usual one again after the load.
            set_cache_size(self.conn, self.HELD_CACHE_KIB)
        self.links: LinkCounts | None = None
        self._held_since_flush = 0
        self.moves_before = book.count_moves()
        self.positions_before = book.count_positions()
        self.next_id = int(self.conn.execute(
            "SELECT coalesce(max(id), 0) + 1 FROM positions").fetchone()[0])
        self.ids: dict[str, int] = {}
        self._new_positions: list[tuple[Any, ...]] = []
        self._ply_updates: list[tuple[Any, ...]] = []
        self._moves: list[tuple[Any, ...]] = []
        self.move_changes = 0
        self.positions = 0   # position entries received
        self.moves = 0       # move entries received

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        self.positions += 1
        position_id = self.ids.get(sfen)
        if position_id is None and not self.book_was_empty:
            row = self.conn.execute("SELECT id FROM positions WHERE sfen = ?",
                                    (sfen,)).fetchone()
            if row is not None:
                position_id = self.ids[sfen] = row[0]
        if position_id is None:
            position_id = self.ids[sfen] = self.next_id
            self.next_id += 1
            self._new_positions.append((position_id, sfen, zobrist, ply, turn, self.run_id))
            if self._book_keys is not None:
                self._book_keys.append(0)
            if len(self._new_positions) >= self.BATCH:
                self.flush()
        elif ply is not None:
            self._ply_updates.append((ply, ply, position_id))
        return position_id

    def add_move(self, position_id: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        if self._held is not None:
            self._hold_rows([position_id], [(0, move, ponder, value, depth, count)], 0)
            return
        self.moves += 1
        self._moves.append((position_id, move, ponder, value, depth, count, self.run_id))
        if len(self._moves) >= self.BATCH:
            self.flush()

    def add_rows(self, positions: list[tuple[Any, ...]], moves: list[tuple[Any, ...]],
                 mask: int = 0xFFFFFFFF) -> None:
        """Rows from a parser process: positions ``(local, sfen, zobrist, ply, turn)``
        numbered ``base + i``, moves ``(local, move, ponder, value, depth, count)``."""
        add_position = self.add_position
        ids = [add_position(sfen, zobrist, ply, turn)
               for _local, sfen, zobrist, ply, turn in positions]
        if self._held is not None:
            self._hold_rows(ids, moves, mask)
            return
        run_id = self.run_id
        self._moves.extend((ids[local & mask], move, ponder, value, depth, count, run_id)
                           for local, move, ponder, value, depth, count in moves)
        self.moves += len(moves)
        if len(self._moves) >= self.BATCH:
            self.flush()

    def add_columns(self, positions: list[tuple[Any, ...]], book_keys: np.ndarray,
                    local: np.ndarray, move16: np.ndarray, ponder16: np.ndarray,
                    value: np.ndarray, depth: np.ndarray, count: np.ndarray) -> None:
        """Positions as for :meth:`add_rows` with their book keys (cshogi's
        ``book_key``, unsigned), and their moves as columns: the index among
        ``positions``, move16, ponder as move16 (0: none), value and depth
        (:data:`~bookgen.arrays.NULL`: none), count."""
        import numpy as np

        from bookgen.arrays import NULL
        from bookgen.store.legal_edges import move16_usi

        add_position = self.add_position
        ids = [add_position(sfen, zobrist, ply, turn)
               for _local, sfen, zobrist, ply, turn in positions]
        if self._held is None:
            usi = move16_usi(np.arange(1 << 16, dtype=np.uint16)).astype(object)
            texts = [None if not t else t.decode() for t in usi.tolist()]
            rows = list(zip(local.tolist(), [texts[m] for m in move16.tolist()],
                            [texts[m] for m in ponder16.tolist()],
                            [None if v == NULL else v for v in value.tolist()],
                            [None if d == NULL else d for d in depth.tolist()],
                            count.tolist()))
            run_id = self.run_id
            self._moves.extend((ids[i], m, p, v, d, c, run_id) for i, m, p, v, d, c in rows)
            self.moves += len(rows)
            if len(self._moves) >= self.BATCH:
                self.flush()
            return
        pids = np.array(ids, dtype=np.int64)
        if self._book_keys is not None and len(pids):
            first = self.next_id - len(self._book_keys)   # the id of the first book key
            np.frombuffer(self._book_keys, dtype=np.uint64)[pids - first] = book_keys
        self._held.add(pids[local], move16.astype(np.uint16), ponder16.astype(np.uint16),
                       value.astype(np.int64), depth.astype(np.int64), count.astype(np.int64))
        self._count_held(len(local))

    def _count_held(self, count: int) -> None:
        """Positions are written as often as when moves are not held: a batch of moves."""
        self.moves += count
        self._held_since_flush += count
        if self._held_since_flush >= self.BATCH:
            self._held_since_flush = 0
            self.flush()

    def _hold_rows(self, ids: list[int], moves: list[tuple[Any, ...]], mask: int) -> None:
        """Moves given as text rows, held as columns (an empty book's load)."""
        import numpy as np

        from bookgen.arrays import NULL

        assert self._held is not None
        codes = _move16_of_usi()
        try:
            move16 = np.array([codes[m] for _l, m, *_r in moves], dtype=np.uint16)
            ponder = np.array([0 if p is None else codes[p] for _l, _m, p, *_r in moves],
                              dtype=np.uint16)
        except KeyError:      # a text that is no move16 of cshogi's: load row by row
            self._release()
            run_id = self.run_id
            self._moves.extend((ids[local & mask], move, ponder, value, depth, count, run_id)
                               for local, move, ponder, value, depth, count in moves)
            self.moves += len(moves)
            return
        self._held.add(
            np.array([ids[row[0] & mask] for row in moves], dtype=np.int64), move16, ponder,
            np.array([NULL if row[3] is None else row[3] for row in moves], dtype=np.int64),
            np.array([NULL if row[4] is None else row[4] for row in moves], dtype=np.int64),
            np.array([row[5] for row in moves], dtype=np.int64))
        self._count_held(len(moves))
        # (a book key per position is known only for positions given with add_columns)
        self._book_keys = None

    def _release(self) -> None:
        """Stop holding moves: the held ones go to the row-by-row writer."""
        import numpy as np

        from bookgen.arrays import NULL
        from bookgen.store.legal_edges import move16_usi

        held, self._held = self._held, None
        self._book_keys = None
        if held is None:
            return
        self.conn.execute(_schema_sql("INDEX", "positions_zobrist"))
        set_cache_size(self.conn, BOOK_CACHE_KIB)
        pid, move16, ponder, value, depth, count = held.take()
        usi = [None if not t else t.decode() for t in move16_usi(
            np.arange(1 << 16, dtype=np.uint16)).tolist()]
        run_id = self.run_id
        self._moves.extend(zip(pid.tolist(), [usi[m] for m in move16.tolist()],
                               [usi[p] for p in ponder.tolist()],
                               [None if v == NULL else v for v in value.tolist()],
                               [None if d == NULL else d for d in depth.tolist()],
                               count.tolist(), [run_id] * len(pid)))
        self.flush()

    def flush(self) -> None:
        if self._new_positions:
            self.conn.executemany(
                "INSERT INTO positions(id, sfen, zobrist, ply, turn, created_run) "
                "VALUES (?, ?, ?, ?, ?, ?)", self._new_positions)
            self._new_positions = []
            fault_point("import-positions-written")
        if self._ply_updates:
            self.conn.executemany(
                "UPDATE positions SET ply = min(coalesce(ply, ?), ?) WHERE id = ?",
                self._ply_updates)
            self._ply_updates = []
        if self._moves:
            before = self.conn.total_changes
            self.conn.executemany(
                "INSERT INTO moves(position_id, move, ponder, value, depth, count, run_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)" + MOVE_UPSERT_SQL, self._moves)
            self.move_changes += self.conn.total_changes - before
            self._moves = []
            fault_point("import-moves-written")

    def finish(self) -> tuple[int, int, int]:
        """Write what is buffered and make the book's links complete (:attr:`links`
        says what that wrote); returns (positions added, moves added, moves updated)."""
        from bookgen.store import stored_links

        self.flush()
        if self._held is not None:
            return self._finish_held()
        positions_added = self.book.count_positions() - self.positions_before
        moves_added = self.book.count_moves() - self.moves_before
        fault_point("import-rows-written")
        self.links = stored_links.store_links(self.book, self.run_id, self.workers)
        return positions_added, moves_added, self.move_changes - moves_added

    def _finish_held(self) -> tuple[int, int, int]:
        """An empty book's load: every move once (the merge rule among duplicates),
        linked, with the other legal moves between nodes as link rows, in key order."""
        import numpy as np

        from bookgen.arrays import NULL, trim_memory
        from bookgen.store import stored_links
        from bookgen.store.legal_edges import find_legal_edges, move16_usi

        assert self._held is not None
        started_links = time.perf_counter()
        pid, move16, ponder, value, depth, count = self._held.take()
        self._held = None
        self.conn.execute(_schema_sql("INDEX", "positions_zobrist"))
        # By (position, move16), in arrival order among duplicates (a position twice,
        # a move twice), which the merge rule settles.
        key = (pid << 16) | move16.astype(np.int64)
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.ones(len(key), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        updates = 0
        if not first.all():
            order, updates = self._merge_duplicates(order, first, depth, count)
            key = key[first]
        del first
        pid, move16, ponder = pid[order], move16[order], ponder[order]
        value, depth, count = value[order], depth[order], count[order]
        del order
        # The links between nodes (positions with moves).
        nodes = np.unique(pid)
        first_id = self.next_id - len(self.ids)
        sfens = list(self.ids)
        self.ids = {}
        node_sfens = [sfens[i] for i in (nodes - first_id).tolist()]
        del sfens
        keys = None
        if self._book_keys is not None:
            keys = np.frombuffer(self._book_keys, dtype=np.uint64)[nodes - first_id].copy()
            self._book_keys = None
        legal = find_legal_edges(node_sfens, self.workers, keys)
        del node_sfens, keys
        trim_memory()     # the sfens' strings, freed
        edge_key = (nodes[legal.source] << 16) | legal.move16.astype(np.int64)
        edge_child = nodes[legal.target]
        del legal, nodes
        at = np.minimum(np.searchsorted(key, edge_key), max(len(key) - 1, 0))
        own = key[at] == edge_key if len(key) else np.zeros(len(edge_key), dtype=bool)
        child = np.full(len(key), NULL, dtype=np.int64)
        child[at[own]] = edge_child[own]
        link_key, link_child = edge_key[~own], edge_child[~own]
        del at, own, edge_key, edge_child
        n_own, n_links = len(key), len(link_key)
        link_run = (self.book.begin_run(LINK_COMMAND, {"after_run": self.run_id})
                    if n_links else None)
        # Every row in key order: (position id, the move as text). Rows below n_own
        # are the book's moves, the others link rows.
        all_key = np.concatenate([key, link_key])
        del key
        codes, move_index = np.unique(all_key & 0xFFFF, return_inverse=True)
        move_index = move_index.astype(np.int32)
        texts = move16_usi(codes.astype(np.uint16))
        rank = np.empty(len(codes), dtype=np.int64)
        rank[np.argsort(texts, kind="stable")] = np.arange(len(codes))
        rows = np.argsort(((all_key >> 16) << 16) | rank[move_index])   # distinct keys
        del rank
        names = [t.decode() for t in texts.tolist()]
        ponder_names = [None if not t else t.decode() for t in move16_usi(
            np.arange(1 << 16, dtype=np.uint16)).tolist()]

        def nullable(values: np.ndarray) -> list[Any]:
            listed = values.tolist()
            for i in np.flatnonzero(values == NULL).tolist():
                listed[i] = None
            return listed

        # Built after the rows; the trigger that watches for new nodes (it costs a
        # third of each insert) is not needed while the marker is not set.
        self.conn.execute("DROP INDEX IF EXISTS moves_child")
        self.conn.execute("DROP TRIGGER IF EXISTS links_new_node")
        batch = 1 << 16
        for start in range(0, len(rows), batch):
            part = rows[start:start + batch]
            mine = part < n_own
            at = np.where(mine, part, 0)
            link_at = np.where(mine, 0, part - n_own)
            self.conn.executemany(
                "INSERT INTO moves(position_id, move, ponder, value, depth, count, child_id, "
                "run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                zip((all_key[part] >> 16).tolist(),
                    [names[i] for i in move_index[part].tolist()],
                    [ponder_names[p] for p in np.where(mine, ponder[at], 0).tolist()],
                    nullable(np.where(mine, value[at], NULL)),
                    nullable(np.where(mine, depth[at], NULL)),
                    np.where(mine, count[at], 0).tolist(),
                    nullable(np.where(mine, child[at], link_child[link_at] if n_links
                                      else NULL)),
                    np.where(mine, self.run_id, link_run or 0).tolist()))
            fault_point("import-moves-written")
        self.conn.execute(_schema_sql("INDEX", "moves_child"))
        self.conn.execute(_schema_sql("TRIGGER", "links_new_node"))
        set_cache_size(self.conn, BOOK_CACHE_KIB)
        linked = int((child != NULL).sum())
        self.links = stored_links.LinkCounts(
            linked, n_links, link_run, time.perf_counter() - started_links)
        if link_run is not None:
            # (the book moves it linked count as updated, as when store_links sets them)
            self.book.end_run(link_run, moves_added=n_links, moves_updated=linked,
                              counts=self.links.as_dict())
        fault_point("import-rows-written")
        stored_links.mark_links_complete(self.conn)
        positions_added = self.book.count_positions() - self.positions_before
        return positions_added, n_own, updates

    @staticmethod
    def _merge_duplicates(order: np.ndarray, first: np.ndarray, depth: np.ndarray,
                          count: np.ndarray) -> tuple[np.ndarray, int]:
        """The row that stays of each (position, move): of the entries in arrival
        order (``order`` sorted by key, ``first`` marking each key's first), the merge
        rule keeps the first, replaced by each later one that is deeper, or as deep
        with a greater count. Returns the kept rows (in key order) and how many
        replacements that took."""
        import numpy as np

        from bookgen.arrays import NULL

        starts = np.flatnonzero(first)
        stops = np.append(starts[1:], len(order))
        kept = order[starts].copy()
        updates = 0
        for group in np.flatnonzero(stops - starts > 1).tolist():
            rows = order[starts[group]:stops[group]].tolist()
            best = rows[0]
            best_key = (-1 if depth[best] == NULL else int(depth[best]), int(count[best]))
            for row in rows[1:]:
                row_key = (-1 if depth[row] == NULL else int(depth[row]), int(count[row]))
                if row_key > best_key:
                    best, best_key = row, row_key
                    updates += 1
            kept[group] = best
        return kept, updates


# -- merging another book ---------------------------------------------------------------

_MOVE_COLUMNS = ("ponder", "value", "depth", "count", "visits", "prior", "win_rate",
                 "eval_value", "minimax_value", "minimax_depth", "engine_score")


def attach_source(store: Book, source: str | os.PathLike[str], schema: str) -> None:
    """Attach a source book; read-write when possible (only SELECTs run on it) so
    that closing removes its WAL files, read-only when it cannot be written."""
    *preferred, last = readonly_uris(source)
    for uri in preferred:
        try:
            store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (uri,))
            return
        except sqlite3.OperationalError:
            pass
    store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (last,))


def merge_attached(store: Book, schema: str, run_id: int) -> tuple[int, int, int]:
    """Merge the book attached as ``schema`` into ``store`` in the caller's
    transaction (see :mod:`bookgen.bookfiles.merge` for the rules; refine minimax's
    transposition rows are not copied); returns (positions added, moves added,
    moves updated)."""
    conn = store.conn
    positions_before = store.count_positions()
    moves_before = store.count_moves()
    conn.execute(
        "INSERT INTO positions(sfen, zobrist, ply, turn, created_run) "
        f"SELECT sfen, zobrist, ply, turn, ? FROM {schema}.positions WHERE true "
        "ORDER BY id" + PLY_UPSERT_SQL, (run_id,))
    changes = conn.total_changes
    selected = ", ".join(f"m.{c}" for c in _MOVE_COLUMNS)
    also_update = ", ".join(f"{c} = excluded.{c}" for c in _MOVE_COLUMNS[4:])
    upsert = MOVE_UPSERT_SQL.replace(
        "run_id = excluded.run_id",
        f"run_id = excluded.run_id, {also_update}, "
        "child_id = coalesce(excluded.child_id, moves.child_id)")
    conn.execute(
        f"INSERT INTO moves(position_id, move, {', '.join(_MOVE_COLUMNS)}, child_id, run_id) "
        f"SELECT p.id, m.move, {selected}, pc.id, ? "
        f"FROM {schema}.moves m JOIN {schema}.positions sp ON sp.id = m.position_id "
        "JOIN main.positions p ON p.sfen = sp.sfen "
        f"LEFT JOIN {schema}.positions sc ON sc.id = m.child_id "
        "LEFT JOIN main.positions pc ON pc.sfen = sc.sfen "
        f"WHERE {own_rows_sql(schema)} ORDER BY p.id" + upsert, (run_id,))
    changed = conn.total_changes - changes
    positions_added = store.count_positions() - positions_before
    moves_added = store.count_moves() - moves_before
    return positions_added, moves_added, changed - moves_added
