"""The ``runs`` table: finding the runs of dead processes, runs by their key and
what they did.

A long run records its process id in its ``runs`` row (``counts.pid``) while
it is ``running``; a later run marks rows whose process is gone as
``interrupted`` (:func:`mark_dead_runs`). :func:`last_params` says how a
command last ran (export reads refine minimax's draw values). ``refine
search`` runs carry their
analysis key in ``params.key``: :func:`matching_runs` and
:func:`analysed_positions` find what runs with the same key did,
:func:`latest_analyses` their latest analyses; ``refine mistakes`` finds its
key with :func:`command_and_params` or :func:`last_search_with_analyses`, and
the positions its grow runs expanded with :func:`positions_expanded_by`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bookgen.store.book import Book

__all__ = ["Analysis", "analysed_positions", "command_and_params", "last_params",
           "last_search_with_analyses", "latest_analyses", "mark_dead_runs", "matching_runs",
           "positions_expanded_by"]


def mark_dead_runs(book: Book) -> int:
    """Mark 'running' runs of other processes as 'interrupted'.

    Runs are written by the book's one writer (:mod:`bookgen.store.lock`), and the
    caller holds the writer lock: a run still 'running' under another process
    id belongs to a writer that died (a live one would hold the lock), even if
    its process id has since been reused."""
    if not book.writing:
        raise RuntimeError("mark_dead_runs needs the book open for writing")
    rows = book.conn.execute(
        "SELECT id, json_extract(counts, '$.pid') FROM runs WHERE status = 'running'").fetchall()
    dead = [(run_id,) for run_id, pid in rows if pid != os.getpid()]
    if dead:
        with book.transaction():
            book.conn.executemany("UPDATE runs SET status = 'interrupted' WHERE id = ?", dead)
    return len(dead)


def last_params(book: Book, command: str) -> dict[str, Any]:
    """The parameters of the last finished (``done``) run of ``command``; {} if none."""
    row = book.conn.execute(
        "SELECT params FROM runs WHERE command = ? AND status = 'done' ORDER BY id DESC "
        "LIMIT 1", (command,)).fetchone()
    return json.loads(row[0]) if row else {}


def matching_runs(book: Book, key: dict[str, Any]) -> list[int]:
    """``refine search`` runs made with the analysis key ``key``, oldest first."""
    runs = []
    for run_id, params in book.conn.execute(
            "SELECT id, params FROM runs WHERE command = 'refine search' ORDER BY id"):
        try:
            if json.loads(params).get("key") == key:
                runs.append(run_id)
        except (ValueError, AttributeError):
            continue
    return runs


def analysed_positions(book: Book, key: dict[str, Any]) -> set[int]:
    """Positions analysed by any run with the analysis key ``key``."""
    runs = matching_runs(book, key)
    analysed: set[int] = set()
    for start in range(0, len(runs), 500):
        chunk = runs[start:start + 500]
        analysed.update(row[0] for row in book.conn.execute(
            f"SELECT position_id FROM analyses WHERE run_id IN ({','.join('?' * len(chunk))})",
            chunk))
    return analysed


def command_and_params(book: Book, run_id: int) -> tuple[str, str] | None:
    """(command, params as JSON text) of run ``run_id``; None if there is none."""
    row = book.conn.execute("SELECT command, params FROM runs WHERE id = ?",
                            (run_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def last_search_with_analyses(book: Book, engine: str | None) -> tuple[int, str] | None:
    """(id, params as JSON text) of the last ``refine search`` run that recorded
    analyses (with the evaluator ``engine``, if given); None if there is none."""
    query = ("SELECT r.id, r.params FROM runs r WHERE r.command = 'refine search' "
             "AND EXISTS (SELECT 1 FROM analyses a WHERE a.run_id = r.id)")
    args: tuple[Any, ...] = ()
    if engine is not None:
        query += " AND r.evaluator = ?"
        args = (engine,)
    row = book.conn.execute(query + " ORDER BY r.id DESC LIMIT 1", args).fetchone()
    return None if row is None else (row[0], row[1])


Analysis = tuple[int, int, int | None, str | None, int | None]


def latest_analyses(book: Book, runs: list[int]) -> dict[int, Analysis]:
    """position id -> (run id, score, mate, bestmove, depth) of its latest analysis
    with a score in ``runs``."""
    latest: dict[int, Analysis] = {}
    for start in range(0, len(runs), 500):
        chunk = runs[start:start + 500]
        for pid, run_id, score, mate, bestmove, depth in book.conn.execute(
                "SELECT position_id, run_id, score, mate, bestmove, depth FROM analyses "
                f"WHERE run_id IN ({','.join('?' * len(chunk))}) AND score IS NOT NULL",
                chunk):
            if pid not in latest or run_id > latest[pid][0]:
                latest[pid] = (run_id, score, mate, bestmove, depth)
    return latest


def positions_expanded_by(book: Book, runs: list[int]) -> list[int]:
    """The positions expanded by ``runs`` (``expanded_run``), in the table's order."""
    return [row[0] for row in book.conn.execute(
        f"SELECT id FROM positions WHERE expanded_run IN ({','.join('?' * len(runs))})",
        runs)]
