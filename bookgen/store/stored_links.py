"""Stored child links: every legal move between book nodes, found once and kept current.

A *node* is a position with at least one ``moves`` row. The book's links are
*complete* while the ``meta`` row ``links`` = ``complete`` is there: then every
legal move from a node into a node is a stored ``moves`` row with its
``child_id`` set, either a book move or a transposition row (count 0, value
and depth NULL, the ``run_id`` of a ``refine minimax`` run or of a ``link``
run, :data:`bookgen.store.own_moves.LINK_COMMAND`). ``refine minimax`` then
reads the links instead of generating every legal move.

Who sets the marker: ``refine minimax`` after a scan of its own, and imports
and merges after :func:`store_links` (or the bulk loader's linked load). Who
clears it: the schema's trigger ``links_new_node`` (schema version 3), when a
position gets its first ``moves`` row; that is the only way a writer can add a
node, so no writer can leave a stale marker (a new position without moves is
no node, and a move between nodes is already a stored row: an insert of it
is an update). Grow and ``refine mistakes --iterate`` therefore clear it
whenever they expand a new position, and the next ``refine minimax`` scans.
Grow does not keep the links itself: the links of a new node are cheap, but the
links of old nodes into it can only be found by generating the legal moves of
every node (cshogi has no move generator backwards), which is the whole scan
(measured at 1 M positions: ``refine minimax --rescan-links`` spends about 12 s
more in its graph than a refine from the links), per grow run instead of once
in the next refine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from bookgen.arrays import find_rows
from bookgen.store.book import Book
from bookgen.store.columns import load_sfens, sql_int_columns
from bookgen.store.legal_edges import LegalEdges, find_legal_edges, move16_usi
from bookgen.store.own_moves import LINK_COMMAND

__all__ = ["LINKS_KEY", "LinkCounts", "clear_links", "links_complete", "mark_links_complete",
           "store_links"]

LINKS_KEY = "links"          # the meta key of the marker; its value is "complete"
_COMPLETE = "complete"


def links_complete(conn: Any) -> bool:
    """Whether the book's links are complete (the marker is set)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (LINKS_KEY,)).fetchone()
    return row is not None and row[0] == _COMPLETE


def mark_links_complete(conn: Any) -> None:
    """Set the marker, in the caller's transaction (after storing every link)."""
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                 (LINKS_KEY, _COMPLETE))


def clear_links(conn: Any) -> None:
    """Remove the marker (the next ``refine minimax`` scans for the links)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (LINKS_KEY,))


@dataclass(frozen=True)
class LinkCounts:
    """What :func:`store_links` wrote: links set on stored rows, transposition rows
    inserted (under the ``link`` run ``run_id``, None when none), seconds."""

    links_set: int
    link_rows_added: int
    run_id: int | None
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"links_set": self.links_set, "link_rows_added": self.link_rows_added,
                "link_run": self.run_id, "seconds": round(self.seconds, 3)}


def _nodes(book: Book) -> tuple[np.ndarray, list[str]]:
    """The ids (ascending) and sfens of the positions with moves rows."""
    conn = book.conn
    (ids,) = sql_int_columns(conn, "SELECT id FROM positions ORDER BY id", ["id"])
    (with_moves,) = sql_int_columns(conn, "SELECT DISTINCT position_id AS p FROM moves "
                                    "ORDER BY p", ["p"])
    node = find_rows(ids, with_moves)
    rows = node[0][node[1]]
    sfens = load_sfens(conn)
    return ids[rows], [sfens[row] for row in rows.tolist()]


def store_links(book: Book, after_run: int, workers: int = 1,
                legal: LegalEdges | None = None) -> LinkCounts:
    """Make the book's links complete, in the caller's transaction: find every legal
    move between nodes (:func:`find_legal_edges` on ``workers`` processes), set the
    ``child_id`` of the stored rows without it, insert the others as transposition
    rows of a ``link`` run (started here for ``after_run``, the import or merge that
    called, only when there are rows to insert), then set the marker."""
    started = time.perf_counter()
    conn = book.conn
    ids, sfens = _nodes(book)
    if legal is None:
        legal = find_legal_edges(sfens, workers)
    del sfens
    source = ids[legal.source]
    child = ids[legal.target]
    move = move16_usi(legal.move16).astype("U5").tolist()
    stored_pid, stored_child = sql_int_columns(
        conn, "SELECT position_id, child_id FROM moves ORDER BY position_id, move",
        ["position_id", "child_id"])
    stored_move = [m for (m,) in conn.execute(
        "SELECT move FROM moves ORDER BY position_id, move")]
    if len(stored_move) != len(stored_pid):
        raise RuntimeError("the book changed while it was read")
    # Stored rows by (position id, move), as a sorted key of two columns.
    names = np.array(sorted(set(stored_move) | set(move)), dtype=object)
    rank = {name: i for i, name in enumerate(names.tolist())}
    stored_key = stored_pid * len(names) + np.fromiter(
        map(rank.__getitem__, stored_move), dtype=np.int64, count=len(stored_move))
    del stored_move
    edge_move = np.fromiter(map(rank.__getitem__, move), dtype=np.int64, count=len(move))
    edge_key = source * len(names) + edge_move
    order = np.argsort(stored_key, kind="stable")
    at = np.searchsorted(stored_key[order], edge_key)
    at = np.minimum(at, max(len(order) - 1, 0))
    found = (stored_key[order[at]] == edge_key) if len(order) else np.zeros(len(edge_key),
                                                                            dtype=bool)
    row = order[at]
    relink = found & (stored_child[row] != child)   # unlinked (NULL) or another child
    new = ~found
    by_key = np.argsort(edge_key, kind="stable")
    relinks = by_key[relink[by_key]]
    conn.executemany("UPDATE moves SET child_id = ? WHERE position_id = ? AND move = ?",
                     zip(child[relinks].tolist(), source[relinks].tolist(),
                         names[edge_move[relinks]].tolist()))
    inserts = by_key[new[by_key]]
    run_id = None
    if len(inserts):
        run_id = book.begin_run(LINK_COMMAND, {"after_run": after_run})
        conn.executemany(
            "INSERT INTO moves(position_id, move, ponder, value, depth, count, child_id, "
            "run_id) VALUES (?, ?, NULL, NULL, NULL, 0, ?, ?)",
            zip(source[inserts].tolist(), names[edge_move[inserts]].tolist(),
                child[inserts].tolist(), [run_id] * len(inserts)))
    counts = LinkCounts(len(relinks), len(inserts), run_id, time.perf_counter() - started)
    if run_id is not None:
        book.end_run(run_id, moves_added=len(inserts), moves_updated=len(relinks),
                     counts=counts.as_dict())
    mark_links_complete(conn)
    return counts

