"""grow's graph read from the book index equals the graph of the old SQL loader.

``old_load`` is ``GrowGraph.load`` as it was before the graph was built from
:class:`bookgen.store.index.BookIndex`; it lives here only for this
comparison. For each book (fresh, grown twice, imported, imported and grown,
refined with transposition rows) the two graphs must hold the same nodes in
the same order, the same edges in the same order, the same parents, and
``link_children`` must write the same links and count the same updates.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import astuple
from pathlib import Path

import cshogi
import pytest

from bookgen.grow.book_graph import Edge, GrowGraph, Node
from bookgen.store import Book
from bookgen.store.own_moves import create_own_moves_view
from conftest import key_of, run_cli, write_db2016
from linkcheck import forget_links


def old_load(book: Book) -> GrowGraph:
    """The graph as the SQL loader read it (every position in rowid order, the own
    moves in table order)."""
    graph = GrowGraph()
    conn = book.conn
    by_id: dict[int, Node] = {}
    for pid, sfen, ply, turn, value, expanded in conn.execute(
            "SELECT id, sfen, ply, turn, value, expanded_run IS NOT NULL FROM positions"):
        node = Node(sfen, ply, turn, pid, bool(expanded), value)
        graph.nodes[sfen] = by_id[pid] = node
    own = create_own_moves_view(conn)
    for pid, move, value, count, child_id, depth, ponder in conn.execute(
            f"SELECT position_id, move, value, count, child_id, depth, ponder FROM {own}"):
        node = by_id[pid]
        child = by_id[child_id].sfen if child_id is not None else None
        node.edges.append(Edge(move, value if value is not None else 0, count, child,
                               depth or 0, ponder))
        node.expanded = True
        if child is not None:
            graph.parents.setdefault(child, set()).add(node.sfen)
    for node in graph.nodes.values():
        if node.edges and node.value is None:
            node.value = max(e.value for e in node.edges)
    return graph


def state(graph: GrowGraph) -> tuple[list, list, tuple]:
    """Everything a graph holds, in its order: nodes with their edges, parents
    (keys in order, each set sorted) and the write counts."""
    nodes = [(sfen, node.sfen, node.ply, node.turn, node.id, node.expanded, node.value,
              [astuple(edge) for edge in node.edges]) for sfen, node in graph.nodes.items()]
    parents = [(child, sorted(sfens)) for child, sfens in graph.parents.items()]
    return nodes, parents, astuple(graph.written)


def moves_table(path: Path) -> list[tuple]:
    with Book(path, create=False, readonly=True) as book:
        return book.conn.execute("SELECT * FROM moves ORDER BY position_id, move").fetchall()


def assert_same_graphs(path: Path, tmp_path: Path) -> dict[str, int]:
    """Both loaders on copies of ``path``: the same graphs, before and after
    ``link_children``, the same links written. Returns some counts of the book."""
    old_path, new_path = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    shutil.copyfile(path, old_path)
    shutil.copyfile(path, new_path)
    results = []
    for copy, load in ((old_path, old_load), (new_path, GrowGraph.load)):
        with Book(copy, create=False) as book:
            graph = load(book)
            loaded = state(graph)
            with book.transaction():
                links = graph.link_children(book)
            results.append((loaded, links, state(graph)))
    (old_loaded, old_links, old_linked), (new_loaded, new_links, new_linked) = results
    assert new_loaded[0] == old_loaded[0]          # nodes and edges, in order
    assert new_loaded[1] == old_loaded[1]          # parents
    assert new_loaded == old_loaded
    assert new_links == old_links
    assert new_linked == old_linked
    assert moves_table(new_path) == moves_table(old_path)
    nodes = old_loaded[0]
    return {"nodes": len(nodes), "edges": sum(len(n[7]) for n in nodes),
            "unlinked": sum(edge[3] is None for n in nodes for edge in n[7]),
            "links": old_links}


def grow_book(path: Path, seed: int, positions: int = 8, *args: object) -> None:
    run_cli("grow", "-b", path, "--playouts", 24, "--positions", positions, "--seed", seed,
            *args)


def imported_book(tmp_path: Path, seed: int, positions: int = 40) -> Path:
    """Random walks from the initial position: transpositions, children inside and
    outside the book, some moves without a value, a depth or a ponder; no child
    links (DB2016)."""
    rng = random.Random(seed)
    blocks: dict[str, dict[str, tuple]] = {}
    pushes = ("7g7f", "3c3d", "2g2f", "8c8d", "5g5f", "5c5d", "1g1f", "9c9d", "6g6f", "4c4d")
    while len(blocks) < positions:
        board = cshogi.Board()
        for _ in range(rng.randint(1, 6)):
            legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
            options = [u for u in pushes if u in legal] or sorted(legal)
            move = rng.choice(options)
            moves = blocks.setdefault(key_of(board), {})
            board.push_usi(move)
            reply = rng.choice(sorted(cshogi.move_to_usi(m) for m in board.legal_moves))
            board.pop()
            moves.setdefault(move, (rng.choice((reply, None)),
                                    rng.choice((-80, 0, 35, 120, None)),
                                    rng.choice((1, 3, 5, None)), rng.randint(1, 30)))
            if rng.random() < 0.3:  # a leaf move
                leaf = rng.choice(sorted(legal))
                moves.setdefault(leaf, (None, rng.choice((-40, 10, None)), 2, 1))
            board.push_usi(move)
    source = write_db2016(tmp_path / f"in{seed}.db", [
        (f"{sfen} 1", [(move, *row) for move, row in moves.items()])
        for sfen, moves in blocks.items()])
    path = tmp_path / f"imported{seed}.sqlite"
    run_cli("import", source, "-b", path)
    return path


def test_fresh_grown_book(tmp_path):
    path = tmp_path / "book.sqlite"
    grow_book(path, seed=1)
    counts = assert_same_graphs(path, tmp_path)
    assert counts["edges"] > 8 and counts["unlinked"] == 0


@pytest.mark.parametrize("strategy", ["dlshogi", "book-mcts"])
def test_book_grown_twice(tmp_path, strategy):
    path = tmp_path / "book.sqlite"
    grow_book(path, 1, 6, "--strategy", strategy)
    grow_book(path, 2, 6, "--strategy", strategy)
    assert assert_same_graphs(path, tmp_path)["edges"] > 12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_imported_book(tmp_path, seed):
    path = imported_book(tmp_path, seed)
    counts = assert_same_graphs(path, tmp_path)     # the import linked the moves
    assert 0 < counts["edges"] - counts["unlinked"]   # (moves out of the book: no link)
    forget_links(path)                              # a book imported before links
    counts = assert_same_graphs(path, tmp_path)
    assert counts["unlinked"] == counts["edges"] > 0
    assert counts["links"] > 0


def test_imported_book_grown(tmp_path):
    path = imported_book(tmp_path, 3)
    forget_links(path)
    grow_book(path, 3, 5)
    counts = assert_same_graphs(path, tmp_path)
    assert 0 < counts["unlinked"] < counts["edges"]


def test_refined_book(tmp_path):
    """refine minimax's transposition rows are not grow's edges; refine also links
    imported moves."""
    path = imported_book(tmp_path, 4, positions=60)
    run_cli("refine", "minimax", "-b", path)
    with Book(path, create=False, readonly=True) as book:
        all_rows = book.count_moves()
    counts = assert_same_graphs(path, tmp_path)
    assert counts["edges"] < all_rows   # some transposition rows were left out
    grow_book(path, 4, 4)
    run_cli("refine", "minimax", "-b", path)
    assert_same_graphs(path, tmp_path)
