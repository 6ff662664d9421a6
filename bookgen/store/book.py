"""The book store: one SQLite file per book, opened through :class:`Book`.

A :class:`Book` wraps a ``sqlite3`` connection in autocommit mode; writers
group their work in :meth:`Book.transaction` so that a book is changed by a
command entirely or not at all (WAL mode: a process killed mid-transaction
leaves the previous book). Bulk loads go through
:class:`bookgen.store.bulk.BulkWriter`.

One writer at a time: a ``Book`` opened for writing holds the book's writer
lock (:mod:`bookgen.store.lock`, the sidecar file ``NAME-lock``) until it is
closed; a second writing process gets :class:`bookgen.store.lock.BookLocked`
naming the first, or waits with ``wait=True``. Read-only books
(``readonly=True``) never take it and are never blocked.

Failures of the file itself surface as
:class:`bookgen.store.connection.StorageError`, a one-line
:class:`BookgenError` naming the file. Books that cannot be written are read
through :func:`bookgen.store.connection.connect_readonly`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from bookgen import __version__
from bookgen.errors import BookgenError
from bookgen.files import unwritable_reason
from bookgen.signals import fault_point, interrupts_held
from bookgen.store import lock, queries
from bookgen.store.connection import (
    UNREADABLE,
    Connection,
    StorageError,
    close_writer,
    connect,
    connect_readonly,
)
from bookgen.store.own_moves import MoveRows, own_rows_sql
from bookgen.store.schema import BOOK_TABLES, MIGRATIONS, SCHEMA_VERSION
from bookgen.timestamps import utc_now

__all__ = ["DEFAULT_BOOK", "Book", "BookMove", "sort_moves"]

DEFAULT_BOOK = "book.sqlite"


BOOK_CACHE_KIB = 256 << 10   # a writer's SQLite page cache

def _user_version(path: Path) -> int:
    try:
        conn = connect_readonly(path)
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0  # not a database: the normal open reports it




class Book:
    """An open book file.

    ``Book(path)`` opens an existing book or creates a new one; with
    ``create=False`` a missing file is an error; ``readonly=True`` never writes
    the book's data (an older book is migrated first when the file is
    writable, and refused when it is not).

    A book opened for writing holds the book's writer lock until
    :meth:`close`: while it is open, a writer in another process fails with
    :class:`bookgen.store.lock.BookLocked` naming this one, or waits with
    ``wait=True``. Within one process writers share the lock. A book that
    cannot be written (read-only file, directory or medium) is refused for
    writing with a one-line error and read with :func:`connect_readonly`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, wait: bool = False) -> None:
        self.path = Path(path)
        self.created = False   # True when this opener created the book's schema
        self.commits = 0       # transactions committed through this object
        self.interrupted = False  # Ctrl-C arrived while a COMMIT was running
        self._lock: str | None = None
        if not self.path.exists():
            if not create or readonly:
                raise BookgenError(f"{self.path}: no such book")
            if self.path.parent and not self.path.parent.exists():
                raise BookgenError(f"{self.path}: directory {self.path.parent} does not exist")
        elif self.path.is_dir():
            raise BookgenError(f"{self.path}: is a directory, not a book")
        self._existed = self.path.exists()
        if not readonly:
            reason = unwritable_reason(self.path)
            if reason is not None:
                raise StorageError(f"{self.path}: {reason}, cannot write")
            self._lock = lock.acquire(self.path, wait=wait)
        elif self._existed and unwritable_reason(self.path) is None and \
                0 < _user_version(self.path) < SCHEMA_VERSION:
            try:
                Book(self.path, create=False).close()  # migrate first, then read
            except lock.BookLocked:
                pass  # its writer has migrated it
        try:
            self.conn = self._connect(readonly)
            self.conn.execute("PRAGMA busy_timeout = 10000")
            self._check_and_migrate(readonly)
            if not readonly:
                self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute(f"PRAGMA cache_size = -{BOOK_CACHE_KIB}")
        except StorageError as error:
            self._close_quietly()
            if error.code in UNREADABLE:
                raise BookgenError(f"{self.path}: not a readable SQLite book "
                                   f"({error.detail})") from None
            raise
        except sqlite3.DatabaseError as error:
            self._close_quietly()
            raise BookgenError(f"{self.path}: not a readable SQLite book ({error})") from None
        except BaseException:
            self._close_quietly()
            raise

    # -- opening -------------------------------------------------------------

    def _kept(self) -> str:
        """What the book holds after a write failed (for error messages)."""
        if self.commits == 0:
            return "the book is unchanged"
        return "the book keeps what was committed before"

    def _connect(self, readonly: bool) -> Connection:
        if readonly:
            conn = connect_readonly(self.path)
        else:
            conn = connect(self.path, self.path.resolve().as_uri(), isolation_level=None,
                           check_same_thread=False)
        conn.kept = self._kept
        return conn

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        # Opening may have created an empty file; leave nothing behind.
        if not self._existed and self.path.exists() and self.path.stat().st_size == 0:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        self._release()

    @property
    def writing(self) -> bool:
        """True while this object holds the book's writer lock."""
        return self._lock is not None

    def _release(self) -> None:
        if self._lock is not None:
            lock.release(self._lock)
            self._lock = None

    def _check_and_migrate(self, readonly: bool) -> None:
        if readonly:
            self._check_version(readonly)
            return
        # Under the write lock, so that two processes creating the same book
        # cannot both run the creation.
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._check_version(readonly)
            if version < SCHEMA_VERSION:
                self._migrate(version)
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self.created = version == 0

    def _check_version(self, readonly: bool) -> int:
        """The book's schema version; raises if bookgen cannot use the file."""
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and tables:
            raise BookgenError(
                f"{self.path}: SQLite file without bookgen schema "
                f"(tables: {', '.join(sorted(tables))})")
        if version > SCHEMA_VERSION:
            raise BookgenError(
                f"{self.path}: book schema version {version} is newer than this "
                f"bookgen supports ({SCHEMA_VERSION}); upgrade bookgen")
        if version == SCHEMA_VERSION:
            missing = [t for t in BOOK_TABLES if t not in tables]
            if missing:
                raise BookgenError(f"{self.path}: damaged book, missing tables {missing}")
        elif readonly:
            raise BookgenError(
                f"{self.path}: book schema version {version} needs migration to "
                f"{SCHEMA_VERSION}; open it once for writing")
        return int(version)

    def _migrate(self, version: int) -> None:
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                try:
                    self.conn.execute(statement)
                except StorageError:
                    raise
                except sqlite3.Error as error:
                    raise BookgenError(f"{self.path}: migration to schema version {step + 1} "
                                       f"failed ({error}); the book is unchanged") from None
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                          (str(SCHEMA_VERSION),))
        if version == 0:
            self.conn.execute("INSERT INTO meta(key, value) VALUES ('created_at', ?), "
                              "('created_by', ?)", (utc_now(), f"bookgen {__version__}"))
        self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connection (the last one checkpoints and removes the
        ``-wal``/``-shm`` files; see :func:`close_writer`), then give back the
        writer lock."""
        try:
            if self._lock is not None:
                close_writer(self.conn, self.path)
            else:
                self.conn.close()
        finally:
            self._release()

    def discard_if_unused(self) -> None:
        """Close, and delete the book if this object created it and nothing was
        committed to it since (a failed first import leaves no empty book)."""
        unused = self.created and self.commits == 0
        if unused:
            try:
                row = self.conn.execute(
                    "SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM positions)"
                ).fetchone()
                unused = row[0] == 0
            except sqlite3.Error:
                pass
        try:
            if unused:
                self.conn.close()
            else:
                close_writer(self.conn, self.path)
            if unused:  # still under the lock: no other writer has it open
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(str(self.path) + suffix).unlink(missing_ok=True)
        finally:
            self._release()

    def __enter__(self) -> Book:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions and runs -------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception.

        Ctrl-C during the COMMIT itself is held back until the commit is done
        and then only recorded in ``self.interrupted``: the caller's work did
        land, and the caller decides whether to stop.
        """
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self._rollback()
            raise
        with interrupts_held() as held:
            fault_point("book-commit")  # a Ctrl-C from here on comes during the COMMIT
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            self.commits += 1
        fault_point("book-committed")
        if held:
            self.interrupted = True

    def _rollback(self) -> None:
        # SQLite rolls back by itself after some errors (disk full, I/O errors).
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def begin_run(self, command: str, params: dict[str, Any],
                  evaluator: str | None = None) -> int:
        cursor = self.conn.execute(
            "INSERT INTO runs(command, params, evaluator, started_at, bookgen_version) "
            "VALUES (?, ?, ?, ?, ?)",
            (command, json.dumps(params, sort_keys=True, default=str), evaluator, utc_now(),
             __version__))
        run_id = cursor.lastrowid
        assert run_id is not None  # set by the INSERT
        return run_id

    def end_run(self, run_id: int, *, status: str = "done", positions_added: int = 0,
                moves_added: int = 0, moves_updated: int = 0,
                counts: dict[str, Any] | None = None) -> None:
        self.conn.execute(
            "UPDATE runs SET ended_at = ?, status = ?, positions_added = ?, "
            "moves_added = ?, moves_updated = ?, counts = ? WHERE id = ?",
            (utc_now(), status, positions_added, moves_added, moves_updated,
             json.dumps(counts or {}, sort_keys=True), run_id))

    def runs(self) -> list[sqlite3.Row]:
        self.conn.row_factory = sqlite3.Row
        try:
            return self.conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
        finally:
            self.conn.row_factory = None

    # -- queries -------------------------------------------------------------

    def count_positions(self) -> int:
        return queries.count_positions(self.conn)

    def count_moves(self, rows: MoveRows = MoveRows.ALL) -> int:
        """The number of ``moves`` rows (all of them unless ``rows`` says own)."""
        return queries.count_moves(self.conn, rows)

    def find_position(self, sfen: str) -> tuple[int, int | None] | None:
        """(id, ply) of a position by normalised sfen, or None."""
        row = self.conn.execute(
            "SELECT id, ply FROM positions WHERE sfen = ?", (sfen,)).fetchone()
        return None if row is None else (row[0], row[1])

    def moves_of(self, position_id: int, rows: MoveRows = MoveRows.OWN) -> list[BookMove]:
        """The moves of a position (the book's own unless ``rows`` says all), best first."""
        where = f" AND {own_rows_sql()}" if rows == MoveRows.OWN else ""
        found = self.conn.execute(
            "SELECT move, ponder, value, depth, count FROM moves m WHERE position_id = ?"
            f"{where}", (position_id,)).fetchall()
        return sort_moves([BookMove(*row) for row in found])

    def iter_blocks(self) -> Iterator[tuple[str, int | None, list[BookMove]]]:
        """Every position that has moves, sorted by sfen, with its moves best first
        (the book's own moves, raw values: refine's transposition rows are left out)."""
        cursor = self.conn.execute(
            "SELECT p.sfen, p.ply, m.move, m.ponder, m.value, m.depth, m.count "
            f"FROM positions p JOIN moves m ON m.position_id = p.id WHERE {own_rows_sql()} "
            "ORDER BY p.sfen")
        current: str | None = None
        ply: int | None = None
        block: list[BookMove] = []
        for sfen, row_ply, move, ponder, value, depth, count in cursor:
            if sfen != current:
                if current is not None:
                    yield current, ply, sort_moves(block)
                current, ply, block = sfen, row_ply, []
            block.append(BookMove(move, ponder, value, depth, count))
        if current is not None:
            yield current, ply, sort_moves(block)


class BookMove(NamedTuple):
    """One book move. ``None`` stands for DB2016's ``none`` (no ponder, value, depth)."""

    move: str
    ponder: str | None
    value: int | None
    depth: int | None
    # The field shadows tuple.count (mypy: a Liskov violation); renaming DB2016's and the moves
    # table's "count" everywhere is not worth it, and tuple.count() is never called on a move.
    count: int  # type: ignore[assignment]


def sort_moves(moves: Sequence[BookMove]) -> list[BookMove]:
    """Best first: value descending (no value last), then count descending, then move."""
    return sorted(moves, key=lambda m: (m[2] is None, -(m[2] or 0), -m[4], m[0]))


