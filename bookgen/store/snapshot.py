"""A book opened for reading only, as it is: never migrated, never written.

``bookgen report`` reads the books it is given through
:func:`open_book_snapshot`: a report must never change its inputs, not even
by the migration that :class:`bookgen.store.Book` does when it opens an older
writable book read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bookgen.errors import BookgenError
from bookgen.store.connection import StorageError, connect_readonly
from bookgen.store.schema import SCHEMA_VERSION

__all__ = ["open_book_snapshot"]


def open_book_snapshot(path: Path, strict: bool = False) -> sqlite3.Connection:
    """A read-only connection to the book at ``path``, after checking it is one.

    ``strict`` opens it ``mode=ro`` (``bookgen serve``: a reader that stays open
    while ``grow`` or ``refine`` write, and never writes the file, not even a
    checkpoint; see :func:`bookgen.store.connection.readonly_uris`).

    The book is opened with :func:`bookgen.store.connection.connect_readonly`
    rather than through :class:`bookgen.store.Book`, whose read-only open still
    migrates an older writable file: a report must never change its inputs
    (nor turn a results file given by mistake into a book).
    """
    if not path.is_file():
        raise BookgenError(f"{path}: no such book")
    with open(path, "rb") as handle:
        if not handle.read(16).startswith(b"SQLite format 3"):
            raise BookgenError(f"{path}: not a readable SQLite book (not an SQLite file)")
    try:
        conn = connect_readonly(path, strict=strict)
    except StorageError as error:
        raise BookgenError(f"{path}: not a readable SQLite book ({error.detail or error})"
                           ) from None
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        kind = None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'kind'").fetchone()
            kind = row[0] if row else None
        if kind is not None:
            raise BookgenError(f"{path}: a {kind} file, not a book (no bookgen book schema)")
        if version == 0 or not {"runs", "positions", "moves"} <= tables:
            raise BookgenError(f"{path}: not a bookgen book (no bookgen book schema; tables: "
                               f"{', '.join(sorted(tables)) or 'none'})")
        if version > SCHEMA_VERSION:
            raise BookgenError(f"{path}: book schema version {version} is newer than this "
                               f"bookgen supports ({SCHEMA_VERSION}); upgrade bookgen")
    except StorageError as error:
        conn.close()
        raise BookgenError(f"{path}: not a readable SQLite book ({error.detail or error})"
                           ) from None
    except sqlite3.DatabaseError as error:
        conn.close()
        raise BookgenError(f"{path}: not a readable SQLite book ({error})") from None
    except BookgenError:
        conn.close()
        raise
    return conn
