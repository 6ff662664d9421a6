"""The book store: one SQLite file per book, opened only through this module.

A :class:`Book` wraps a ``sqlite3`` connection in autocommit mode; writers
group their work in :meth:`Book.transaction` so that a book is changed by a
command entirely or not at all (WAL mode: a process killed mid-transaction
leaves the previous book). Bulk loads go through :class:`BulkWriter`.

One writer at a time: a ``Book`` opened for writing holds the book's writer
lock (:mod:`bookgen.lock`, the sidecar file ``NAME-lock``) until it is
closed; a second writing process gets :class:`bookgen.lock.BookLocked`
naming the first, or waits with ``wait=True``. Read-only books
(``readonly=True``) never take it and are never blocked.

Failures of the file itself (read-only file, directory or file system, disk
full, I/O errors, a damaged file) surface as :class:`StorageError`, a one-line
:class:`BookgenError` naming the file (:func:`sqlite_error` maps them, for
books and for the match results files). Books that cannot be written are
read through :func:`connect_readonly` (``mode=ro``, or ``immutable=1`` where
SQLite could not even create its ``-shm`` file).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from bookgen import __version__, lock
from bookgen.errors import BookgenError
from bookgen.files import disk_full_message, disk_nearly_full, unwritable_reason
from bookgen.schema import BOOK_TABLES, MIGRATIONS, SCHEMA_VERSION

DEFAULT_BOOK = "book.sqlite"

REFINE_MINIMAX_COMMAND = "refine minimax"

# A moves row (alias m) that ``refine minimax`` inserted for a transposition
# edge the book does not store: no value, no depth, count 0. Code that reads
# the book's own moves leaves these out with ``NOT <this>``.
def transposition_row_sql(schema: str = "main") -> str:
    """SQL true for a ``moves`` row (alias ``m``) that ``refine minimax`` added
    for a transposition edge, in the book attached as ``schema``."""
    return ("(m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT NULL "
            f"AND m.run_id IN (SELECT id FROM {schema}.runs "
            f"WHERE command = '{REFINE_MINIMAX_COMMAND}'))")


TRANSPOSITION_ROW_SQL = transposition_row_sql()


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@contextmanager
def _interrupts_held() -> Iterator[list[int]]:
    """Record SIGINT instead of raising it; yields the list of signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda number, _frame: received.append(number))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


