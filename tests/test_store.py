"""The SQLite store: schema version, runs, WAL, refusing foreign files, plain sqlite3 access."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import cshogi
import pytest

from bookgen.errors import BookgenError
from bookgen.store import Book
from bookgen.store.schema import SCHEMA_VERSION
from conftest import (
    STARTPOS,
    book_entries,
    dump_book,
    integrity_ok,
    key_of,
    legal_usis,
    run_cli,
    write_db2016,
)

START_KEY = STARTPOS.rsplit(" ", 1)[0]


def small_book(tmp_path: Path, name: str = "book.sqlite") -> Path:
    board = cshogi.Board()
    blocks = []
    for usi in ("7g7f", "3c3d", "2g2f"):
        blocks.append((board.sfen(),
                       [(usi, None, 10, 5, 2), (legal_usis(board)[-1], None, -3, 1, 1)]))
        board.push_usi(usi)
    write_db2016(tmp_path / "small.db", blocks)
    book = tmp_path / name
    run_cli("import", tmp_path / "small.db", "-b", book)
    return book


def test_schema_version_in_user_version_and_meta(tmp_path):
    book = small_book(tmp_path)
    conn = sqlite3.connect(book)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 1
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert "created_at" in meta and "created_by" in meta
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"meta", "runs", "positions", "moves"} <= tables
    finally:
        conn.close()


def test_wal_journal_mode(tmp_path):
    book = small_book(tmp_path)
    conn = sqlite3.connect(book)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    finally:
        conn.close()


def test_runs_row_per_import_and_merge(tmp_path):
    book = small_book(tmp_path)
    write_db2016(tmp_path / "more.db", [(STARTPOS, [("5g5f", "8c8d", 1, 2, 3),
                                                    ("7g7f", None, 99, 99, 99)])])
    run_cli("import", tmp_path / "more.db", "-b", book)
    conn = sqlite3.connect(book)
    conn.row_factory = sqlite3.Row
    runs = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    conn.close()
    assert [r["command"] for r in runs] == ["import", "import"]
    assert all(r["status"] == "done" for r in runs)
    assert all(r["started_at"] and r["ended_at"] for r in runs)
    first, second = runs
    params = json.loads(first["params"])
    assert params["sources"] == [str(tmp_path / "small.db")]
    assert json.loads(second["params"])["sources"] == [str(tmp_path / "more.db")]
    assert (first["positions_added"], first["moves_added"], first["moves_updated"]) == (3, 6, 0)
    assert (second["positions_added"], second["moves_added"], second["moves_updated"]) == (0, 1, 1)
    counts = json.loads(second["counts"])
    assert counts["positions_read"] == 1 and counts["moves_read"] == 2

    # Moves record which run wrote them.
    conn = sqlite3.connect(book)
    by_run = dict(conn.execute(
        "SELECT m.move, m.run_id FROM moves m JOIN positions p ON p.id = m.position_id "
        "WHERE p.sfen = ?", (START_KEY,)).fetchall())
    conn.close()
    assert by_run["5g5f"] == second["id"] and by_run["7g7f"] == second["id"]

    other = small_book(tmp_path, "other.sqlite")
    run_cli("merge", book, other, "-o", tmp_path / "merged.sqlite")
    conn = sqlite3.connect(tmp_path / "merged.sqlite")
    conn.row_factory = sqlite3.Row
    merged_runs = conn.execute("SELECT * FROM runs").fetchall()
    conn.close()
    assert [r["command"] for r in merged_runs] == ["merge"]
    assert merged_runs[0]["status"] == "done"
    assert json.loads(merged_runs[0]["params"])["sources"] == [str(book), str(other)]
    assert merged_runs[0]["positions_added"] == 3


def test_failed_import_adds_no_run(tmp_path):
    book = small_book(tmp_path)
    (tmp_path / "bad.db").write_text("sfen 9/9/9/9/9/9/9/9/9 b - 0\nnone none 1 1 1\n")
    run_cli("import", "--strict", tmp_path / "bad.db", "-b", book, expect=2)
    assert len(dump_book(book)["runs"]) == 1


def test_plain_sqlite3_inspection(tmp_path):
    book = small_book(tmp_path)
    conn = sqlite3.connect(book.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        rows = conn.execute("SELECT sfen, ply, turn, zobrist FROM positions").fetchall()
        assert len(rows) == 3
        for sfen, ply, turn, zobrist in rows:
            board = cshogi.Board(f"{sfen} {ply}")
            assert key_of(board) == sfen
            assert turn == board.turn
            unsigned = board.zobrist_hash()
            assert zobrist == (unsigned - 2**64 if unsigned >= 2**63 else unsigned)
        assert conn.execute("SELECT count(*) FROM moves").fetchone()[0] == 6
    finally:
        conn.close()
    # The library's view equals what plain SQL sees.
    with Book(book, create=False, readonly=True) as store:
        blocks = list(store.iter_blocks())
    assert {(s, *m) for s, _p, moves in blocks for m in moves} == book_entries(book)


def test_readonly_commands_do_not_modify(tmp_path):
    book = small_book(tmp_path)
    before = dump_book(book)
    run_cli("stats", "-b", book)
    run_cli("show", "-b", book)
    run_cli("export", "-o", tmp_path / "x.db", "-b", book)
    assert dump_book(book) == before
    assert integrity_ok(book)


# ---------------------------------------------------------------- refusing foreign files


def make_text_file(path: Path) -> Path:
    path.write_text("this is not a database, just text\n" * 20)
    return path


def make_foreign_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers(name) VALUES ('x')")
    conn.commit()
    conn.close()
    return path


def make_newer_book(path: Path, tmp_path: Path) -> Path:
    book = small_book(tmp_path, path.name)
    conn = sqlite3.connect(book)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    return book


FOREIGN = {
    "text": lambda tmp: make_text_file(tmp / "notes.sqlite"),
    "other sqlite": lambda tmp: make_foreign_sqlite(tmp / "shop.sqlite"),
    "newer book": lambda tmp: make_newer_book(tmp / "future.sqlite", tmp),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
@pytest.mark.parametrize("readonly", [False, True])
def test_library_refuses_foreign_files(tmp_path, kind, readonly):
    path = FOREIGN[kind](tmp_path)
    with pytest.raises(BookgenError):
        Book(path, create=False, readonly=readonly)


@pytest.mark.parametrize("kind", sorted(FOREIGN))
@pytest.mark.parametrize("command", ["stats", "show", "import", "export", "merge-in", "merge-out"])
def test_cli_refuses_foreign_files(tmp_path, kind, command):
    path = FOREIGN[kind](tmp_path)
    content_before = path.read_bytes()
    write_db2016(tmp_path / "in.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    args = {
        "stats": ["stats", "-b", path],
        "show": ["show", "-b", path],
        "import": ["import", tmp_path / "in.db", "-b", path],
        "export": ["export", "-o", tmp_path / "out.db", "-b", path],
        "merge-in": ["merge", path, "-o", tmp_path / "merged.sqlite"],
        "merge-out": ["merge", small_book(tmp_path, "src.sqlite"), "-o", path],
    }[command]
    result = run_cli(*args, expect=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bookgen: error:")
    assert str(path) in lines[0]
    assert "Traceback" not in result.output + result.stderr
    assert path.read_bytes() == content_before, "a refused file was modified"
    assert not (tmp_path / "out.db").exists()
    assert not (tmp_path / "merged.sqlite").exists()


def test_missing_book_for_read_commands(tmp_path):
    for args in (["stats"], ["show"], ["export", "-o", tmp_path / "o.db"]):
        result = run_cli(*args, "-b", tmp_path / "none.sqlite", expect=2)
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "none.sqlite").exists()


# ---------------------------------------------------------------- concurrent creation


class _SyncedSqlite:
    """Stands in for the sqlite3 module inside bookgen.store.connection: every connect() and the
    first 'BEGIN IMMEDIATE' of each connection wait at a barrier, so two threads
    opening the same new book interleave the way two processes started together can."""

    def __init__(self, parties: int):
        import threading

        self._connect_barrier = threading.Barrier(parties, timeout=20)
        self._begin_barrier = threading.Barrier(parties, timeout=20)

    def _synced(self, base):
        """A subclass of the connection class bookgen asked for (``factory``)."""
        outer = self

        class Connection(base):
            synced = False

            def execute(self, sql, *args):
                if sql.strip().upper().startswith("BEGIN IMMEDIATE") and not self.synced:
                    self.synced = True
                    outer._begin_barrier.wait()
                return super().execute(sql, *args)

        return Connection

    def connect(self, *args, factory=sqlite3.Connection, **kwargs):
        self._connect_barrier.wait()
        return sqlite3.connect(*args, factory=self._synced(factory), **kwargs)

    def __getattr__(self, name):
        return getattr(sqlite3, name)


def test_two_writers_creating_the_same_new_book(tmp_path, monkeypatch):
    """Two imports started together on a book that does not exist yet (as in two
    shell jobs `bookgen import a.db -b new.sqlite & bookgen import b.db -b new.sqlite`).

    Both read user_version 0 before either takes the write lock; the second then
    re-runs the version-1 migration. Whatever happens to the second opener, the
    book created by the first must survive: bookgen must not delete a file that
    another process created and is writing."""
    import threading

    import bookgen.store.connection

    monkeypatch.setattr(bookgen.store.connection, "sqlite3", _SyncedSqlite(2))
    path = tmp_path / "new.sqlite"
    outcomes: list[object] = [None, None]

    def open_book(index: int) -> None:
        try:
            outcomes[index] = Book(path)
        except Exception as error:  # noqa: BLE001 - recorded for the assertion
            outcomes[index] = error

    threads = [threading.Thread(target=open_book, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    monkeypatch.undo()
    opened = [o for o in outcomes if isinstance(o, Book)]
    errors = [o for o in outcomes if not isinstance(o, Book)]
    try:
        assert opened, f"neither opener succeeded: {errors}"
        assert path.exists(), (
            f"the book created by one opener was deleted by the other, which failed with "
            f"{errors!r}")
        assert errors == [], f"a concurrent opener of a new book failed: {errors!r}"
    finally:
        for book in opened:
            book.close()


def test_migration_to_a_new_version_keeps_data(tmp_path, monkeypatch):
    """A book of the current version is migrated in place when a later version
    adds a table and a column: its data survives, read-only opens refuse it
    until then, and the version is bumped in both places."""
    from bookgen.store import book as store, schema

    book = small_book(tmp_path)
    before = dump_book(book)
    step = ["CREATE TABLE extra (id INTEGER PRIMARY KEY, note TEXT)",
            "ALTER TABLE positions ADD COLUMN note TEXT"]
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + [step])
    monkeypatch.setattr(store, "MIGRATIONS", schema.MIGRATIONS)
    monkeypatch.setattr(store, "SCHEMA_VERSION", SCHEMA_VERSION + 1)

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == book
                        else real_access(path, mode))
    with pytest.raises(BookgenError, match="needs migration"):  # a read-only file
        Book(book, create=False, readonly=True)
    monkeypatch.setattr(os, "access", real_access)
    Book(book, create=False, readonly=True).close()  # writable: migrated, then read
    conn = sqlite3.connect(book)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert dict(conn.execute("SELECT key, value FROM meta"))["schema_version"] == str(
            SCHEMA_VERSION + 1)
        assert conn.execute("SELECT count(*) FROM extra").fetchone()[0] == 0
        assert conn.execute("SELECT count(note) FROM positions").fetchone()[0] == 0
    finally:
        conn.close()
    after = dump_book(book)
    assert after.pop("meta") != before.pop("meta")
    assert after == before


def test_failed_migration_leaves_the_book_as_it_was(tmp_path, monkeypatch):
    from bookgen.store import book as store, schema

    book = small_book(tmp_path)
    before = dump_book(book)
    step = ["CREATE TABLE extra (id INTEGER PRIMARY KEY)", "THIS IS NOT SQL"]
    monkeypatch.setattr(store, "MIGRATIONS", schema.MIGRATIONS + [step])
    monkeypatch.setattr(store, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(BookgenError,
                       match=f"migration to schema version {SCHEMA_VERSION + 1} failed"):
        Book(book, create=False)
    conn = sqlite3.connect(book)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "extra" not in tables
    finally:
        conn.close()
    assert dump_book(book) == before


def test_grow_writes(tmp_path):
    """bookgen.store.writes' grow functions: upserts keep the smaller ply, a link is
    set only where none is, a move upsert overwrites but keeps minimax values."""
    from bookgen.store import queries, writes

    with Book(tmp_path / "book.sqlite") as book, book.transaction() as conn:
        run = book.begin_run("grow", {})
        parent, new = writes.upsert_position(conn, "P", 11, 4, 0, run)
        assert new
        assert writes.upsert_position(conn, "P", 11, 6, 0, run) == (parent, False)
        assert writes.upsert_position(conn, "P", 11, 2, 0, run) == (parent, False)
        child, _ = writes.upsert_position(conn, "C", 12, None, 1, run)
        other, _ = writes.upsert_position(conn, "O", 13, None, 1, run)
        assert conn.execute("SELECT sfen, zobrist, ply, turn, created_run FROM positions "
                            "ORDER BY id").fetchall() == [
            ("P", 11, 2, 0, run), ("C", 12, None, 1, run), ("O", 13, None, 1, run)]
        writes.upsert_grown_move(conn, writes.GrownMoveRow(
            parent, "7g7f", "3c3d", 30, 2, 5, 100, 0.5, 0.6, child, 25, run))
        conn.execute("UPDATE moves SET minimax_value = 7, child_id = NULL")
        assert queries.move_names(conn, parent) == {"7g7f"}
        assert writes.link_child(conn, parent, "7g7f", child)
        assert not writes.link_child(conn, parent, "7g7f", other)
        writes.link_children(conn, [(other, parent, "7g7f")])
        writes.set_move_line(conn, parent, "7g7f", -40, 3, "8c8d")
        writes.upsert_grown_move(conn, writes.GrownMoveRow(
            parent, "2g2f", None, 10, 1, 1, None, None, None, child, 10, run))
        assert conn.execute(
            "SELECT move, ponder, value, depth, count, child_id, minimax_value FROM moves "
            "ORDER BY move").fetchall() == [("2g2f", None, 10, 1, 1, child, None),
                                            ("7g7f", "8c8d", -40, 3, 5, other, 7)]
        writes.record_expansion(conn, parent, 100, 35, 0.55, run)
        writes.set_position_value(conn, child, -12)
        assert conn.execute("SELECT visits, value, win_rate, expanded_run FROM positions "
                            "WHERE id = ?", (parent,)).fetchone() == (100, 35, 0.55, run)
        assert conn.execute("SELECT id, value, expanded_run FROM positions ORDER BY id"
                            ).fetchall() == [(parent, 35, run), (child, -12, None),
                                             (other, None, None)]


def test_version_4_indexes_mistakes_by_size(tmp_path):
    """Version 4's index gives the explorer's mistakes list (largest |difference| first,
    ties by run, iteration, position) without sorting the table: a version 3 book
    (no index) migrates to it, and every page equals the order sorted here."""
    import random

    from bookgen.store.browse import largest_mistakes

    book = tmp_path / "book.sqlite"
    Book(book).close()
    conn = sqlite3.connect(book)
    rng = random.Random(4)
    with conn:
        conn.execute("DROP INDEX mistakes_size")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.execute("INSERT INTO runs (id, command, started_at, bookgen_version) VALUES "
                     "(1, 'refine mistakes', 'x', 'x'), (2, 'refine mistakes', 'x', 'x')")
        conn.executemany("INSERT INTO positions (id, sfen, zobrist, ply, turn) VALUES "
                         "(?, ?, 0, 1, 0)", [(i, f"s{i}") for i in range(1, 301)])
        rows = [(run, it, pos, rng.choice((-1, 1)) * rng.randint(0, 40))
                for run in (1, 2) for it in (0, 1) for pos in rng.sample(range(1, 301), 60)]
        conn.executemany("INSERT INTO mistakes VALUES (?, ?, ?, 1, 'diff', 0, 0, ?, NULL, "
                         "NULL, 'r', 'x')", rows)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    plan = "EXPLAIN QUERY PLAN SELECT * FROM mistakes k ORDER BY abs(k.difference) DESC, " \
           "k.run_id, k.iteration, k.position_id LIMIT 10"

    def pages(conn: sqlite3.Connection) -> list[tuple[int, int, int, int]]:
        conn.row_factory = sqlite3.Row
        found = []
        for offset in range(0, 240, 50):
            total, page = largest_mistakes(conn, 50, offset)
            assert total == 240
            found += [(r["run_id"], r["iteration"], r["position_id"], r["difference"])
                      for r in page]
        return found

    expected = sorted(rows, key=lambda r: (-abs(r[3]), r[0], r[1], r[2]))
    conn = sqlite3.connect(book)
    assert "mistakes_size" not in " ".join(r[3] for r in conn.execute(plan))
    assert pages(conn) == expected     # the same order without the index, sorting
    conn.close()
    Book(book, create=False).close()   # migrates
    conn = sqlite3.connect(book)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert "USING INDEX mistakes_size" in " ".join(r[3] for r in conn.execute(plan))
    assert pages(conn) == expected
    conn.close()
