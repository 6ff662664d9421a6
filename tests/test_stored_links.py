"""Stored child links (bookgen.store.stored_links): imports and merges leave every
legal move between positions with moves as a linked row and say so (the marker);
refine minimax then reads the links instead of scanning, with the same result
as a scan; every writer either keeps the links complete or clears the marker;
kill -9 leaves the book as it was."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from bookgen.bookfiles.importer import import_books
from bookgen.refine.minimax import MinimaxSettings, refine_minimax
from bookgen.store import BulkWriter
from bookgen.values import DrawValues
from conftest import run_bookgen_process, run_cli, write_db2016
from linkcheck import forget_links, marked, missing_links, wrong_links
from test_minimax import blocks_of, check_book, for_random_books, import_book, shuffle_book


def book_content(path: Path) -> dict[str, list]:
    """Every row of the book but the runs' times and seconds."""
    conn = sqlite3.connect(path)
    try:
        content = {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                   for table in ("positions", "moves", "analyses", "mistakes")}
        runs = []
        for row in conn.execute("SELECT command, params, status, positions_added, "
                                "moves_added, moves_updated, counts FROM runs ORDER BY id"):
            counts = json.loads(row[-1])
            counts.pop("seconds", None)
            counts.get("links", {}).pop("seconds", None)
            runs.append((*row[:-1], counts))
        content["runs"] = runs
        content["meta"] = conn.execute("SELECT key, value FROM meta WHERE key NOT IN "
                                       "('created_at') ORDER BY key").fetchall()
        return content
    finally:
        conn.close()


def refine_both_ways(path: Path, draws: DrawValues = DrawValues()) -> None:
    """Refine a copy from the stored links and a copy by a scan: the same book."""
    scanned = path.with_name(path.stem + "-scanned.sqlite")
    shutil.copy(path, scanned)
    was_marked = marked(path)
    refine_minimax(path, MinimaxSettings(draws=draws))
    refine_minimax(scanned, MinimaxSettings(draws=draws, rescan_links=True))
    assert book_content(path) == book_content(scanned)
    assert marked(path) and missing_links(path) == [] and wrong_links(path) == []
    if was_marked:   # nothing new to store: the scan found exactly the stored links
        conn = sqlite3.connect(path)
        counts = json.loads(conn.execute("SELECT counts FROM runs ORDER BY id DESC LIMIT 1"
                                         ).fetchone()[0])
        conn.close()
        assert counts["transposition_rows_added"] == counts["child_links_added"] == 0


def assert_complete(path: Path) -> None:
    assert marked(path)
    assert missing_links(path) == []
    assert wrong_links(path) == []


# ------------------------------------------------------------------ imports store the links


def test_random_books_refine_the_same_from_links_and_by_a_scan(tmp_path):
    def refine_and_check(work, book, draws):
        path = import_book(work, book)
        assert_complete(path)
        refine_both_ways(path, DrawValues(*draws))

    for_random_books(tmp_path, refine_and_check)


def test_an_import_into_a_book_with_positions_links_them_too(tmp_path):
    first = write_db2016(tmp_path / "first.db", blocks_of(shuffle_book(11, positions=40)))
    second = write_db2016(tmp_path / "second.db", blocks_of(shuffle_book(12, positions=40)))
    book = tmp_path / "book.sqlite"
    import_books(book, [first], progress=False)
    assert_complete(book)
    import_books(book, [second], progress=False)     # row by row, then store_links
    assert_complete(book)
    refine_both_ways(book)


def test_the_held_load_writes_what_the_row_by_row_load_writes(tmp_path, monkeypatch):
    """Into an empty book the moves are held and written once, linked; the same book
    as the row-by-row writer and store_links give, duplicates in the file included."""
    blocks = blocks_of(shuffle_book(5, positions=60))
    # a position twice, with a deeper entry, a shallower one and an equal-depth one
    sfen, moves = blocks[3]
    deeper = [(m, p, v, (d or 0) + 3, c) for m, p, v, d, c in moves[:1]]
    shallower = [(m, p, v, None, c + 5) for m, p, v, d, c in moves[1:2]]
    blocks = blocks + [(sfen, deeper + shallower), blocks[7]]
    source = write_db2016(tmp_path / "dup.db", blocks)
    held = tmp_path / "held.sqlite"
    rows = tmp_path / "rows.sqlite"
    import_books(held, [source], progress=False)
    monkeypatch.setattr(BulkWriter, "HOLD", False)
    import_books(rows, [source], progress=False)
    assert book_content(held) == book_content(rows)
    assert_complete(held)