class StorageError(BookgenError, sqlite3.OperationalError):
    """The file behind a connection failed: read-only, disk full, I/O error,
    damaged. A one-line :class:`BookgenError` (exit code 2) that code catching
    ``sqlite3.OperationalError`` still sees; ``code`` is SQLite's primary
    result code (0 when the failure was found before SQLite saw it),
    ``detail`` SQLite's own message."""

    def __init__(self, message: str, code: int = 0, detail: str = "",
                 disk_full: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail
        self.disk_full = disk_full


_UNREADABLE = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def sqlite_error(path: str | os.PathLike[str], error: sqlite3.Error,
                 kept: str = "the file is unchanged") -> StorageError | None:
    """What ``error`` from an SQLite file at ``path`` means, as a one-line
    :class:`StorageError`; None for errors of the SQL itself (bugs), which
    stay as they are. ``kept`` says what the file holds after a failed write."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF

    def failure(message: str) -> StorageError:
        return StorageError(message, code, str(error))

    if code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and disk_nearly_full(path)):
        return StorageError(disk_full_message(path, kept), code, str(error), disk_full=True)
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR):
        reason = unwritable_reason(path)
        if reason is not None:
            return failure(f"{path}: {reason}, cannot write")
        if code == sqlite3.SQLITE_READONLY:
            return failure(f"{path}: opened read-only, cannot write ({error})")
        what = "cannot open" if code == sqlite3.SQLITE_CANTOPEN else "I/O error"
        return failure(f"{path}: {what} ({error})")
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return failure(f"{path}: locked by another program ({error}); try again when it is "
                       "done")
    if code in _UNREADABLE:
        return failure(f"{path}: not a readable SQLite file ({error})")
    return None


class Connection(sqlite3.Connection):
    """A connection that raises :class:`StorageError` for failures of its file
    (see :func:`sqlite_error`); ``kept()`` says what a failed write leaves."""

    path: Path
    kept: Callable[[], str] = staticmethod(lambda: "the file is unchanged")
    disk_full_said = False  # a write failed with "disk full" (an error said so)

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except sqlite3.OperationalError as error:
            mapped = sqlite_error(getattr(self, "path", "database"), error, self.kept())
            if mapped is None:
                raise
            self.disk_full_said = self.disk_full_said or mapped.disk_full
            raise mapped from None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._call(super().execute, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self._call(super().executemany, sql, parameters)

    def commit(self) -> None:
        self._call(super().commit)


def connect(path: str | os.PathLike[str], uri: str | None = None,
            kept: Callable[[], str] | None = None, **options: Any) -> Connection:
    """``sqlite3.connect`` returning a :class:`Connection` for ``path`` (opened
    through ``uri`` when given)."""
    path = Path(path)
    try:
        conn = sqlite3.connect(uri if uri is not None else path, uri=uri is not None,
                               factory=Connection, **options)
    except sqlite3.Error as error:
        raise sqlite_error(path, error) or error from None
    conn.path = path
    if kept is not None:
        conn.kept = kept
    return conn


def close_writer(conn: Connection, path: Path) -> None:
    """Close a connection that wrote ``path``, folding the write-ahead log into
    the file first (SQLite does that on the last close, and removes the
    ``-wal``/``-shm`` files). On a disk too full for that, the committed
    changes stay in ``NAME-wal`` beside the file, where SQLite reads them and
    the next writer with room folds them in: this says so, in one line on
    stderr, since the file alone is then not the whole book (unless an error
    about the full disk was raised already)."""
    said = conn.disk_full_said
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except StorageError as error:
        if error.disk_full and not said:
            print(f"bookgen: warning: disk full: the last changes to {path} stay in "
                  f"{path.name}-wal until there is room to fold them in; keep the files "
                  "together", file=sys.stderr)
    finally:
        conn.close()


def _clean_wal(path: Path) -> bool:
    """True when ``path`` has no write-ahead log with content (nothing to recover)."""
    try:
        return Path(str(path) + "-wal").stat().st_size == 0
    except FileNotFoundError:
        return True


def readonly_uris(path: str | os.PathLike[str]) -> list[str]:
    """SQLite URIs that read ``path`` without changing it, best first.

    A writable file in a writable directory: ``mode=rw`` (used read-only, so
    that closing checkpoints and removes the ``-wal``/``-shm`` files). A file
    that cannot be written (read-only file, directory or medium):
    ``immutable=1`` when its write-ahead log is empty or absent (SQLite then
    needs no ``-shm`` file and creates nothing), else ``mode=ro`` to read
    the log.
    """
    path = Path(path)
    uri = path.resolve().as_uri()
    uris = [uri + "?mode=rw"] if unwritable_reason(path) is None else []
    uris.append(uri + ("?mode=ro&immutable=1" if _clean_wal(path) else "?mode=ro"))
    return uris


def connect_readonly(path: str | os.PathLike[str], **options: Any) -> Connection:
    """A ``query_only`` connection that never changes ``path`` and, once
    closed, leaves no ``-wal``/``-shm`` files behind (see :func:`readonly_uris`)."""
    path = Path(path)
    options = {"isolation_level": None, "check_same_thread": False, **options}
    *preferred, last = readonly_uris(path)
    for uri in preferred:
        try:
            conn = connect(path, uri, **options)
        except sqlite3.OperationalError:
            continue
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
    conn = connect(path, last, **options)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except StorageError as error:
        conn.close()
        if error.code not in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY,
                              sqlite3.SQLITE_IOERR) or _clean_wal(path):
            raise
        raise StorageError(
            f"{path}: its write-ahead log {path.name}-wal holds changes that cannot be read "
            f"here ({unwritable_reason(path) or error.detail}); open the book once where it "
            "can be written", error.code, error.detail) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _user_version(path: Path) -> int:
    try:
        conn = connect_readonly(path)
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0  # not a database: the normal open reports it


_fault_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Act here when BOOKGEN_FAULT names this point (crash and interrupt tests).

    ``BOOKGEN_FAULT=NAME[@N][:stop|:SIGINT]``: kill the process (SIGKILL) at
    the point; with ``:stop`` stop it instead (SIGSTOP), so that a test can act
    while it is there and then let it go on (SIGCONT); with ``:SIGINT`` send it
    a Ctrl-C. ``@N`` acts at the N-th time the process passes the point and at
    no other; without it a kill or a Ctrl-C comes every time, a stop the first
    time only."""
    fault = os.environ.get("BOOKGEN_FAULT")
    if not fault:
        return
    point, _, action = fault.partition(":")
    point, at, count = point.partition("@")
    if point != name:
        return
    hits = _fault_hits[name] = _fault_hits.get(name, 0) + 1
    if at:
        if hits != int(count):
            return
    elif action == "stop" and hits > 1:
        return
    if action == "":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "SIGINT":
        os.kill(os.getpid(), signal.SIGINT)


class Book:
    """An open book file.

    ``Book(path)`` opens an existing book or creates a new one; with
    ``create=False`` a missing file is an error; ``readonly=True`` never writes
    the book's data (an older book is migrated first when the file is
    writable, and refused when it is not).

    A book opened for writing holds the book's writer lock until
    :meth:`close`: while it is open, a writer in another process fails with
    :class:`bookgen.lock.BookLocked` naming this one, or waits with
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
            self.conn.execute("PRAGMA cache_size = -262144")
        except StorageError as error:
            self._close_quietly()
            if error.code in _UNREADABLE:
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
                              "('created_by', ?)", (now(), f"bookgen {__version__}"))
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
        with _interrupts_held() as held:
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
            (command, json.dumps(params, sort_keys=True, default=str), evaluator, now(),
             __version__))
        return int(cursor.lastrowid)

    def end_run(self, run_id: int, *, status: str = "done", positions_added: int = 0,
                moves_added: int = 0, moves_updated: int = 0,
                counts: dict[str, Any] | None = None) -> None:
        self.conn.execute(
            "UPDATE runs SET ended_at = ?, status = ?, positions_added = ?, "
            "moves_added = ?, moves_updated = ?, counts = ? WHERE id = ?",
            (now(), status, positions_added, moves_added, moves_updated,
             json.dumps(counts or {}, sort_keys=True), run_id))

    def runs(self) -> list[sqlite3.Row]:
        self.conn.row_factory = sqlite3.Row
        try:
            return self.conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
        finally:
            self.conn.row_factory = None

    # -- queries -------------------------------------------------------------

    def count_positions(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM positions").fetchone()[0])

    def count_moves(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM moves").fetchone()[0])

    def find_position(self, sfen: str) -> tuple[int, int | None] | None:
        """(id, ply) of a position by normalised sfen, or None."""
        row = self.conn.execute(
            "SELECT id, ply FROM positions WHERE sfen = ?", (sfen,)).fetchone()
        return None if row is None else (row[0], row[1])

    def moves_of(self, position_id: int) -> list[BookMove]:
        rows = self.conn.execute(
            "SELECT move, ponder, value, depth, count FROM moves m WHERE position_id = ? "
            f"AND NOT {TRANSPOSITION_ROW_SQL}", (position_id,)).fetchall()
        return sort_moves([BookMove(*row) for row in rows])

    def iter_blocks(self) -> Iterator[tuple[str, int | None, list[BookMove]]]:
        """Every position that has moves, sorted by sfen, with its moves best first
        (the book's own moves: refine's transposition rows are left out)."""
        cursor = self.conn.execute(
            "SELECT p.sfen, p.ply, m.move, m.ponder, m.value, m.depth, m.count "
            "FROM positions p JOIN moves m ON m.position_id = p.id "
            f"WHERE NOT {TRANSPOSITION_ROW_SQL} ORDER BY p.sfen")
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
    count: int


def sort_moves(moves: Sequence[BookMove]) -> list[BookMove]:
    """Best first: value descending (no value last), then count descending, then move."""
    return sorted(moves, key=lambda m: (m[2] is None, -(m[2] or 0), -m[4], m[0]))


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


class BulkWriter:
    """Writes positions and moves straight into the book, in the caller's transaction.

    Used for imports: rows are buffered and written with ``executemany``;
    positions are matched by exact sfen (first within this load, then in the
    book), keep their minimum ply, and moves merge by the rule above. Call
    :meth:`finish` before committing; roll the transaction back to undo all.
    """

    BATCH = 50_000

    def __init__(self, book: Book, run_id: int) -> None:
        self.book = book
        self.conn = book.conn
        self.run_id = run_id
        self.book_was_empty = book.count_positions() == 0
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
            if len(self._new_positions) >= self.BATCH:
                self.flush()
        elif ply is not None:
            self._ply_updates.append((ply, ply, position_id))
        return position_id

    def add_move(self, position_id: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
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
        run_id = self.run_id
        self._moves.extend((ids[local & mask], move, ponder, value, depth, count, run_id)
                           for local, move, ponder, value, depth, count in moves)
        self.moves += len(moves)
        if len(self._moves) >= self.BATCH:
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
        """Write what is buffered; returns (positions added, moves added, moves updated)."""
        self.flush()
        positions_added = self.book.count_positions() - self.positions_before
        moves_added = self.book.count_moves() - self.moves_before
        return positions_added, moves_added, self.move_changes - moves_added
