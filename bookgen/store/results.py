"""Match results files: the SQLite schema, the writer the match runner uses, and readers.

A results file is one SQLite database (``RESULTS.sqlite``) that plain SQLite
tools can read; ``docs/schema.md`` documents it. Its version is in ``PRAGMA
user_version`` and in ``meta``. Tables:

- ``matches``: one row per match schedule (``key`` is a fingerprint of the
  settings that decide which games are played; rerunning the same command
  finds its row and plays only the games still missing);
- ``players``: every player's name, spec, options and USI identity;
- ``games``: one row per finished game, keyed by ``(match_id, game_key)``.
  ``pair`` groups the two games of an opening played with colours swapped
  (the sampling unit of the pentanomial statistics);
- ``moves`` (version 2): one row per move of a game, what its mover said of
  it (score, bound, depth, seldepth, nodes, time, PV, and whether it came
  from the engine's own book), written in the game's transaction.

A version-1 file (no ``moves``) is migrated when opened for writing; the
readers read both versions.

:class:`GameResult` is one finished game, whatever file it came from: the
common input of ratings, SPRT and outcome statistics
(:func:`bookgen.analysis.results.load_games` reads results files and PGN
files into it).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError
from bookgen.files import check_writable
from bookgen.signals import fault_point
from bookgen.store.connection import StorageError, close_writer, connect, connect_readonly
from bookgen.timestamps import utc_now

__all__ = ["RESULTS_SCHEMA_VERSION", "RESULT_BLACK", "RESULT_DRAW", "RESULT_WHITE", "GameMoves",
           "BookExitRow", "GameResult", "MovePlayed", "MoveRow", "ResultsFile", "ResultsReader",
           "check_results_file", "read_book_exit_rows", "read_game_moves", "read_results_file",
           "recorded_sprts"]

RESULTS_SCHEMA_VERSION = 2
RESULTS_KIND = "bookgen-results"

RESULT_BLACK, RESULT_WHITE, RESULT_DRAW = "black", "white", "draw"
RESULTS = (RESULT_BLACK, RESULT_WHITE, RESULT_DRAW)

_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """
    CREATE TABLE matches (
        id          INTEGER PRIMARY KEY,
        key         TEXT NOT NULL UNIQUE,
        settings    TEXT NOT NULL,
        scheduled   INTEGER NOT NULL,
        started_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        status      TEXT NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'done', 'interrupted', 'failed', 'stopped'))
    )
    """,
    """
    CREATE TABLE players (
        name     TEXT PRIMARY KEY,
        spec     TEXT NOT NULL,
        options  TEXT NOT NULL DEFAULT '{}',
        engine   TEXT,
        author   TEXT
    )
    """,
    """
    CREATE TABLE games (
        id            INTEGER PRIMARY KEY,
        match_id      INTEGER NOT NULL REFERENCES matches(id),
        game_key      TEXT NOT NULL,
        round         INTEGER NOT NULL,
        pair          INTEGER NOT NULL,
        opening_index INTEGER,
        opening       TEXT,
        start_sfen    TEXT NOT NULL,
        black         TEXT NOT NULL,
        white         TEXT NOT NULL,
        result        TEXT NOT NULL CHECK (result IN ('black', 'white', 'draw')),
        reason        TEXT NOT NULL,
        detail        TEXT NOT NULL DEFAULT '',
        plies         INTEGER NOT NULL,
        moves         TEXT NOT NULL,
        black_ms      INTEGER,
        white_ms      INTEGER,
        started_at    TEXT,
        finished_at   TEXT NOT NULL,
        UNIQUE (match_id, game_key)
    )
    """,
    "CREATE INDEX games_players ON games(black, white)",
]

# Version 2: what each mover said of each move.
_MOVES_SCHEMA = [
    """
    CREATE TABLE moves (
        game_id    INTEGER NOT NULL REFERENCES games(id) ON DELETE CASCADE,
        ply        INTEGER NOT NULL,
        move       TEXT NOT NULL,
        mover      TEXT NOT NULL,
        source     TEXT NOT NULL CHECK (source IN ('book', 'search', 'runner')),
        score_cp   INTEGER,
        score_mate INTEGER,
        bound      TEXT CHECK (bound IN ('lower', 'upper', 'exact')),
        depth      INTEGER,
        seldepth   INTEGER,
        nodes      INTEGER,
        time_ms    INTEGER,
        pv         TEXT,
        PRIMARY KEY (game_id, ply)
    ) WITHOUT ROWID
    """,
]

MoveRow = tuple[int, str, str, str, int | None, int | None, str | None, int | None,
                int | None, int | None, int | None, str | None]
"""One move as :meth:`ResultsFile.add_game` takes it: the columns of ``moves``
after ``game_id``, in order (``ply`` from 1, the first move played from the
game's ``start_sfen``; ``pv`` space-separated USI)."""


# --------------------------------------------------------------------------
# the common record


@dataclass(frozen=True)
class GameResult:
    """One finished game, whatever file it came from.

    ``result`` is ``"black"``, ``"white"`` or ``"draw"`` (black = sente =
    PGN "White"). ``pair`` identifies the colour-swapped pair the game
    belongs to (None when unknown); the two games of a complete pair share
    it and have their players swapped.
    """

    black: str
    white: str
    result: str
    reason: str = ""
    plies: int = 0
    pair: str | None = None
    opening: str | None = None
    source: str = ""

    @property
    def black_score(self) -> float:
        return {RESULT_BLACK: 1.0, RESULT_WHITE: 0.0}.get(self.result, 0.5)

    def score_for(self, player: str) -> float:
        """Points ``player`` scored in this game (1, 1/2 or 0)."""
        if player == self.black:
            return self.black_score
        if player == self.white:
            return 1.0 - self.black_score
        raise ValueError(f"{player!r} did not play this game")

    @property
    def winner(self) -> str | None:
        return {RESULT_BLACK: self.black, RESULT_WHITE: self.white}.get(self.result)

    @property
    def loser(self) -> str | None:
        return {RESULT_BLACK: self.white, RESULT_WHITE: self.black}.get(self.result)


# --------------------------------------------------------------------------
# the SQLite file


class ResultsFile:
    """A results file opened for writing (created when missing, migrated to
    the current version when older).

    Every :meth:`add_game` is its own transaction (the game and its moves), so
    a killed match keeps every game it finished and no part of another.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        check_writable(self.path)
        created = not self.path.exists()
        existed = not created and self.path.stat().st_size > 0
        self.db = connect(self.path, timeout=30, isolation_level=None,
                          kept=lambda: "the games finished before are kept")
        try:
            self.db.row_factory = sqlite3.Row
            if existed:  # before anything writes to it (WAL mode rewrites the header)
                check_results_file(self.db, self.path)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if not existed:
                self._create()
            else:
                self._migrate()
        except BaseException as error:
            self.db.close()
            if created:  # a half-made file (a full disk) would be refused by the next run
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(str(self.path) + suffix).unlink(missing_ok=True)
            if isinstance(error, StorageError):
                if error.code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                    raise BookgenError(f"{self.path}: not a results file "
                                       f"({error.detail})") from None
            elif isinstance(error, sqlite3.DatabaseError):
                raise BookgenError(f"{self.path}: not a results file ({error})") from None
            raise

    def _create(self) -> None:
        with self.transaction() as db:
            for statement in (*_SCHEMA, *_MOVES_SCHEMA):
                db.execute(statement)
            db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("kind", RESULTS_KIND), ("schema_version", str(RESULTS_SCHEMA_VERSION)),
                ("created_at", utc_now())])
            db.execute(f"PRAGMA user_version = {RESULTS_SCHEMA_VERSION}")

    def _migrate(self) -> None:
        """Bring an older file to :data:`RESULTS_SCHEMA_VERSION` (one transaction)."""
        with self.transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version >= RESULTS_SCHEMA_VERSION:
                return
            if version < 2:  # 1 -> 2: the moves table; earlier games have no rows there
                for statement in _MOVES_SCHEMA:
                    db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                       (str(RESULTS_SCHEMA_VERSION),))
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       (f"migrated_from_{version}_at", utc_now()))
            db.execute(f"PRAGMA user_version = {RESULTS_SCHEMA_VERSION}")

    class _Transaction:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, kind: object, *exc: object) -> None:
            try:
                if kind is None:
                    self.db.execute("COMMIT")
                    return
            except BaseException:
                self._rollback()
                raise
            self._rollback()

        def _rollback(self) -> None:
            # SQLite rolls back by itself after some errors (disk full, I/O errors).
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    def transaction(self) -> _Transaction:
        return self._Transaction(self.db)

    def close(self) -> None:
        close_writer(self.db, self.path)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- matches and players ---------------------------------------------

    def begin_match(self, key: str, settings: dict[str, Any], scheduled: int) -> int:
        """The id of the match with this key (created when new); marks it running."""
        with self.transaction() as db:
            row = db.execute("SELECT id FROM matches WHERE key = ?", (key,)).fetchone()
            if row is not None:
                db.execute("UPDATE matches SET status = 'running', updated_at = ? WHERE id = ?",
                           (utc_now(), row["id"]))
                return int(row["id"])
            cursor = db.execute(
                "INSERT INTO matches (key, settings, scheduled, started_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, json.dumps(settings, sort_keys=True), scheduled, utc_now(), utc_now()))
            return int(cursor.lastrowid or 0)

    def set_match_sprt(self, match_id: int, sprt: dict[str, Any]) -> None:
        """Record the match's SPRT (engine under test, bounds, last state) in its
        settings, under ``sprt``."""
        with self.transaction() as db:
            db.execute("UPDATE matches SET settings = json_set(settings, '$.sprt', json(?)) "
                       "WHERE id = ?", (json.dumps(sprt, sort_keys=True), match_id))

    def end_match(self, match_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE matches SET status = ?, updated_at = ? WHERE id = ?",
                       (status, utc_now(), match_id))

    def finished_keys(self, match_id: int) -> set[str]:
        rows = self.db.execute("SELECT game_key FROM games WHERE match_id = ?", (match_id,))
        return {row[0] for row in rows}

    def add_player(self, name: str, spec: str, options: dict[str, Any] | None = None,
                   engine: str | None = None, author: str | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO players (name, spec, options, engine, author) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, options = excluded.options, "
                "engine = coalesce(excluded.engine, engine), "
                "author = coalesce(excluded.author, author)",
                (name, spec, json.dumps(options or {}, sort_keys=True), engine, author))

    # -- games -------------------------------------------------------------

    def games(self, match_id: int) -> list[GameResult]:
        """The games of one match recorded so far, in the order they were recorded."""
        rows = self.db.execute(
            "SELECT black, white, result, reason, plies, pair, opening FROM games "
            "WHERE match_id = ? ORDER BY id", (match_id,)).fetchall()
        return [GameResult(r["black"], r["white"], r["result"], r["reason"], r["plies"],
                           str(r["pair"]), r["opening"], self.path.name) for r in rows]

    def add_game(self, match_id: int, moves_rows: Sequence[MoveRow] = (), **game: Any) -> None:
        """Record one finished game (columns of ``games`` as keywords) and its
        ``moves_rows`` (:data:`MoveRow`; none: no per-move data), in one transaction."""
        game.setdefault("finished_at", utc_now())
        game.setdefault("detail", "")
        if game["result"] not in RESULTS:
            raise ValueError(f"bad result {game['result']!r}")
        columns = ["match_id", *game]
        with self.transaction() as db:
            # A game recorded again replaces the old row; its moves go with it.
            db.execute("DELETE FROM moves WHERE game_id IN (SELECT id FROM games WHERE "
                       "match_id = ? AND game_key = ?)", (match_id, game.get("game_key")))
            cursor = db.execute(f"INSERT OR REPLACE INTO games ({', '.join(columns)}) "
                                f"VALUES ({', '.join('?' * len(columns))})",
                                [match_id, *game.values()])
            fault_point("results-game-writing")  # the crash tests' kill in mid-transaction
            if moves_rows:
                game_id = cursor.lastrowid
                db.executemany("INSERT INTO moves VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               [(game_id, *row) for row in moves_rows])


def check_results_file(db: sqlite3.Connection, path: Path) -> None:
    """Raise a clear error unless ``db`` is a results file this version can read."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    try:
        kind = db.execute("SELECT value FROM meta WHERE key = 'kind'").fetchone()
    except sqlite3.DatabaseError:
        kind = None
    if kind is None or kind[0] != RESULTS_KIND:
        raise BookgenError(f"{path}: not a bookgen results file (a book? a results file is "
                           "written by 'bookgen match -o')")
    if version > RESULTS_SCHEMA_VERSION:
        raise BookgenError(f"{path}: results schema version {version} is newer than this "
                           f"bookgen understands ({RESULTS_SCHEMA_VERSION}); upgrade bookgen")


# --------------------------------------------------------------------------
# reading


def recorded_sprts(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The SPRTs that ``bookgen match --sprt`` recorded in the given results files
    (PGN files have none): each its ``settings.sprt`` plus ``file`` and ``match_id``."""
    found: list[dict[str, Any]] = []
    for path in map(Path, paths):
        with open(path, "rb") as handle:
            if not handle.read(16).startswith(b"SQLite format 3"):
                continue
        rows = _query(path, "SELECT id, json_extract(settings, '$.sprt') FROM matches "
                            "WHERE json_extract(settings, '$.sprt') IS NOT NULL ORDER BY id")
        for match_id, text in rows:
            found.append({**json.loads(text), "file": str(path), "match_id": match_id})
    return found


def _query(path: Path, sql: str) -> list[Any]:
    """The rows of ``sql`` in the results file ``path``, read without changing it
    or leaving files beside it (also on read-only media)."""
    try:
        db = connect_readonly(path, timeout=30)
        try:
            check_results_file(db, path)
            return db.execute(sql).fetchall()
        finally:
            db.close()
    except StorageError as error:
        raise BookgenError(f"{path}: cannot read results ({error.detail or error})") from None
    except sqlite3.DatabaseError as error:
        raise BookgenError(f"{path}: cannot read results ({error})") from None


def read_results_file(path: Path) -> list[GameResult]:
    """Every game of the results file ``path``, in the order they were recorded."""
    rows = _query(path, "SELECT match_id, pair, black, white, result, reason, plies, opening, "
                        "start_sfen FROM games ORDER BY id")
    return [GameResult(black, white, result, reason, plies, f"{path}#{match}:{pair}",
                       opening or start_sfen, str(path))
            for match, pair, black, white, result, reason, plies, opening, start_sfen in rows]


class ResultsReader:
    """A results file read while a match may be writing it (the live view): one
    read-only connection (``mode=ro``: it never writes the file, not even a
    checkpoint) kept open, reading each call's rows afresh."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.db = connect_readonly(self.path, strict=True, timeout=30)
        except (StorageError, sqlite3.DatabaseError) as error:
            raise BookgenError(f"{self.path}: cannot read results ({error})") from None
        try:
            check_results_file(self.db, self.path)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def matches(self) -> list[dict[str, Any]]:
        """Every match, oldest first: ``id``, ``status``, ``scheduled``, ``played``,
        ``started_at``, ``updated_at``, ``players`` (names as scheduled), ``format``
        and ``sprt`` (what ``--sprt`` recorded, or None)."""
        rows = self.db.execute(
            "SELECT m.id, m.status, m.scheduled, m.started_at, m.updated_at, "
            "json_extract(m.settings, '$.players'), json_extract(m.settings, '$.format'), "
            "json_extract(m.settings, '$.sprt'), "
            "(SELECT count(*) FROM games g WHERE g.match_id = m.id) "
            "FROM matches m ORDER BY m.id").fetchall()
        return [{"id": r[0], "status": r[1], "scheduled": r[2], "started_at": r[3],
                 "updated_at": r[4], "players": [p[0] for p in json.loads(r[5] or "[]")],
                 "format": r[6], "sprt": json.loads(r[7]) if r[7] else None, "played": r[8]}
                for r in rows]

    def games(self, match_id: int) -> list[GameResult]:
        """The games of match ``match_id`` recorded so far, in order (``pair`` as
        :meth:`ResultsFile.games` gives it)."""
        rows = self.db.execute(
            "SELECT black, white, result, reason, plies, pair, opening FROM games "
            "WHERE match_id = ? ORDER BY id", (match_id,)).fetchall()
        return [GameResult(r[0], r[1], r[2], r[3], r[4], str(r[5]), r[6], self.path.name)
                for r in rows]


@dataclass(frozen=True)
class MovePlayed:
    """One row of ``moves``: a move and what its mover said of it (see ``docs/results.md``)."""

    ply: int
    move: str
    mover: str
    source: str
    score_cp: int | None
    score_mate: int | None
    bound: str | None
    depth: int | None
    seldepth: int | None
    nodes: int | None
    time_ms: int | None
    pv: str | None


@dataclass(frozen=True)
class GameMoves:
    """A game of a results file with its per-move data (``moves`` by ply)."""

    file: str
    match_id: int
    game_id: int
    pair: int
    opening: str
    start_sfen: str
    black: str
    white: str
    result: str
    moves: tuple[MovePlayed, ...]


def read_game_moves(path: str | Path) -> list[GameMoves]:
    """The games of the results file ``path`` that have per-move data, in the order
    they were recorded (none for a version-1 file, or games played with
    ``record_moves`` off)."""
    path = Path(path)
    if not _query(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                        "AND name = 'moves'")[0][0]:
        return []
    rows = _query(path, "SELECT g.id, g.match_id, g.pair, coalesce(g.opening, g.start_sfen), "
                        "g.start_sfen, g.black, g.white, g.result, m.ply, m.move, m.mover, "
                        "m.source, m.score_cp, m.score_mate, m.bound, m.depth, m.seldepth, "
                        "m.nodes, m.time_ms, m.pv FROM games g JOIN moves m ON m.game_id = g.id "
                        "ORDER BY g.id, m.ply")
    games: list[GameMoves] = []
    for game_id, group in groupby(rows, key=lambda row: row[0]):
        played = list(group)
        first = played[0]
        games.append(GameMoves(str(path), first[1], game_id, first[2], first[3], first[4],
                               first[5], first[6], first[7],
                               tuple(MovePlayed(*row[8:]) for row in played)))
    return games


@dataclass(frozen=True)
class BookExitRow:
    """Where ``mover`` left its own book in one game: ``book_moves`` of its moves
    were book answers before its first that was not, at ``ply`` (the game's, from 1),
    ``move``, scored ``score_cp`` or ``score_mate`` (None for all four: every move
    it made was a book answer)."""

    file: str
    game_id: int
    opening: str
    start_sfen: str
    black: str
    white: str
    mover: str
    book_moves: int
    ply: int | None
    move: str | None
    score_cp: int | None
    score_mate: int | None


_BOOK_EXITS = """
WITH exits AS (
    SELECT game_id, mover, min(CASE WHEN source != 'book' THEN ply END) AS exit_ply
    FROM moves GROUP BY game_id, mover)
SELECT g.id, coalesce(g.opening, g.start_sfen), g.start_sfen, g.black, g.white, e.mover,
       (SELECT count(*) FROM moves b WHERE b.game_id = e.game_id AND b.mover = e.mover
        AND b.source = 'book' AND (e.exit_ply IS NULL OR b.ply < e.exit_ply)),
       e.exit_ply, m.move, m.score_cp, m.score_mate
FROM exits e JOIN games g ON g.id = e.game_id
LEFT JOIN moves m ON m.game_id = e.game_id AND m.ply = e.exit_ply
ORDER BY g.id, e.mover = g.white
"""


def read_book_exit_rows(path: str | Path) -> tuple[int, list[BookExitRow]]:
    """The number of games with per-move data in the results file ``path`` and,
    for each of them and each player who moved in it (black first), where it left
    its own book (none for a version-1 file)."""
    path = Path(path)
    if not _query(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                        "AND name = 'moves'")[0][0]:
        return 0, []
    games = _query(path, "SELECT count(DISTINCT game_id) FROM moves")[0][0]
    return games, [BookExitRow(str(path), *row) for row in _query(path, _BOOK_EXITS)]
