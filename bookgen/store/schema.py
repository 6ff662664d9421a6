"""The SQLite schema of a book file, its version and its migrations.

The schema is a public interface (docs/schema.md describes every column).
``SCHEMA_VERSION`` is stored in ``PRAGMA user_version`` and in the ``meta``
table. A migration is a list of SQL statements taking the schema from version
``n - 1`` to ``n``; books are migrated in place, inside one transaction, when
they are opened for writing.
"""

from __future__ import annotations

SCHEMA_VERSION = 4

# Version 1: the foundation. Columns that later stages fill (visits, priors,
# child links, evaluator/minimax/engine values) exist from the start so that
# those stages add data, not schema rewrites.
_V1 = [
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE runs (
        id              INTEGER PRIMARY KEY,
        command         TEXT NOT NULL,
        params          TEXT NOT NULL DEFAULT '{}',
        evaluator       TEXT,
        started_at      TEXT NOT NULL,
        ended_at        TEXT,
        status          TEXT NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
        positions_added INTEGER NOT NULL DEFAULT 0,
        moves_added     INTEGER NOT NULL DEFAULT 0,
        moves_updated   INTEGER NOT NULL DEFAULT 0,
        counts          TEXT NOT NULL DEFAULT '{}',
        bookgen_version TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE positions (
        id            INTEGER PRIMARY KEY,
        sfen          TEXT NOT NULL UNIQUE,
        zobrist       INTEGER NOT NULL,
        ply           INTEGER,
        turn          INTEGER NOT NULL CHECK (turn IN (0, 1)),
        visits        INTEGER,
        value         INTEGER,
        win_rate      REAL,
        minimax_value INTEGER,
        minimax_depth INTEGER,
        created_run   INTEGER REFERENCES runs(id),
        expanded_run  INTEGER REFERENCES runs(id)
    )
    """,
    "CREATE INDEX positions_zobrist ON positions(zobrist)",
    """
    CREATE TABLE moves (
        position_id   INTEGER NOT NULL REFERENCES positions(id),
        move          TEXT NOT NULL,
        ponder        TEXT,
        value         INTEGER,
        depth         INTEGER,
        count         INTEGER NOT NULL DEFAULT 1,
        visits        INTEGER,
        prior         REAL,
        win_rate      REAL,
        child_id      INTEGER REFERENCES positions(id),
        eval_value    INTEGER,
        minimax_value INTEGER,
        minimax_depth INTEGER,
        engine_score  INTEGER,
        run_id        INTEGER REFERENCES runs(id),
        PRIMARY KEY (position_id, move)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX moves_child ON moves(child_id) WHERE child_id IS NOT NULL",
    """
    CREATE TABLE analyses (
        position_id INTEGER NOT NULL REFERENCES positions(id),
        run_id      INTEGER NOT NULL REFERENCES runs(id),
        engine      TEXT NOT NULL,
        score       INTEGER,
        mate        INTEGER,
        bound       TEXT CHECK (bound IN ('exact', 'lower', 'upper')),
        depth       INTEGER,
        seldepth    INTEGER,
        nodes       INTEGER,
        bestmove    TEXT,
        pv          TEXT,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (position_id, run_id)
    ) WITHOUT ROWID
    """,
]

# Version 2: evaluation mistakes found by ``refine mistakes`` (positions where
# the book and an alpha-beta engine disagree), and an index to find the
# analyses of a run (``refine search`` resumes by skipping them).
_V2 = [
    """
    CREATE TABLE mistakes (
        run_id          INTEGER NOT NULL REFERENCES runs(id),
        iteration       INTEGER NOT NULL DEFAULT 0,
        position_id     INTEGER NOT NULL REFERENCES positions(id),
        analysis_run_id INTEGER NOT NULL REFERENCES runs(id),
        kind            TEXT NOT NULL CHECK (kind IN ('diff', 'missed_mate')),
        book_value      INTEGER NOT NULL,
        engine_value    INTEGER NOT NULL,
        difference      INTEGER NOT NULL,
        book_move       TEXT,
        engine_move     TEXT,
        reason          TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        PRIMARY KEY (run_id, iteration, position_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX mistakes_position ON mistakes(position_id)",
    "CREATE INDEX analyses_run ON analyses(run_id)",
]

# Version 3: the "links complete" marker (``meta`` key ``links``, see
# :mod:`bookgen.store.stored_links`): while it is set, every legal move between two
# positions with moves rows is a stored, linked ``moves`` row. A position that gets
# its first moves row is a new node whose links nobody stored: the trigger clears
# the marker, so that no writer can leave it stale. A book of version 2 has no
# marker (the next refine minimax scans for the links and sets it).
_V3 = [
    """
    CREATE TRIGGER links_new_node AFTER INSERT ON moves
    WHEN EXISTS (SELECT 1 FROM meta WHERE key = 'links')
     AND NOT EXISTS (SELECT 1 FROM moves WHERE position_id = NEW.position_id
                     AND move <> NEW.move)
    BEGIN
        DELETE FROM meta WHERE key = 'links';
    END
    """,
]

# Version 4: the mistakes by size, largest first (``bookgen serve``'s mistakes list
# reads a page of them without sorting the table: 170 ms at 200,000 mistakes before,
# 8 ms with it). The order is the list's: |difference| descending, then the primary key.
_V4 = [
    "CREATE INDEX IF NOT EXISTS mistakes_size "
    "ON mistakes(abs(difference) DESC, run_id, iteration, position_id)",
]

# MIGRATIONS[n] takes a book from version n to n + 1; MIGRATIONS[0] creates it.
MIGRATIONS: list[list[str]] = [_V1, _V2, _V3, _V4]

assert len(MIGRATIONS) == SCHEMA_VERSION

BOOK_TABLES = ("meta", "runs", "positions", "moves", "analyses", "mistakes")
