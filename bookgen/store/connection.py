"""SQLite files: connections that name their file when it fails.

Failures of the file itself (read-only file, directory or file system, disk
full, I/O errors, a damaged file) surface as :class:`StorageError`, a one-line
:class:`BookgenError` naming the file (:func:`sqlite_error` maps them, for
books and for the match results files). Files that cannot be written are
read through :func:`connect_readonly` (``mode=ro``, or ``immutable=1`` where
SQLite could not even create its ``-shm`` file). :func:`close_writer` closes
a connection that wrote, folding the write-ahead log into the file.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError
from bookgen.files import disk_full_message, disk_nearly_full, unwritable_reason

__all__ = ["Connection", "StorageError", "close_writer", "connect", "connect_readonly",
           "readonly_uris", "sqlite_error"]


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


UNREADABLE = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


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
    if code in UNREADABLE:
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


def readonly_uris(path: str | os.PathLike[str], strict: bool = False) -> list[str]:
    """SQLite URIs that read ``path`` without changing it, best first.

    A writable file in a writable directory: ``mode=rw`` (used read-only, so
    that closing checkpoints and removes the ``-wal``/``-shm`` files). A file
    that cannot be written (read-only file, directory or medium):
    ``immutable=1`` when its write-ahead log is empty or absent (SQLite then
    needs no ``-shm`` file and creates nothing), else ``mode=ro`` to read
    the log.

    ``strict``: never ``mode=rw``, but ``mode=ro`` first (a reader that stays open
    while writers commit, and never writes the file, not even a checkpoint when
    it closes; it may leave the ``-wal``/``-shm`` files, which the next writer
    folds in).
    """
    path = Path(path)
    uri = path.resolve().as_uri()
    if strict:
        uris = [uri + "?mode=ro"]
    else:
        uris = [uri + "?mode=rw"] if unwritable_reason(path) is None else []
    uris.append(uri + ("?mode=ro&immutable=1" if _clean_wal(path) else "?mode=ro"))
    return uris


def connect_readonly(path: str | os.PathLike[str], strict: bool = False,
                     **options: Any) -> Connection:
    """A ``query_only`` connection that never changes ``path`` and, once
    closed, leaves no ``-wal``/``-shm`` files behind (see :func:`readonly_uris`;
    ``strict``: opened ``mode=ro``, which may leave them)."""
    path = Path(path)
    options = {"isolation_level": None, "check_same_thread": False, **options}
    *preferred, last = readonly_uris(path, strict)
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
