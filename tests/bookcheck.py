"""Consistency checks of a grown book, written with the plain sqlite3 module.

Shared by the tests (``tests/test_writers.py``) and the fault campaign
(``benchmarks/fault_campaign.py``), so that both hold a book to the same rule.
The rule is the one ``grow`` keeps (``grow/book_graph.py``): an expanded
position is worth its best move, and a move of an expanded position into an
expanded child is worth minus the child's value. Positions that only an
import or a merge wrote carry the file's values and are not held to it, nor
are the rows ``refine minimax`` adds for transposition edges (no value; grow
leaves them out too).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bookgen.store.own_moves import create_own_moves_view


def _connect(book: str | Path) -> sqlite3.Connection:
    return sqlite3.connect(book)


def inconsistencies(book: str | Path) -> dict[str, list]:
    """What breaks the values grow keeps: an expanded position with moves whose
    value is not the best of its moves', a move of an expanded position into an
    expanded child whose value is not minus that child's."""
    conn = _connect(book)
    try:
        own = create_own_moves_view(conn)  # moves without refine's transposition rows
        positions = conn.execute(
            "SELECT p.sfen, p.value, max(m.value) FROM positions p "
            f"JOIN {own} m ON m.position_id = p.id WHERE p.expanded_run IS NOT NULL "
            "GROUP BY p.id HAVING p.value IS NOT max(m.value)").fetchall()
        moves = conn.execute(
            f"SELECT p.sfen, m.move, m.value, c.value FROM {own} m "
            "JOIN positions p ON p.id = m.position_id JOIN positions c ON c.id = m.child_id "
            "WHERE p.expanded_run IS NOT NULL AND c.expanded_run IS NOT NULL "
            "AND m.value IS NOT -c.value").fetchall()
    finally:
        conn.close()
    return {"positions": positions, "moves": moves}


def expansion_mismatches(book: str | Path) -> list[tuple[int, int, int]]:
    """(run, expansions it counted, positions it is recorded to have expanded) of
    every ``grow`` run where the two differ: a position expanded twice, by one run
    or by a later run that overwrote the first one's ``expanded_run``. Each
    expansion commits with its run's counters, so a killed run counts exactly
    the expansions it committed."""
    conn = _connect(book)
    try:
        rows = conn.execute(
            "SELECT id, counts, (SELECT count(*) FROM positions WHERE expanded_run = runs.id) "
            "FROM runs WHERE command = 'grow' ORDER BY id").fetchall()
    finally:
        conn.close()
    mismatches = []
    for run_id, counts, expanded in rows:
        counted = json.loads(counts or "{}").get("expansions", 0)
        if counted != expanded:
            mismatches.append((run_id, counted, expanded))
    return mismatches


def repeated_analyses(book: str | Path) -> list[tuple[int, str, int]]:
    """(position, analysis key, analyses) for positions that ``refine search`` runs
    with the same key analysed more than once (a rerun skips what is done)."""
    conn = _connect(book)
    try:
        return conn.execute(
            "SELECT a.position_id, json_extract(r.params, '$.key') AS k, count(*) "
            "FROM analyses a JOIN runs r ON r.id = a.run_id "
            "GROUP BY a.position_id, k HAVING count(*) > 1").fetchall()
    finally:
        conn.close()


def analysis_mismatches(book: str | Path) -> list[tuple[int, int, int]]:
    """(run, analyses it counted, analyses it holds) of every ``refine search`` run
    where the two differ (each analysis commits with its run's counters)."""
    conn = _connect(book)
    try:
        rows = conn.execute(
            "SELECT id, json_extract(counts, '$.analysed'), "
            "(SELECT count(*) FROM analyses WHERE run_id = runs.id) "
            "FROM runs WHERE command = 'refine search' ORDER BY id").fetchall()
    finally:
        conn.close()
    return [(run_id, counted or 0, held) for run_id, counted, held in rows
            if (counted or 0) != held]
