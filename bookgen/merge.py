"""``bookgen merge``: combine books into one.

Positions are matched by their exact sfen and keep the minimum ply. A move
present in several books keeps the entry with the greatest depth, then the
greatest count (the first book wins a full tie). All stored columns travel,
child links are re-pointed to the output's rows. The rows ``refine minimax``
adds for transposition edges are derived data tied to the source's runs:
they are not copied (rerun ``refine minimax`` on the merged book).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError
from bookgen.store import (MOVE_UPSERT_SQL, PLY_UPSERT_SQL, Book, readonly_uris,
                           transposition_row_sql)

MAX_SOURCES = 9  # SQLite attaches at most 10 databases, the output included

_MOVE_COLUMNS = ("ponder", "value", "depth", "count", "visits", "prior", "win_rate",
                 "eval_value", "minimax_value", "minimax_depth", "engine_score")


def merge_books(out: str | Path, sources: Sequence[str | Path], *,
                wait: bool = False) -> dict[str, Any]:
    """Merge ``sources`` into ``out`` (created if missing); returns the counts.
    ``wait``: wait for another process writing ``out`` instead of failing."""
    if not sources:
        raise BookgenError("no books to merge")
    out_path = Path(out).resolve()
    for source in sources:
        if Path(source).resolve() == out_path:
            raise BookgenError(f"{source}: the output book cannot also be an input")
        Book(source, create=False, readonly=True).close()  # validates each input first
    if len(sources) > MAX_SOURCES:
        raise BookgenError(f"at most {MAX_SOURCES} books can be merged at once "
                           f"(got {len(sources)}); merge in steps")
    store = Book(out, wait=wait)
    try:
        for number, source in enumerate(sources):
            _attach(store, source, f"src{number}")
        totals = {"positions_added": 0, "moves_added": 0, "moves_updated": 0}
        with store.transaction():
            run_id = store.begin_run("merge", {"sources": [str(s) for s in sources]})
            for number in range(len(sources)):
                added = _merge_one(store, f"src{number}", run_id)
                for key, value in zip(totals, added):
                    totals[key] += value
            store.end_run(run_id, **totals, counts={"sources": len(sources)})
        totals.update(book=str(out), positions=store.count_positions(),
                      moves=store.count_moves(), run_id=run_id)
        return totals
    finally:
        store.discard_if_unused()


def _attach(store: Book, source: str | Path, schema: str) -> None:
    """Attach a source book; read-write when possible (only SELECTs run on it) so
    that closing removes its WAL files, read-only when it cannot be written."""
    *preferred, last = readonly_uris(source)
    for uri in preferred:
        try:
            store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (uri,))
            return
        except sqlite3.OperationalError:
            pass
    store.conn.execute(f"ATTACH DATABASE ? AS {schema}", (last,))


def _merge_one(store: Book, schema: str, run_id: int) -> tuple[int, int, int]:
    conn = store.conn
    positions_before = store.count_positions()
    moves_before = store.count_moves()
    conn.execute(
        "INSERT INTO positions(sfen, zobrist, ply, turn, created_run) "
        f"SELECT sfen, zobrist, ply, turn, ? FROM {schema}.positions WHERE true "
        "ORDER BY id" + PLY_UPSERT_SQL, (run_id,))
    changes = conn.total_changes
    selected = ", ".join(f"m.{c}" for c in _MOVE_COLUMNS)
    also_update = ", ".join(f"{c} = excluded.{c}" for c in _MOVE_COLUMNS[4:])
    upsert = MOVE_UPSERT_SQL.replace(
        "run_id = excluded.run_id",
        f"run_id = excluded.run_id, {also_update}, "
        "child_id = coalesce(excluded.child_id, moves.child_id)")
    conn.execute(
        f"INSERT INTO moves(position_id, move, {', '.join(_MOVE_COLUMNS)}, child_id, run_id) "
        f"SELECT p.id, m.move, {selected}, pc.id, ? "
        f"FROM {schema}.moves m JOIN {schema}.positions sp ON sp.id = m.position_id "
        "JOIN main.positions p ON p.sfen = sp.sfen "
        f"LEFT JOIN {schema}.positions sc ON sc.id = m.child_id "
        "LEFT JOIN main.positions pc ON pc.sfen = sc.sfen "
        f"WHERE NOT {transposition_row_sql(schema)} ORDER BY p.id" + upsert, (run_id,))
    changed = conn.total_changes - changes
    positions_added = store.count_positions() - positions_before
    moves_added = store.count_moves() - moves_before
    return positions_added, moves_added, changed - moves_added
