"""The whole book as a graph for minimax, in numpy arrays.

Nodes are the book positions that have moves. The *options* of a node are
its book moves plus its transposition edges: as YaneuraOu's ``peta_shock``
does, every legal move of a book position whose child is a book position is
an edge, whether or not the book stores that move. An option whose child is
a node is an *edge*; a book move whose child is not a node is a *leaf move*
(its stored value is all the book knows about it).

The book is read through its index (:data:`MINIMAX_INDEX`): every
``moves`` row, with its raw value, count and child link. The legal moves
between nodes come from :func:`bookgen.store.legal_edges.find_legal_edges`
(child keys computed in numpy from each node's legal moves, exact by
material and, for shared keys, by sfen), spread over worker processes for
large books.

A book whose links are complete (:mod:`bookgen.store.stored_links`) already
stores every one of those edges as a linked ``moves`` row: the graph is then
read from the links (:func:`graph_from_links`), with no legal move generated,
and whether a node's side to move is in check is read from its board
(:func:`bookgen.position.side_to_move_in_check`) only for the nodes on a cycle
(:func:`cycle_nodes`): the solver consults it nowhere else.

Options are stored in CSR form: the options of node ``i`` are
``indptr[i]:indptr[i + 1]`` of the per-option arrays.

Transposition edges that are not book moves are written back to the book by
``refine minimax`` as ``moves`` rows with ``count`` 0, ``value`` and
``depth`` NULL, ``child_id`` set, and the refine run's ``run_id``: they are
not book moves (:class:`bookgen.store.MoveRows`), and the graph reads them
flagged as such (the index's own mask).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from bookgen.arrays import NULL, trim_memory
from bookgen.formats.move16 import usi_to_move16
from bookgen.position import side_to_move_in_check
from bookgen.store import Book, MoveRows, ValueColumn
from bookgen.store.columns import load_sfens_of
from bookgen.store.index import BookIndex, IndexSpec
from bookgen.store.legal_edges import find_legal_edges, move16_usi
from bookgen.store.stored_links import links_complete
from bookgen.values import MATE_VALUE

__all__ = ["KIND_BOOK_EDGE", "KIND_LEAF", "KIND_TRANSPOSITION", "MinimaxGraph", "build_graph",
           "cycle_nodes", "graph_from_links", "graph_from_rows"]

KIND_LEAF = 0          # book move whose child is not a book position with moves
KIND_BOOK_EDGE = 1     # book move into a node
KIND_TRANSPOSITION = 2  # legal move into a node that the book does not store


# What the graph reads of a book: every moves row (transposition rows of an earlier
# refine flagged by the own mask) with its raw value, count and whether its child is
# linked; the nodes' sfens and sides to move.
MINIMAX_INDEX = IndexSpec(positions=frozenset({"turn"}), rows=MoveRows.ALL,
                          values=(ValueColumn.RAW,), edges=frozenset({"count", "own"}),
                          resolve_children=False, sfens=True)


@dataclass
class MinimaxGraph:
    """Nodes, and their options in CSR form (see the module docstring)."""

    position_ids: np.ndarray   # int64 [N] positions.id of each node, ascending
    turn: np.ndarray           # int8 [N] 0 black, 1 white to move
    in_check: np.ndarray       # bool [N] the side to move is in check (from links: only
    #                            nodes on a cycle, see cycle_nodes; False elsewhere)
    indptr: np.ndarray         # int64 [N + 1]
    target: np.ndarray         # int32 [E] node index of the child, -1 for leaf moves
    kind: np.ndarray           # int8 [E] KIND_*
    value: np.ndarray          # int32 [E] stored value clamped to +-MATE_VALUE, 0 if NULL
    count: np.ndarray          # int64 [E] stored count (0 for transposition edges)
    move16: np.ndarray         # uint16 [E] cshogi's move16 (``move``: as USI)
    stored: np.ndarray         # bool [E] a moves row exists (book move, earlier transposition)
    child_linked: np.ndarray   # bool [E] the row's child_id is already set
    row: np.ndarray            # int32 [E] the book move row of each option, -1 for the others
    stale_transpositions: list[tuple[int, str]]  # transposition rows no longer legal edges
    seconds: float = 0.0

    @property
    def move(self) -> np.ndarray:
        """S5 [E]: the USI move of each option."""
        return move16_usi(self.move16)

    @property
    def nodes(self) -> int:
        return len(self.position_ids)

    @property
    def source(self) -> np.ndarray:
        """int32 [E] node index owning each option."""
        return np.repeat(np.arange(self.nodes, dtype=np.int32), np.diff(self.indptr))

    def counts(self) -> dict[str, int]:
        edges = self.target >= 0
        return {"positions": self.nodes, "options": len(self.target),
                "edges": int(edges.sum()),
                "book_edges": int((self.kind == KIND_BOOK_EDGE).sum()),
                "transposition_edges": int((self.kind == KIND_TRANSPOSITION).sum()),
                "leaf_moves": int((self.kind == KIND_LEAF).sum())}


def _sorted_member(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position) of each wanted key in an ascending array."""
    if not len(sorted_keys):
        return np.zeros(len(wanted), dtype=bool), np.zeros(len(wanted), dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
    return sorted_keys[at] == wanted, at


def _read_book(book: Book) -> tuple[np.ndarray, list[str], np.ndarray,
                                    dict[str, np.ndarray]]:
    """The nodes (positions with any moves row, by id: ids, sfens, sides to move)
    and every moves row ordered by (node, move): source node, USI move, value
    clamped to +-MATE_VALUE (0 for none), count, child linked, a transposition row
    of an earlier ``refine minimax`` (``earlier``)."""
    index = BookIndex.load(book, MINIMAX_INDEX)
    rows = np.flatnonzero(index.has_moves)
    every_sfen = index.sfens()
    sfens = [every_sfen[row] for row in rows.tolist()]
    del every_sfen
    node_of_row = np.full(len(index.ids), -1, dtype=np.int64)
    node_of_row[rows] = np.arange(len(rows))
    value = index.value_column()
    assert index.edge_count is not None
    moves = {
        "source": node_of_row[index.edge_rows()],
        "move16": usi_to_move16(index.move_names)[index.edge_move],
        "value": np.clip(np.where(value == NULL, 0, value), -MATE_VALUE, MATE_VALUE
                         ).astype(np.int32),
        "count": index.edge_count.astype(np.int64),
        "linked": index.edge_linked.astype(bool),
        "earlier": ~index.own_mask()}
    return index.ids[rows], sfens, index.column("turn")[rows].astype(np.int8), moves


# What the graph reads of a book whose links are complete: the same, but the sfens
# (read apart, of the nodes on a cycle only, for their checks).
LINKS_INDEX = IndexSpec(positions=frozenset({"turn"}), rows=MoveRows.ALL,
                        values=(ValueColumn.RAW,), edges=frozenset({"count", "own"}),
                        resolve_children=False, sfens=False)


# -- building ----------------------------------------------------------------------


def build_graph(book: Book, workers: int | None = None, *, rescan: bool = False
                ) -> MinimaxGraph:
    """Read ``book`` and find all its edges, transpositions included: from its stored
    links when they are complete (unless ``rescan``), else by a scan of the legal
    moves."""
    started = time.perf_counter()
    if not rescan and links_complete(book.conn):
        return graph_from_links(book, started)
    position_ids, sfens, turn, move_rows = _read_book(book)
    return graph_from_rows(position_ids, sfens, turn, move_rows, workers, started)


def graph_from_links(book: Book, started: float | None = None) -> MinimaxGraph:
    """The graph of a book whose links are complete: the same graph
    :func:`graph_from_rows` finds by its scan (the same options in the same order),
    read from the stored ``child_id`` of every ``moves`` row; ``in_check`` read from
    the boards of the nodes on a cycle only (:func:`cycle_nodes`), False elsewhere."""
    started = time.perf_counter() if started is None else started
    index = BookIndex.load(book, LINKS_INDEX)
    rows = np.flatnonzero(index.has_moves)
    node_of_row = np.full(len(index.ids) + 1, -1, dtype=np.int64)   # [-1]: no child
    node_of_row[rows] = np.arange(len(rows))
    count = len(rows)
    source = node_of_row[index.edge_rows()]
    target = node_of_row[index.edge_child].astype(np.int32)
    move16 = usi_to_move16(index.move_names)[index.edge_move]
    value = index.value_column()
    assert index.edge_count is not None
    own = index.own_mask().astype(bool)
    # Transposition rows into nodes are the transposition edges (by move, as the scan
    # orders them); those into other positions no longer are edges.
    links = np.flatnonzero(~own & (target >= 0))
    links = links[np.lexsort((move16[links], source[links]))]
    stale_rows = np.flatnonzero(~own & (target < 0))
    stale = [(int(index.ids[rows[source[i]]]), move16_usi(move16[i:i + 1])[0].decode())
             for i in stale_rows.tolist()]
    real = np.flatnonzero(own)
    order = np.argsort(np.concatenate([source[real], source[links]]), kind="stable")
    indptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(source[real], minlength=count)
              + np.bincount(source[links], minlength=count), out=indptr[1:])
    n_links = len(links)

    def arranged(book_part: np.ndarray, link_part: np.ndarray) -> np.ndarray:
        return np.concatenate([book_part, link_part])[order]

    # The checks: for the nodes on a cycle only (all that the solver reads of them).
    edges = target >= 0
    on_cycle = cycle_nodes(count, source[edges], target[edges])
    del edges
    in_check = np.zeros(count, dtype=bool)
    if len(on_cycle):
        in_check[on_cycle] = side_to_move_in_check(
            load_sfens_of(book.conn, index.ids[rows[on_cycle]]))
    trim_memory()
    book_target = target[real]
    graph = MinimaxGraph(
        position_ids=index.ids[rows], turn=index.column("turn")[rows].astype(np.int8),
        in_check=in_check, indptr=indptr,
        target=arranged(book_target, target[links]),
        kind=arranged(np.where(book_target >= 0, KIND_BOOK_EDGE, KIND_LEAF).astype(np.int8),
                      np.full(n_links, KIND_TRANSPOSITION, dtype=np.int8)),
        value=arranged(np.clip(np.where(value[real] == NULL, 0, value[real]),
                               -MATE_VALUE, MATE_VALUE).astype(np.int32),
                       np.zeros(n_links, dtype=np.int32)),
        count=arranged(index.edge_count[real].astype(np.int64),
                       np.zeros(n_links, dtype=np.int64)),
        move16=arranged(move16[real], move16[links]),
        stored=np.ones(len(real) + n_links, dtype=bool),
        child_linked=arranged(index.edge_linked[real].astype(bool),
                              np.ones(n_links, dtype=bool)),
        row=arranged(real.astype(np.int32), np.full(n_links, -1, dtype=np.int32)),
        stale_transpositions=stale)
    graph.seconds = time.perf_counter() - started
    return graph


