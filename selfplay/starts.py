"""``bookgen starts``: self-play start positions cut from the book.

Positions are chosen from the book (all positions with moves, the leaves,
the principal lines, or the mistakes found by ``refine mistakes``), filtered
by ply, value, side to move and how often they were played, optionally
weighted by visits, and written as:

- ``usi``: ``startpos moves ...`` along the shortest book path from the
  initial position (what ``cshogi.cli``, ShogiHome and the match runner read),
  ``sfen ...`` for positions the book does not reach from there (child links,
  shortest lines and the leaves/principal selections are refine's
  :class:`~refine.search.BookIndex`, shared with ``refine search``);
- ``sfen``: ``sfen <sfen> <ply>`` lines;
- ``hcp``: raw 32-byte ``cshogi.HuffmanCodedPos`` records, dlshogi's ``roots.hcp``;
- ``psfen``: raw 32-byte ``cshogi.PackedSfen`` records (YaneuraOu).
"""

from __future__ import annotations

import os
import random
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cshogi
import numpy as np

from bookgen.errors import BookgenError
from bookgen.store import DEFAULT_BOOK, Book
from refine.search import BookIndex, select_positions

FORMATS = ("usi", "sfen", "hcp", "psfen")
SOURCES = ("all", "leaves", "principal", "mistakes")


@dataclass
class BookPosition:
    id: int
    sfen: str
    ply: int | None
    turn: int
    best: int | None         # best move value (minimax when asked and known)
    count: int               # sum of its moves' counts: how much it was played
    visits: int | None
    moves: list[tuple[str, int | None, int | None]]  # (move, value, child id)


def _load(store: Book, values: str) -> dict[int, BookPosition]:
    column = "coalesce(m.minimax_value, m.value)" if values == "minimax" else "m.value"
    positions: dict[int, BookPosition] = {}
    for pid, sfen, ply, turn, visits in store.conn.execute(
            "SELECT id, sfen, ply, turn, visits FROM positions "
            "WHERE id IN (SELECT position_id FROM moves)"):
        positions[pid] = BookPosition(pid, sfen, ply, turn, None, 0, visits, [])
    for pid, move, value, count, child in store.conn.execute(
            f"SELECT m.position_id, m.move, {column}, m.count, m.child_id FROM moves m"):
        position = positions[pid]
        position.moves.append((move, value, child))
        position.count += count or 0
        if value is not None and (position.best is None or value > position.best):
            position.best = value
    return positions


def _mistake_ids(store: Book) -> set[int]:
    tables = {row[0] for row in store.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "mistakes" not in tables:
        raise BookgenError(f"{store.path}: no mistakes table; run 'bookgen refine mistakes'")
    return {row[0] for row in store.conn.execute("SELECT DISTINCT position_id FROM mistakes")}


def make_starts(out: str | Path, book: str | Path = DEFAULT_BOOK, *, fmt: str = "usi",
                source: str = "all", min_ply: int | None = None, max_ply: int | None = None,
                max_value: int | None = None, side: str = "both", min_count: int | None = None,
                count_percentile: float | None = None, weight: str = "none",
                limit: int | None = None, seed: int = 0, values: str = "raw",
                principal_margin: int = 0) -> dict[str, Any]:
    """Write start positions chosen from the book; returns a summary."""
    if fmt not in FORMATS:
        raise BookgenError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if source not in SOURCES:
        raise BookgenError(f"unknown source {source!r} (choose from {', '.join(SOURCES)})")
    if side not in ("both", "black", "white"):
        raise BookgenError(f"--side must be both, black or white, not {side!r}")
    if weight not in ("none", "visits"):
        raise BookgenError(f"--weight must be none or visits, not {weight!r}")
    if min_count is not None and count_percentile is not None:
        raise BookgenError("--min-count and --count-percentile exclude each other")
    with Book(book, create=False, readonly=True) as store:
        positions = _load(store, values)
        index = BookIndex.load(store)  # child links, shortest lines, selections
        mistakes = _mistake_ids(store) if source == "mistakes" else set()
    chosen = list(positions.values())
    if source in ("leaves", "principal"):
        keep = set(select_positions(index, source, margin=principal_margin))
        chosen = [p for p in chosen if p.id in keep]
    elif source == "mistakes":
        chosen = [p for p in chosen if p.id in mistakes]
    if min_ply is not None:
        chosen = [p for p in chosen if p.ply is not None and p.ply >= min_ply]
    if max_ply is not None:
        chosen = [p for p in chosen if p.ply is not None and p.ply <= max_ply]
    if max_value is not None:
        chosen = [p for p in chosen if p.best is not None and abs(p.best) <= max_value]
    if side != "both":
        turn = cshogi.BLACK if side == "black" else cshogi.WHITE
        chosen = [p for p in chosen if p.turn == turn]
    if count_percentile is not None and chosen:
        min_count = int(np.percentile([p.count for p in chosen], count_percentile))
    if min_count is not None:
        chosen = [p for p in chosen if p.count >= min_count]
    chosen.sort(key=lambda p: p.sfen)
    if limit is not None and len(chosen) > limit:
        chosen = sorted(random.Random(seed).sample(chosen, limit), key=lambda p: p.sfen)
    copies = _copies(chosen, weight)
    paths = index.paths_from_start() if fmt == "usi" else {}
    written = _write(Path(out), fmt, chosen, copies, paths)
    plies = Counter(p.ply for p in chosen)
    bests = [p.best for p in chosen if p.best is not None]
    return {"file": str(out), "format": fmt, "positions": len(chosen), "written": written,
            "from_startpos": sum(1 for p in chosen if p.id in paths),
            "by_ply": {str(k): v for k, v in sorted(plies.items(), key=lambda kv: kv[0] or 0)},
            "value_min": min(bests) if bests else None,
            "value_max": max(bests) if bests else None}


def _copies(chosen: list[BookPosition], weight: str) -> list[int]:
    """How many times each position is written: 1, or in proportion to visits
    (the median weight gives one copy)."""
    if weight == "none" or not chosen:
        return [1] * len(chosen)
    weights = [p.visits if p.visits else p.count for p in chosen]
    unit = statistics.median(w for w in weights) or 1
    return [max(1, round(w / unit)) for w in weights]


def _write(out: Path, fmt: str, chosen: list[BookPosition], copies: list[int],
           paths: dict[int, list[str]]) -> int:
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if fmt in ("usi", "sfen"):
            lines = []
            for position, n in zip(chosen, copies):
                if fmt == "usi" and position.id in paths:
                    moves = paths[position.id]
                    line = "startpos moves " + " ".join(moves) if moves else "startpos"
                else:
                    line = f"sfen {position.sfen} {position.ply or 1}"
                lines.extend([line] * n)
            temporary.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
            written = len(lines)
        else:
            dtype = cshogi.HuffmanCodedPos if fmt == "hcp" else cshogi.PackedSfen
            records = np.zeros(sum(copies), dtype=dtype)
            board = cshogi.Board()
            index = 0
            for position, n in zip(chosen, copies):
                board.set_sfen(f"{position.sfen} {position.ply or 1}")
                if fmt == "hcp":
                    board.to_hcp(records[index:index + 1])
                else:
                    board.to_psfen(records[index:index + 1])
                records[index + 1:index + n] = records[index]
                index += n
            records.tofile(temporary)
            written = len(records)
        os.replace(temporary, out)
        return written
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise BookgenError(f"{out}: cannot write ({error.strerror})") from None
