"""The book as a graph in memory, kept in step with its SQLite file while growing.

Nodes are positions (keyed by normalised sfen), edges their book moves. A
position reached by several move orders is one node with several parents.
Expanding a node writes the position, its moves and rows for their child
positions in one transaction, then propagates values to the ancestors with a
simple incremental negamax: a move into an expanded child is worth minus the
child's value, a node is worth its best move. The evaluator's own value of
each move stays in ``eval_value``; ``value`` holds the propagated one.

Depth and ponder follow the same rule: a move into a child with book moves
has the child's best move (best first as ``export`` writes it: value, then
count, then the move) as its ponder and that move's depth plus one as its
depth; a move into a position outside the book keeps the depth of the
search that chose it and the reply that search expected.

:attr:`GrowGraph.written` counts the rows the graph wrote since it was
loaded: positions and moves inserted, and existing move rows changed (each
once), which ``grow`` stores in its ``runs`` row.

The graph is read through the book index (:data:`GROW_INDEX`: the book's own
moves, stored child links only). A move whose child the book does not link
(imported books) gets its child sfen when it is first played, also when the
child is not in the book, so that the parents of a later expansion are known.
The writes are :mod:`bookgen.store.writes`' functions.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import cshogi
import numpy as np

from bookgen.arrays import NULL
from bookgen.grow.book_moves import BookMoveChoice
from bookgen.position import board_key, signed64
from bookgen.store import Book, MoveRows, ValueColumn, queries, writes
from bookgen.store.index import BookIndex, IndexSpec
from bookgen.values import MATE_VALUE

MAX_REVISITS = 8  # times one propagation may revisit a node whose value keeps changing

# What grow reads of a book: every position with its ply, side to move, value and
# whether a run expanded it, and the book's own moves with their raw value, count,
# depth and ponder; a stored child link is kept, none is looked for.
GROW_INDEX = IndexSpec(positions=frozenset({"ply", "turn", "value", "expanded"}),
                       rows=MoveRows.OWN, values=(ValueColumn.RAW,),
                       edges=frozenset({"count", "depth", "ponder"}),
                       resolve_children=False, sfens=True)


@dataclass
class Edge:
    move: str
    value: int
    count: int
    child: str | None = None        # child sfen, computed lazily for imported books
    depth: int = 0
    ponder: str | None = None
    new: bool = False       # its row was inserted since the graph was loaded
    updated: bool = False   # its (older) row was changed since the graph was loaded


@dataclass
class WriteCounts:
    """Rows written through a :class:`GrowGraph`."""

    positions_added: int = 0
    moves_added: int = 0
    moves_updated: int = 0    # rows that existed before, each counted once


@dataclass
class Node:
    sfen: str
    ply: int | None
    turn: int
    id: int | None = None
    expanded: bool = False
    value: int | None = None
    edges: list[Edge] = field(default_factory=list)

    def best_edge(self) -> Edge | None:
        if not self.edges:
            return None
        return max(self.edges, key=lambda e: (e.value, e.count))

    def first_edge(self) -> Edge | None:
        """The move ``export`` writes first: best value, then count, then the move."""
        return min(self.edges, key=lambda e: (-e.value, -e.count, e.move), default=None)


class GrowGraph:
    """Nodes by sfen plus reverse edges (child sfen -> parent sfens)."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.parents: dict[str, set[str]] = {}
        self.written = WriteCounts()

    # -- loading ---------------------------------------------------------------

    @classmethod
    def load(cls, book: Book) -> GrowGraph:
        """The graph of ``book``: every position and the book's own moves, read
        through the book index (:data:`GROW_INDEX`)."""
        return cls.from_index(BookIndex.load(book, GROW_INDEX))

    @classmethod
    def from_index(cls, index: BookIndex) -> GrowGraph:
        """The graph of an index read as :data:`GROW_INDEX` says: a node per
        position in id order, its edges in move order. A move without a stored
        child link gets its child when it is first played (:meth:`child_of`,
        :meth:`link_children`). A node with moves counts as expanded, and
        without a value of its own it is worth its best move."""
        graph = cls()
        sfens = index.sfens()
        nodes = []
        for pid, sfen, ply, turn, value, expanded in zip(
                index.ids.tolist(), sfens, index.column("ply").tolist(),
                index.column("turn").tolist(), index.column("value").tolist(),
                index.column("expanded").tolist()):
            node = Node(sfen, None if ply == NULL else ply, turn, pid, bool(expanded),
                        None if value == NULL else value)
            graph.nodes[sfen] = node
            nodes.append(node)
        names, ponders = index.move_names, index.ponder_names
        assert index.edge_count is not None and index.edge_depth is not None
        assert index.edge_ponder is not None and ponders is not None
        moves, values = index.edge_move.tolist(), index.value_column().tolist()
        counts, depths = index.edge_count.tolist(), index.edge_depth.tolist()
        ponder_ranks, children = index.edge_ponder.tolist(), index.edge_child.tolist()
        linked, indptr = index.edge_linked.tolist(), index.indptr.tolist()
        for row in np.flatnonzero(index.has_moves).tolist():
            node = nodes[row]
            for e in range(indptr[row], indptr[row + 1]):
                child = sfens[children[e]] if linked[e] and children[e] >= 0 else None
                node.edges.append(Edge(
                    names[moves[e]], 0 if values[e] == NULL else values[e], counts[e], child,
                    0 if depths[e] == NULL else depths[e],
                    None if ponder_ranks[e] < 0 else ponders[ponder_ranks[e]]))
                if child is not None:
                    graph.parents.setdefault(child, set()).add(node.sfen)
            node.expanded = True  # a position with book moves counts as expanded
            if node.value is None:
                node.value = max(e.value for e in node.edges)
        return graph

    def link_children(self, book: Book) -> int:
        """Compute the child of every book move whose link is unknown (imported
        books) and record the links to positions in the book; returns how many
        links were written. Runs inside the caller's transaction."""
        board = cshogi.Board()
        links = []
        for node in list(self.nodes.values()):
            unknown = [edge for edge in node.edges if edge.child is None]
            if not unknown:
                continue
            board.set_sfen(f"{node.sfen} 1")
            for edge in unknown:
                child = self.nodes.get(self.child_of(node, edge, board))
                if child is not None and child.id is not None and node.id is not None:
                    links.append((child.id, node.id, edge.move))
                    self._count_update(edge)
        writes.link_children(book.conn, links)
        return len(links)

    def _count_update(self, edge: Edge) -> None:
        """Count ``edge``'s row as updated, once, unless it was inserted since loading."""
        if not edge.new and not edge.updated:
            edge.updated = True
            self.written.moves_updated += 1

    # -- walking ---------------------------------------------------------------

    def child_of(self, node: Node, edge: Edge, board: cshogi.Board) -> str:
        """The child sfen of ``edge`` (``board`` is at ``node``; left unchanged)."""
        if edge.child is None:
            board.push_usi(edge.move)
            edge.child = board_key(board)
            board.pop()
            self.parents.setdefault(edge.child, set()).add(node.sfen)
        return edge.child

    def get(self, sfen: str) -> Node | None:
        return self.nodes.get(sfen)

    # -- expanding -------------------------------------------------------------

    def expand(self, book: Book, board: cshogi.Board, ply: int | None,
               choices: list[BookMoveChoice], root_value: int, root_win_rate: float,
               visits: int, run_id: int) -> list[Node]:
        """Record the expansion of ``board``'s position; returns the nodes whose
        value changed. Runs inside the caller's transaction."""
        conn = book.conn
        sfen = board_key(board)
        node = self.nodes.get(sfen)
        if node is None:
            node = self.nodes[sfen] = Node(sfen, ply, board.turn)
        node.id = self._upsert_position(book, sfen, board, ply, run_id)
        writes.record_expansion(conn, node.id, visits, root_value, root_win_rate, run_id)
        node.expanded = True
        for parent_sfen in self.parents.get(sfen, ()):  # record links found by walking
            parent = self.nodes[parent_sfen]
            for edge in parent.edges:
                if edge.child == sfen and parent.id is not None:
                    if writes.link_child(conn, parent.id, edge.move, node.id):
                        self._count_update(edge)
        stored = queries.move_names(conn, node.id)
        previous = {edge.move: edge for edge in node.edges}
        node.edges = []
        child_ply = ply + 1 if ply is not None else None
        for choice in choices:
            board.push_usi(choice.move)
            child_sfen = board_key(board)
            child = self.nodes.get(child_sfen)
            if child is None:
                child = self.nodes[child_sfen] = Node(child_sfen, child_ply, board.turn)
            child.id = self._upsert_position(book, child_sfen, board, child_ply, run_id)
            board.pop()
            self.parents.setdefault(child_sfen, set()).add(sfen)
            value, depth, ponder = choice.value, choice.depth, choice.reply
            if child.expanded and child.value is not None:
                value, depth, ponder = _through(child)
            edge = Edge(choice.move, value, choice.count, child_sfen, depth, ponder)
            old = previous.get(choice.move)
            if choice.move not in stored:
                edge.new = True
                self.written.moves_added += 1
            elif old is not None and (old.new or old.updated):
                edge.new, edge.updated = old.new, old.updated
            else:
                self._count_update(edge)
            node.edges.append(edge)
            writes.upsert_grown_move(conn, writes.GrownMoveRow(
                node.id, choice.move, ponder, value, depth, choice.count, choice.visits,
                choice.prior, choice.win_rate, child.id, choice.value, run_id))
        node.value = max((e.value for e in node.edges), default=-MATE_VALUE)
        if node.value != root_value:  # a move into an expanded child took its value
            writes.set_position_value(conn, node.id, node.value)
        return self._propagate(book, node)

    def _propagate(self, book: Book, start: Node) -> list[Node]:
        """Negamax the new value of ``start`` up through its ancestors.

        Breadth-first, parents in sfen order (so results do not depend on
        string hashing). A node whose value changes again is visited again,
        at most ``MAX_REVISITS`` times: that bounds the work on cycles, where
        negamax need not settle (``refine minimax`` solves those exactly).
        """
        changed = {start.sfen: start}
        queue = deque([start])
        queued = {start.sfen}
        visits: Counter[str] = Counter()
        while queue:
            child = queue.popleft()
            queued.discard(child.sfen)
            if child.value is None:
                continue
            through = _through(child)
            for parent_sfen in sorted(self.parents.get(child.sfen, ())):
                parent = self.nodes[parent_sfen]
                if not parent.expanded or parent.id is None or not parent.edges:
                    continue
                first = parent.first_edge()
                first_move = first.move if first is not None else None
                for edge in parent.edges:
                    if edge.child == child.sfen:
                        if (edge.value, edge.depth, edge.ponder) != through:
                            self._count_update(edge)
                        edge.value, edge.depth, edge.ponder = through
                        writes.set_move_line(book.conn, parent.id, edge.move, *through)
                new_value = max(e.value for e in parent.edges)
                new_first = parent.first_edge()
                best_moved = (new_first.move if new_first is not None else None) != first_move
                if new_value != parent.value or best_moved:
                    if new_value != parent.value:
                        parent.value = new_value
                        writes.set_position_value(book.conn, parent.id, new_value)
                    changed[parent.sfen] = parent
                    visits[parent.sfen] += 1
                    if parent.sfen not in queued and visits[parent.sfen] <= MAX_REVISITS:
                        queued.add(parent.sfen)
                        queue.append(parent)
        return list(changed.values())

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def _upsert_position(self, book: Book, sfen: str, board: cshogi.Board, ply: int | None,
                         run_id: int) -> int:
        """The position's id, inserting its row (counted) when it is new."""
        position_id, inserted = writes.upsert_position(
            book.conn, sfen, signed64(board.zobrist_hash()), ply, board.turn, run_id)
        if inserted:
            self.written.positions_added += 1
        return position_id


def _through(child: Node) -> tuple[int, int, str | None]:
    """(value, depth, ponder) of a move into the expanded ``child``: minus its
    value, one more than the depth of its best move, its best move."""
    assert child.value is not None
    first = child.first_edge()
    if first is None:  # no moves: the game ends there (its value says how)
        return -child.value, 1, None
    return -child.value, first.depth + 1, first.move