def cycle_nodes(count: int, source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The nodes (of ``count``, ascending) that lie on a cycle of the edges ``source``
    -> ``target``: the members of the strongly connected components of more than one
    node (a move changes the side to move: no node is its own child). Only these can
    be on a repetition, so only their checks matter (perpetual check, see
    :func:`bookgen.refine.retrograde.analyse`)."""
    if not count:
        return np.empty(0, dtype=np.int64)
    matrix = csr_matrix((np.ones(len(source), dtype=np.int8), (source, target)),
                        shape=(count, count))
    _, labels = connected_components(matrix, directed=True, connection="strong")
    return np.flatnonzero(np.bincount(labels)[labels] > 1)


def graph_from_rows(position_ids: np.ndarray, sfens: Sequence[str], turn: np.ndarray,
                    move_rows: dict[str, np.ndarray], workers: int | None = None,
                    started: float | None = None, book_keys: np.ndarray | None = None
                    ) -> MinimaxGraph:
    """The graph of nodes (``position_ids``, ascending; ``sfens`` normalised; ``turn``)
    and their moves rows ordered by node (``source`` node index, ``move16`` cshogi's,
    ``value`` clamped to +-MATE_VALUE with 0 for none, ``count``, ``linked``: the row's
    child is linked, ``earlier``: a transposition row of an earlier refine), whether
    they come from a book or from a file; finds every legal edge between the nodes.
    ``started``: when the reading began (for ``seconds``); ``book_keys``: the nodes' book
    keys where the caller has them (:func:`bookgen.store.legal_edges.find_legal_edges`)."""
    started = time.perf_counter() if started is None else started
    count = len(sfens)
    legal = find_legal_edges(sfens, workers if workers is not None
                             else min(2, os.cpu_count() or 1), book_keys)
    del sfens
    hit_source, hit_target, hit_move = legal.source, legal.target, legal.move16
    in_check = legal.in_check
    del legal

    def keys(source: np.ndarray, move: np.ndarray) -> np.ndarray:
        return (source.astype(np.int64) << 16) | move

    hit_keys = keys(hit_source, hit_move)
    order = np.argsort(hit_keys, kind="stable")
    hit_keys, hit_source, hit_target, hit_move = (
        hit_keys[order], hit_source[order], hit_target[order], hit_move[order])
    del order
    earlier = move_rows["earlier"]   # transposition rows of an earlier refine
    real = ~earlier
    real_keys = keys(move_rows["source"][real], move_rows["move16"][real])

    # Book moves: an edge when the legal-move scan found the child among the nodes.
    found, at = _sorted_member(hit_keys, real_keys)
    book_target = np.where(found, hit_target[at] if len(hit_keys) else -1, -1).astype(np.int32)
    del found, at
    # Transposition edges: legal moves into nodes that are not book moves.
    real_keys.sort()
    extra = ~_sorted_member(real_keys, hit_keys)[0]
    del real_keys
    # Earlier transposition rows: stored, linked, or no longer edges (removed).
    earlier_keys = keys(move_rows["source"][earlier], move_rows["move16"][earlier])
    still, _ = _sorted_member(hit_keys, earlier_keys)
    stale_rows = np.nonzero(earlier)[0][~still]
    stale = [(int(position_ids[move_rows["source"][i]]),
              move16_usi(move_rows["move16"][i:i + 1])[0].decode()) for i in stale_rows]
    hit_keys = hit_keys[extra]
    tr_stored = _sorted_member(np.sort(earlier_keys), hit_keys)[0]
    linked_keys = np.sort(earlier_keys[move_rows["linked"][earlier]])
    tr_linked = _sorted_member(linked_keys, hit_keys)[0]
    del hit_keys, earlier_keys, linked_keys
    hit_source, hit_target, hit_move = hit_source[extra], hit_target[extra], hit_move[extra]

    n_extra = int(extra.sum())
    source = np.concatenate([move_rows["source"][real], hit_source])
    order = np.argsort(source, kind="stable")
    indptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(source, minlength=count), out=indptr[1:])
    del source

    def arranged(book_part: np.ndarray, extra_part: np.ndarray) -> np.ndarray:
        """The options' column (book moves, then transposition edges) in CSR order."""
        return np.concatenate([book_part, extra_part])[order]

    rows = np.flatnonzero(real)
    moves = arranged(move_rows["move16"][rows], hit_move)
    graph = MinimaxGraph(
        position_ids=position_ids, turn=turn, in_check=in_check, indptr=indptr,
        target=arranged(book_target, hit_target),
        kind=arranged(np.where(book_target >= 0, KIND_BOOK_EDGE, KIND_LEAF).astype(np.int8),
                      np.full(n_extra, KIND_TRANSPOSITION, dtype=np.int8)),
        value=arranged(move_rows["value"][rows], np.zeros(n_extra, dtype=np.int32)),
        count=arranged(move_rows["count"][rows], np.zeros(n_extra, dtype=np.int64)),
        move16=moves,
        stored=arranged(np.ones(len(rows), dtype=bool), tr_stored),
        child_linked=arranged(move_rows["linked"][rows], tr_linked),
        row=arranged(rows.astype(np.int32), np.full(n_extra, -1, dtype=np.int32)),
        stale_transpositions=stale)
    graph.seconds = time.perf_counter() - started
    return graph
