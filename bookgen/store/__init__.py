"""The store: every book and results file, and the SQL that reads and writes them.

- :mod:`~bookgen.store.book`: :class:`Book`, one SQLite file per book
  (opening, migrating, transactions, runs), and :class:`BookMove`;
- :mod:`~bookgen.store.schema`: the book schema, its version and migrations;
- :mod:`~bookgen.store.connection`: SQLite connections whose failures name
  their file (:class:`StorageError`), read-only opening;
- :mod:`~bookgen.store.lock`: one writer per book (``NAME-lock``);
- :mod:`~bookgen.store.bulk`: bulk loads (:class:`BulkWriter`), merging an attached
  book, and the merge rules;
- :mod:`~bookgen.store.own_moves`: which ``moves`` rows are the book's own moves
  (:class:`MoveRows`) and which value a read means (:class:`ValueColumn`);
- :mod:`~bookgen.store.queries`: reads of positions and moves, each saying which
  rows and values it means;
- :mod:`~bookgen.store.writes`: the other writes (grow's expansions, analyses,
  mistakes, engine moves, ``refine minimax``'s values);
- :mod:`~bookgen.store.runs`: the ``runs`` table (dead runs, runs by analysis key,
  their analyses);
- :mod:`~bookgen.store.index`: :class:`~bookgen.store.index.BookIndex`, the book read
  into numpy columns (with :mod:`~bookgen.store.columns` and
  :mod:`~bookgen.store.links`);
- :mod:`~bookgen.store.stored_links`: the "links complete" marker and storing every
  legal move between positions with moves as a linked row (imports, merges);
- :mod:`~bookgen.store.snapshot`: a book opened for reading only, never migrated;
- :mod:`~bookgen.store.results`: the match results files.

This module re-exports what most callers need; it imports neither numpy nor
the index (``from bookgen.store.index import BookIndex``).
"""

from __future__ import annotations

from bookgen.store.book import DEFAULT_BOOK, Book, BookMove, sort_moves
from bookgen.store.bulk import MOVE_UPSERT_SQL, PLY_UPSERT_SQL, BulkWriter
from bookgen.store.connection import (
    StorageError,
    close_writer,
    connect,
    connect_readonly,
    readonly_uris,
    sqlite_error,
)
from bookgen.store.lock import BookLocked
from bookgen.store.own_moves import REFINE_MINIMAX_COMMAND, MoveRows, ValueColumn
from bookgen.store.snapshot import open_book_snapshot

__all__ = ["DEFAULT_BOOK", "MOVE_UPSERT_SQL", "PLY_UPSERT_SQL", "REFINE_MINIMAX_COMMAND", "Book",
           "BookLocked", "BookMove", "BulkWriter", "MoveRows", "StorageError", "ValueColumn",
           "close_writer", "connect", "connect_readonly", "open_book_snapshot", "readonly_uris",
           "sort_moves", "sqlite_error"]