def test_an_apery_import_links_its_positions(tmp_path):
    book = import_book(tmp_path, shuffle_book(8, positions=40))
    refine_minimax(book)
    apery = tmp_path / "book.bin"
    run_cli("export", "-b", book, "-o", apery, "--format", "apery")
    imported = tmp_path / "apery.sqlite"
    import_books(imported, [apery], progress=False)
    assert_complete(imported)
    refine_both_ways(imported)


def test_a_merge_links_the_merged_book(tmp_path):
    first = import_book(tmp_path, shuffle_book(21, positions=30), "first")
    second = import_book(tmp_path, check_book(22, positions=30), "second")
    merged = tmp_path / "merged.sqlite"
    run_cli("merge", "-o", merged, first, second)
    assert_complete(merged)
    refine_both_ways(merged)
    # into a book whose links were complete, and one that never had them
    forget_links(first)
    run_cli("merge", "-o", first, second)
    assert_complete(first)
    refine_both_ways(first)


# ------------------------------------------------------------------ writers keep or clear it


def test_grow_after_an_import_clears_the_marker_and_refine_scans(tmp_path):
    book = import_book(tmp_path, shuffle_book(31, positions=30))
    assert_complete(book)
    run_cli("grow", "-b", book, "--playouts", 20, "--positions", 6, "--seed", 2)
    assert not marked(book)        # grow added nodes: their links are not stored
    assert missing_links(book) != []
    refine_both_ways(book)          # a scan, which stores them and sets the marker


def test_a_new_node_clears_the_marker_whoever_writes_it(tmp_path):
    """The schema's trigger: the first moves row of a position clears the marker; a
    row of a position that has moves, or a position without moves, does not."""
    book = import_book(tmp_path, shuffle_book(41, positions=20))
    conn = sqlite3.connect(book)
    with conn:
        run = conn.execute("SELECT max(id) FROM runs").fetchone()[0]
        conn.execute("INSERT INTO positions(sfen, zobrist, ply, turn) VALUES ('x', 0, 1, 0)")
        leaf = conn.execute("SELECT id FROM positions WHERE sfen = 'x'").fetchone()[0]
        node = conn.execute("SELECT min(position_id) FROM moves").fetchone()[0]
        conn.execute("INSERT INTO moves(position_id, move, count, run_id) "
                     "VALUES (?, '9i9h', 1, ?)", (node, run))
    assert marked(book)
    with conn:
        conn.execute("INSERT INTO moves(position_id, move, count, run_id) "
                     "VALUES (?, '1g1f', 1, ?)", (leaf, run))
    assert not marked(book)
    conn.close()


def test_refine_on_a_book_without_the_marker_scans_and_sets_it(tmp_path):
    book = import_book(tmp_path, shuffle_book(51, positions=30))
    forget_links(book)
    assert missing_links(book) != []
    refine_both_ways(book)


def test_refine_from_links_never_scans(tmp_path, monkeypatch):
    from bookgen.refine import minimax_graph

    book = import_book(tmp_path, shuffle_book(61, positions=30))

    def no_scan(*args, **kwargs):
        raise AssertionError("scanned a book whose links are complete")

    monkeypatch.setattr(minimax_graph, "find_legal_edges", no_scan)
    refine_minimax(book)
    assert_complete(book)


# ------------------------------------------------------------------ kill -9


@pytest.mark.parametrize("fault", ["import-moves-written", "import-rows-written",
                                   "import-before-commit"])
