"""A consistent copy of a book file (``bookgen cycle``'s per-generation books).

:func:`copy_book` copies with SQLite's online backup, so that what is still in
the source's write-ahead log is copied too and the copy is one file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bookgen.errors import BookgenError

__all__ = ["copy_book"]


def copy_book(source: str | Path, target: str | Path) -> None:
    """Copy the SQLite book ``source`` to ``target`` (replaced), in rollback-journal
    mode so that the copy is a single file until it is opened as a book."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise BookgenError(f"{source}: no such book")
    target.unlink(missing_ok=True)
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, \
            sqlite3.connect(target) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode = DELETE")
    src.close()
    dst.close()


def settle_book(path: str | Path) -> None:
    """Fold the book's write-ahead log into the file and leave it in rollback-journal
    mode: one self-contained file, that can be renamed (a closed book usually is
    already)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
