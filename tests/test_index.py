"""BookIndex and IndexSpec: every flag against plain sqlite3 reads of the book.

The expected columns and edges are read here with the sqlite3 module, and
missing child links are found by playing the move with cshogi, so nothing
expected comes from the code under test. The books: an imported DB2016 tree
(no child links, ponders and depths, a move without value) and a grown book
(child links, frontier positions), each refined by ``refine minimax`` so that
they hold transposition rows.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.arrays import NULL
from bookgen.bookfiles.importer import import_books
from bookgen.grow import grow
from bookgen.refine.minimax import MinimaxSettings, refine_minimax
from bookgen.store import Book, MoveRows, ValueColumn, columns as store_columns, open_book_snapshot
from bookgen.store.index import BookIndex, IndexSpec
from conftest import key_of, small_grow, write_db2016
from linkcheck import forget_links

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
TRANSPOSITION = ("m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IN "
                 "(SELECT id FROM runs WHERE command IN ('refine minimax', 'link'))")


def after(*moves: str) -> str:
    board = cshogi.Board()
    for move in moves:
        board.push_usi(move)
    return key_of(board)


def tree_blocks() -> list[tuple[str, list[tuple]]]:
    """A small tree whose move orders meet: 7g7f 3c3d 2g2f and 2g2f 3c3d 7g7f reach
    the same position, which the second order does not store as a book move (refine
    minimax adds it as a transposition row)."""
    return [
        (f"{START} 1", [("7g7f", "3c3d", 40, 10, 5), ("2g2f", None, 30, 8, 3)]),
        (f"{after('7g7f')} 2", [("3c3d", "2g2f", -40, 9, 4)]),
        (f"{after('2g2f')} 2", [("3c3d", None, None, None, 1), ("8c8d", "7g7f", -20, 4, 2)]),
        (f"{after('7g7f', '3c3d')} 3", [("2g2f", None, 35, 7, 2)]),
        (f"{after('2g2f', '3c3d')} 3", [("2f2e", "8c8d", 25, 6, 1)]),
        (f"{after('7g7f', '3c3d', '2g2f')} 4", [("8c8d", None, -30, 5, 1),
                                               ("4c4d", None, -35, 5, 1)]),
    ]


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> dict[str, Path]:
    """imported and grown books, plain and refined."""
    root = tmp_path_factory.mktemp("index")
    imported = root / "imported.sqlite"
    import_books(imported, [write_db2016(root / "tree.db", tree_blocks())], progress=False)
    forget_links(imported)   # a book imported before stored links: children resolved
    grown = root / "grown.sqlite"
    grow(grown, small_grow(30, 20, seed=3), progress=False)
    result = {"imported": imported, "grown": grown}
    for name, path in list(result.items()):
        refined = root / f"{name}-refined.sqlite"
        shutil.copy(path, refined)
        refine_minimax(refined, MinimaxSettings(scan_workers=1))
        result[f"{name}-refined"] = refined
    conn = sqlite3.connect(result["imported-refined"])
    assert conn.execute(f"SELECT count(*) FROM moves m WHERE {TRANSPOSITION}").fetchone()[0]
    conn.close()
    return result


ALL_BOOKS = ["imported", "grown", "imported-refined", "grown-refined"]


# ---------------------------------------------------------------- the expected book


def sql(path: Path, query: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def child_of(sfen: str, move: str, ids_by_sfen: dict[str, int]) -> int | None:
    board = cshogi.Board(sfen + " 1")
    board.push_usi(move)
    return ids_by_sfen.get(key_of(board))


def expected_edges(path: Path, rows: MoveRows = MoveRows.ALL, value: str = "coalesce("
                   "m.minimax_value, m.value)", resolve: bool = True) -> dict[int, list[tuple]]:
    """position id -> [(move, value, count, child id, linked, depth, ponder, own)] by move."""
    ids_by_sfen = {sfen: pid for pid, sfen in sql(path, "SELECT id, sfen FROM positions")}
    sfens = {pid: sfen for sfen, pid in ids_by_sfen.items()}
    where = f"WHERE NOT ({TRANSPOSITION})" if rows == MoveRows.OWN else ""
    edges: dict[int, list[tuple]] = {}
    for pid, move, v, count, child, depth, ponder, transposition in sql(
            path, f"SELECT m.position_id, m.move, {value}, m.count, m.child_id, m.depth, "
                  f"m.ponder, {TRANSPOSITION} FROM moves m {where} "
                  "ORDER BY m.position_id, m.move"):
        linked = child is not None
        if not linked and resolve:
            child = child_of(sfens[pid], move, ids_by_sfen)
        edges.setdefault(pid, []).append((move, v, count, child, linked, depth, ponder,
                                          not transposition))
    return edges


def index_edges(index: BookIndex) -> dict[int, list[tuple]]:
    """The same tuples read from the index (None where a column was not read)."""
    def at(column: np.ndarray | None, e: int) -> int | None:
        if column is None or column[e] == NULL:
            return None
        return int(column[e])

    edges: dict[int, list[tuple]] = {}
    for row in np.flatnonzero(index.has_moves):
        for e in range(int(index.indptr[row]), int(index.indptr[row + 1])):
            child = int(index.edge_child[e])
            ponder = None
            if index.edge_ponder is not None and index.edge_ponder[e] >= 0:
                assert index.ponder_names is not None
                ponder = index.ponder_names[index.edge_ponder[e]]
            edges.setdefault(int(index.ids[row]), []).append((
                index.move_names[index.edge_move[e]], at(index.edge_value, e),
                at(index.edge_count, e), None if child < 0 else int(index.ids[child]),
                bool(index.edge_linked[e]), at(index.edge_depth, e), ponder,
                None if index.edge_own is None else bool(index.edge_own[e])))
    return edges


def project(edges: dict[int, list[tuple]], fields: list[int]) -> dict[int, list[tuple]]:
    return {pid: [tuple(edge[i] for i in fields) for edge in out]
            for pid, out in edges.items()}


def load(path: Path, spec: IndexSpec | None = None) -> BookIndex:
    with Book(path, create=False, readonly=True) as store:
        return BookIndex.load(store, spec or IndexSpec())


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", ALL_BOOKS)
def test_the_default_reads_every_row_with_minimax_values_and_resolved_children(books, name):
    path = books[name]
    with Book(path, create=False, readonly=True) as store:
        index = BookIndex.load(store)
        want_positions = sql(path, "SELECT id, ply, visits, minimax_value, sfen FROM positions "
                                   "ORDER BY id")
        assert index.ids.tolist() == [r[0] for r in want_positions]
        assert sorted(index.columns) == ["minimax_value", "ply", "visits"]
        for i, name_ in enumerate(("ply", "visits", "minimax_value"), start=1):
            assert [None if v == NULL else v for v in index.column(name_).tolist()] == \
                [r[i] for r in want_positions]
        assert dict(index.sfen) == {r[0]: r[4] for r in want_positions}
        assert index.ply[want_positions[0][0]] == want_positions[0][1]
    want = expected_edges(path)
    assert project(index_edges(index), [0, 1, 2, 3, 4]) == project(want, [0, 1, 2, 3, 4])
    assert index.edge_own is None and index.edge_depth is None and index.edge_ponder is None
    assert index.start == index.row(dict((s, p) for p, *_r, s in want_positions)[START])
    if name == "imported":   # the children came from playing the moves
        assert not index.edge_linked.any() and (index.edge_child >= 0).any()


@pytest.mark.parametrize("name", ["imported", "grown-refined"])
def test_position_columns_on_demand(books, name):
    path = books[name]
    names = ["ply", "turn", "visits", "value", "minimax_value", "expanded", "zobrist"]
    index = load(path, IndexSpec(positions=frozenset(names)))
    want = sql(path, "SELECT ply, turn, visits, value, minimax_value, "
                     "expanded_run IS NOT NULL, zobrist FROM positions ORDER BY id")
    for i, column in enumerate(names):
        assert [None if v == NULL else v for v in index.column(column).tolist()] == \
            [r[i] for r in want], column
    only_turn = load(path, IndexSpec(positions=frozenset({"turn"})))
    assert list(only_turn.columns) == ["turn"]
    with pytest.raises(ValueError, match="without the position column 'ply'"):
        only_turn.column("ply")
    with pytest.raises(ValueError, match="without the position column"):
        only_turn.with_moves()


@pytest.mark.parametrize("name", ALL_BOOKS)
def test_own_rows_leave_the_transposition_rows_out(books, name):
    path = books[name]
    index = load(path, IndexSpec(rows=MoveRows.OWN, values=(ValueColumn.RAW,)))
    want = expected_edges(path, MoveRows.OWN, "m.value")
    assert project(index_edges(index), [0, 1, 2, 3, 4]) == project(want, [0, 1, 2, 3, 4])
    assert index.own_mask().all()
    assert index.has_moves.tolist() == [int(pid) in want for pid in index.ids]


@pytest.mark.parametrize("name", ALL_BOOKS)
def test_the_own_mask_marks_the_transposition_rows_among_all(books, name):
    path = books[name]
    index = load(path, IndexSpec(edges=frozenset({"own", "count"})))
    want = expected_edges(path)
    assert project(index_edges(index), [0, 7]) == project(want, [0, 7])
    assert index.edge_own is not None
    if name == "imported-refined":
        assert not index.edge_own.all()
    with pytest.raises(ValueError, match="own moves mask"):
        load(path).own_mask()


def test_value_columns(books):
    path = books["imported-refined"]
    raw = load(path, IndexSpec(values=(ValueColumn.RAW,)))
    assert project(index_edges(raw), [0, 1]) == project(expected_edges(path, value="m.value"),
                                                        [0, 1])
    both = load(path, IndexSpec(values=(ValueColumn.RAW, ValueColumn.MINIMAX)))
    assert both.edge_value is both.edge_values[ValueColumn.RAW]
    assert both.value_column(ValueColumn.MINIMAX).tolist() == \
        load(path).value_column().tolist()
    assert not np.array_equal(both.value_column(ValueColumn.MINIMAX), both.edge_value)
    none = load(path, IndexSpec(values=(), edges=frozenset()))
    assert none.edge_value is None and none.edge_count is None
    with pytest.raises(ValueError, match="without values"):
        none.best_values()
    with pytest.raises(ValueError, match="without raw"):
        load(path).best_values(values=ValueColumn.RAW)
    with pytest.raises(ValueError, match="named twice"):
        IndexSpec(values=(ValueColumn.RAW, ValueColumn.RAW))
    with pytest.raises(ValueError, match="unknown index columns: colour, weight"):
        IndexSpec(positions=frozenset({"colour"}), edges=frozenset({"weight"}))


@pytest.mark.parametrize("name", ALL_BOOKS)
def test_best_values_and_total_counts(books, name):
    path = books[name]
    index = load(path, IndexSpec(values=(ValueColumn.MINIMAX, ValueColumn.RAW),
                                 edges=frozenset({"count", "own"})))

    def by_row(query: str, empty: int | None) -> list[int | None]:
        found = dict(sql(path, query))
        return [found.get(pid, empty) for pid in index.ids.tolist()]

    def values(array: np.ndarray) -> list[int | None]:
        return [None if v == NULL else v for v in array.tolist()]

    group = "FROM moves m GROUP BY m.position_id"
    assert values(index.best_values()) == by_row(
        f"SELECT m.position_id, max(coalesce(m.minimax_value, m.value)) {group}", None)
    assert values(index.best_values(values=ValueColumn.RAW)) == by_row(
        f"SELECT m.position_id, max(m.value) {group}", None)
    assert values(index.best_values(own_only=True, values=ValueColumn.RAW)) == by_row(
        f"SELECT m.position_id, max(m.value) FROM moves m WHERE NOT ({TRANSPOSITION}) "
        "GROUP BY m.position_id", None)
    assert index.total_counts().tolist() == by_row(
        f"SELECT m.position_id, sum(m.count) {group}", 0)
    with pytest.raises(ValueError, match="without counts"):
        load(path, IndexSpec(edges=frozenset())).total_counts()


@pytest.mark.parametrize("name", ["imported", "grown-refined"])
def test_depth_and_ponder(books, name):
    path = books[name]
    index = load(path, IndexSpec(edges=frozenset({"depth", "ponder"})))
    want = expected_edges(path)
    assert project(index_edges(index), [0, 5, 6]) == project(want, [0, 5, 6])
    if name == "imported":
        ponders = [edge[6] for out in want.values() for edge in out]
        assert None in ponders and "3c3d" in ponders


def test_sfens_read_at_once(books):
    path = books["grown"]
    with Book(path, create=False, readonly=True) as store:
        index = BookIndex.load(store, IndexSpec(sfens=True))
        lazy = BookIndex.load(store)
    want = [sfen for (sfen,) in sql(path, "SELECT sfen FROM positions ORDER BY id")]
    assert index.sfens() == want
    assert [index.sfen[pid] for pid in index.ids.tolist()] == want  # the book is closed
    with pytest.raises(ValueError, match="without sfens"):
        lazy.sfens()


@pytest.mark.parametrize("name", ["imported", "grown"])
def test_children_without_resolution(books, name):
    path = books[name]
    index = load(path, IndexSpec(resolve_children=False))
    want = expected_edges(path, resolve=False)
    assert project(index_edges(index), [0, 3, 4]) == project(want, [0, 3, 4])
    if name == "imported":
        assert (index.edge_child == -1).all()
    else:
        assert (index.edge_child >= 0).any()


def test_a_read_only_snapshot_connection(books):
    path = books["imported-refined"]
    conn = open_book_snapshot(path)
    try:
        index = BookIndex.load(conn, IndexSpec(rows=MoveRows.OWN))
    finally:
        conn.close()
    assert project(index_edges(index), [0, 1, 3]) == project(
        expected_edges(path, MoveRows.OWN), [0, 1, 3])


@pytest.mark.parametrize("name", ["imported-refined", "grown-refined"])
@pytest.mark.parametrize("rows", list(MoveRows))
@pytest.mark.parametrize("unusual", ["moves", "ponders"])
def test_unusual_move_text_reads_the_same(books, name, rows, unusual, monkeypatch):
    """The fallbacks for move or ponder texts numpy cannot code (one Python value
    per row) give the same index as the fast path."""
    spec = IndexSpec(rows=rows, values=(ValueColumn.RAW, ValueColumn.MINIMAX),
                     edges=frozenset({"count", "own", "depth", "ponder"}))
    fast = load(books[name], spec)
    calls = []
    codes = store_columns.move_codes

    def move_codes(text: str, n: int):  # the moves are coded first, then the ponders
        calls.append(text)
        return None if (len(calls) == 1) == (unusual == "moves") else codes(text, n)

    monkeypatch.setattr(store_columns, "move_codes", move_codes)
    slow = load(books[name], spec)
    assert len(calls) == (1 if unusual == "moves" else 2)
    assert index_edges(slow) == index_edges(fast)
    assert slow.move_names == fast.move_names
    assert slow.value_column(ValueColumn.MINIMAX).tolist() == \
        fast.value_column(ValueColumn.MINIMAX).tolist()