def test_sigkill_during_a_linked_import_leaves_no_book_data(tmp_path, fault):
    source = write_db2016(tmp_path / "b.db", blocks_of(shuffle_book(71, positions=40)))
    book = tmp_path / "book.sqlite"
    proc = run_bookgen_process("import", source, "-b", book, env={"BOOKGEN_FAULT": fault})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    if book.exists():
        conn = sqlite3.connect(book)
        assert conn.execute("SELECT count(*) FROM positions").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM moves").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM meta WHERE key = 'links'").fetchone()[0] == 0
        conn.close()
    import_books(book, [source], progress=False)
    assert_complete(book)


def test_sigkill_during_a_scanning_refine_leaves_the_book(tmp_path):
    book = import_book(tmp_path, shuffle_book(81, positions=30))
    forget_links(book)
    before = book_content(book)
    proc = run_bookgen_process("refine", "minimax", "-b", book,
                               env={"BOOKGEN_FAULT": "refine-minimax-moves-written"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert book_content(book) == before
    assert not marked(book)


def test_the_index_of_a_linked_book_resolves_nothing(tmp_path, monkeypatch):
    """BookIndex plays no move of a book whose links are complete and whose every
    position has moves; it finds the same children as by playing them."""
    from bookgen.store import Book, MoveRows, index as store_index
    from bookgen.store.index import BookIndex, IndexSpec

    book = import_book(tmp_path, shuffle_book(91, positions=40))
    unlinked = tmp_path / "unlinked.sqlite"
    shutil.copy(book, unlinked)
    forget_links(unlinked)

    def children(path: Path) -> set[tuple[str, str, str]]:
        with Book(path, create=False, readonly=True) as store:
            index = BookIndex.load(store, IndexSpec(rows=MoveRows.OWN))
            sfens = dict(index.sfen)
            found = set()
            for pid in index.ids.tolist():
                for edge in index.edges[pid]:
                    if edge.child is not None:
                        found.add((sfens[pid], edge.move, sfens[edge.child]))
            return found

    by_playing = children(unlinked)

    def no_resolution(*args, **kwargs):
        raise AssertionError("played the moves of a linked book")

    monkeypatch.setattr(store_index, "resolve_children", no_resolution)
    assert by_playing and children(book) == by_playing
    with pytest.raises(AssertionError):
        children(unlinked)


def test_a_version_2_book_migrates_without_the_marker(tmp_path):
    """Version 3 adds the trigger; a migrated book has no marker until a refine or an
    import stores its links."""
    book = import_book(tmp_path, shuffle_book(95, positions=20))
    forget_links(book)
    conn = sqlite3.connect(book)
    with conn:
        conn.execute("DROP TRIGGER links_new_node")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    refine_both_ways(book)
    conn = sqlite3.connect(book)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'links_new_node'").fetchone()
    conn.close()


def test_a_load_with_a_text_that_is_no_move_goes_row_by_row(tmp_path):
    """A ponder text cshogi has no move16 for: the held moves go to the row-by-row
    writer, and the links are still stored."""
    import cshogi

    from bookgen.store import Book

    board = cshogi.Board()
    start = board.sfen().rsplit(" ", 1)[0]
    board.push_usi("7g7f")
    after = board.sfen().rsplit(" ", 1)[0]
    path = tmp_path / "book.sqlite"
    with Book(path) as book, book.transaction():
        run = book.begin_run("import", {})
        writer = BulkWriter(book, run)
        writer.add_rows([(0, start, 1, 1, 0), (1, after, 2, 2, 1)],
                        [(0, "2g2f", "8c8d", 10, 1, 1), (1, "3c3d", None, 5, 1, 1)])
        writer.add_rows([(0, start, 1, 1, 0)], [(0, "1g1f", "pass", 3, 1, 1)])
        assert writer.finish() == (2, 3, 0)
        book.end_run(run)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT ponder FROM moves WHERE move = '1g1f'").fetchone() == ("pass",)
    conn.close()
    assert_complete(path)


def test_side_to_move_in_check_agrees_with_cshogi():
    """The vectorised check test refine reads from the boards of a linked book."""
    import random

    import cshogi
    import numpy as np

    from bookgen.position import side_to_move_in_check

    rng = random.Random(13)
    board = cshogi.Board()
    sfens, checks = [], []
    for _game in range(60):
        board.reset()
        for _ply in range(rng.randint(1, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            checking = [m for m in moves if board.is_check() or rng.random() < 0.05]
            board.push(rng.choice(checking or moves))
            sfens.append(board.sfen().rsplit(" ", 1)[0])
            checks.append(board.is_check())
    assert 0 < sum(checks) < len(checks)
    assert side_to_move_in_check(sfens, block=97).tolist() == checks
    assert side_to_move_in_check([s + " 1" for s in sfens]).tolist() == checks   # move numbers
    assert side_to_move_in_check([]).tolist() == np.zeros(0, dtype=bool).tolist()


def test_the_graph_from_links_is_the_scans_with_the_checks_of_the_cycle_nodes(tmp_path):
    """The linked graph reads the checks only of nodes on a cycle (the solver's only
    use of them): everything else is the scan's graph, the checks the scan's there,
    and the solver's perpetual-check components the same."""
    import numpy as np

    from bookgen.refine import minimax_graph as graph
    from bookgen.refine.retrograde import analyse
    from bookgen.store import Book
    from test_minimax import GRAPH_FIELDS

    seen = {"cycle_nodes": 0, "checks": 0, "checks_off_cycles": 0}
    books = [shuffle_book(seed, positions=60, push_rate=0.3) for seed in range(2)]
    books += [check_book(seed) for seed in range(3)]
    for number, book in enumerate(books):
        work = tmp_path / str(number)
        work.mkdir()
        path = import_book(work, book)
        assert_complete(path)
        with Book(path) as store:
            linked = graph.build_graph(store)
            scanned = graph.build_graph(store, workers=1, rescan=True)
        for name in GRAPH_FIELDS:
            if name != "in_check":
                assert np.array_equal(getattr(linked, name), getattr(scanned, name)), name
        edges = scanned.target >= 0
        on_cycle = graph.cycle_nodes(scanned.nodes, scanned.source[edges],
                                     scanned.target[edges])
        off_cycle = np.setdiff1d(np.arange(scanned.nodes), on_cycle)
        assert linked.in_check[on_cycle].tolist() == scanned.in_check[on_cycle].tolist()
        assert not linked.in_check[off_cycle].any()
        assert np.array_equal(analyse(linked).checking, analyse(scanned).checking)
        seen["cycle_nodes"] += len(on_cycle)
        seen["checks"] += int(scanned.in_check[on_cycle].sum())
        seen["checks_off_cycles"] += int(scanned.in_check[off_cycle].sum())
    assert all(seen.values()), seen   # the books have cycles, checks on and off them


def test_cycle_nodes_are_the_members_of_strong_components_with_a_cycle():
    import numpy as np

    from bookgen.refine.minimax_graph import cycle_nodes

    # 0 -> 1 -> 2 -> 0 (a cycle), 2 -> 3 -> 4 -> 3 (another), 5 -> 0 (none), 6 alone
    source = np.array([0, 1, 2, 2, 3, 4, 5])
    target = np.array([1, 2, 0, 3, 4, 3, 0])
    assert cycle_nodes(7, source, target).tolist() == [0, 1, 2, 3, 4]
    assert cycle_nodes(3, np.array([0, 1]), np.array([1, 2])).tolist() == []
    assert cycle_nodes(0, np.empty(0, np.int64), np.empty(0, np.int64)).tolist() == []


def test_load_sfens_of_reads_the_positions_asked_for_in_their_order(tmp_path):
    import numpy as np

    from bookgen.store import Book
    from bookgen.store.columns import load_sfens, load_sfens_of

    path = import_book(tmp_path, shuffle_book(1, positions=20))
    conn = sqlite3.connect(path)
    ids = [i for (i,) in conn.execute("SELECT id FROM positions ORDER BY id")]
    conn.close()
    with Book(path) as store:
        every = dict(zip(ids, load_sfens(store.conn)))
        wanted = np.array([ids[5], ids[0], ids[-1], ids[2]])
        assert load_sfens_of(store.conn, wanted) == [every[i] for i in wanted.tolist()]
        assert load_sfens_of(store.conn, np.empty(0, np.int64)) == []
        with pytest.raises(RuntimeError, match="changed"):
            load_sfens_of(store.conn, np.array([ids[0], max(ids) + 1]))
