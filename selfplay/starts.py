"""``bookgen starts``: self-play start positions cut from the book.

Positions are chosen from the book (all positions with moves, the leaves,
the principal lines, or the mistakes found by ``refine mistakes``), filtered
by ply, value, side to move and how often they were played, optionally
weighted by visits, and written as:

- ``usi``: ``startpos moves ...`` along the shortest book path from the
  initial position (what ``cshogi.cli``, ShogiHome and the match runner read),
  ``sfen ...`` for positions the book does not reach from there (child links,
  shortest lines and the leaves/principal selections are the store's
  :class:`~bookgen.store.index.BookIndex`, shared with ``refine search``);
- ``sfen``: ``sfen <sfen> <ply>`` lines;
- ``hcp``: raw 32-byte ``cshogi.HuffmanCodedPos`` records, dlshogi's ``roots.hcp``;
- ``psfen``: raw 32-byte ``cshogi.PackedSfen`` records (YaneuraOu).

Positions are numpy columns (SQLite aggregates the moves), filtered and
ordered (by sfen, through the sfen index) without a Python object per
position; the book is read in one snapshot, sfens in sfen order while the
output is written. ``startpos moves`` lines are assembled from the shortest-line
tree in numpy; large books play moves (child links) and encode hcp/psfen
records on forked worker processes.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

import cshogi
import numpy as np

from bookgen.arrays import NULL, find_rows
from bookgen.errors import BookgenError
from bookgen.files import atomic_output
from bookgen.formats.positions import POSITION_RECORDS, encode_positions
from bookgen.store import DEFAULT_BOOK, Book, ValueColumn, queries
from bookgen.store.columns import sql_int_columns
from bookgen.store.index import BookIndex, IndexSpec
from bookgen.workers.forked import fork_map

FORMATS = ("usi", "sfen", "hcp", "psfen")
SOURCES = ("all", "leaves", "principal", "mistakes")

_CHUNK = 1 << 14      # positions per block of output (and per encoding task)
_CACHE_KB = 16384     # SQLite page cache while reading the book
_WORKERS = min(4, os.cpu_count() or 1)  # processes playing moves / encoding positions
_PARALLEL_MIN_POSITIONS = 50_000        # fewer: not worth starting them


class _Positions:
    """The positions with moves as columns, in id order (NULL: bookgen.arrays.NULL)."""

    def __init__(self, store: Book, values: str) -> None:
        column = "coalesce(minimax_value, value)" if values == "minimax" else "value"
        self.ids, self.best, self.count = sql_int_columns(
            store.conn, f"SELECT position_id AS id, max({column}) AS best, "
                        "coalesce(sum(count), 0) AS total FROM moves GROUP BY position_id",
            ["id", "best", "total"])
        if np.any(self.ids[1:] <= self.ids[:-1]):
            order = np.argsort(self.ids, kind="stable")
            self.ids, self.best, self.count = self.ids[order], self.best[order], self.count[order]
        ids, ply, turn, visits = sql_int_columns(
            store.conn, "SELECT id, ply, turn, visits FROM positions ORDER BY id",
            ["id", "ply", "turn", "visits"])
        if np.any(ids[1:] <= ids[:-1]):
            order = np.argsort(ids, kind="stable")
            ids, ply, turn, visits = ids[order], ply[order], turn[order], visits[order]
        rows, found = find_rows(ids, self.ids)
        if not found.all():  # moves of positions missing from the book: ignored
            self.ids, self.best, self.count = self.ids[found], self.best[found], \
                self.count[found]
            rows = rows[found]
        self.ply, self.turn, self.visits = ply[rows], turn[rows], visits[rows]


def _mistake_ids(store: Book) -> np.ndarray:
    if "mistakes" not in queries.table_names(store.conn):
        raise BookgenError(f"{store.path}: no mistakes table; run 'bookgen refine mistakes'")
    return sql_int_columns(store.conn, "SELECT DISTINCT position_id AS id FROM mistakes",
                           ["id"])[0]


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
        # A small page cache: the book is read in a few sequential passes.
        queries.set_cache_size(store.conn, _CACHE_KB)
        queries.begin(store.conn)  # one snapshot of the book for all the queries
        summary = _starts(store, Path(out), fmt, source, min_ply, max_ply, max_value, side,
                          min_count, count_percentile, weight, limit, seed, values,
                          principal_margin)
        queries.commit(store.conn)
    return summary


def _starts(store: Book, out: Path, fmt: str, source: str, min_ply: int | None,
            max_ply: int | None, max_value: int | None, side: str, min_count: int | None,
            count_percentile: float | None, weight: str, limit: int | None, seed: int,
            values: str, principal_margin: int) -> dict[str, Any]:
    # child links, shortest lines, selections (first: its peak comes before the
    # position columns exist)
    index = BookIndex.load(store, IndexSpec(
        values=(ValueColumn.MINIMAX,) if source == "principal" else (),
        edges=frozenset({"count"}) if source == "principal" else frozenset(),
        workers=_WORKERS)) if fmt == "usi" or source in ("leaves", "principal") else None
    positions = _Positions(store, values)
    ply, best, count = positions.ply, positions.best, positions.count
    keep = np.ones(len(positions.ids), dtype=bool)
    if source == "leaves" and index is not None:
        keep &= np.isin(positions.ids, index.ids[index.leaf_rows()])
    elif source == "principal" and index is not None:
        keep &= np.isin(positions.ids, index.ids[index.principal_rows(principal_margin)])
    elif source == "mistakes":
        keep &= np.isin(positions.ids, _mistake_ids(store))
    if min_ply is not None:
        keep &= (ply != NULL) & (ply >= min_ply)
    if max_ply is not None:
        keep &= (ply != NULL) & (ply <= max_ply)
    if max_value is not None:
        keep &= (best != NULL) & (np.abs(best) <= max_value)
    if side != "both":
        keep &= positions.turn == (cshogi.BLACK if side == "black" else cshogi.WHITE)
    if count_percentile is not None and keep.any():
        min_count = int(np.percentile(count[keep], count_percentile))
    if min_count is not None:
        keep &= count >= min_count
    # Sorted by sfen: the ids in the order of the sfen index.
    by_sfen = np.fromiter(chain.from_iterable(queries.ids_by_sfen(store.conn)), dtype=np.int64)
    total = len(by_sfen)
    ids = by_sfen[np.isin(by_sfen, positions.ids[keep])]
    del by_sfen
    if limit is not None and len(ids) > limit:
        # (what random.sample of the sorted positions picks, by index)
        ids = ids[np.array(sorted(random.Random(seed).sample(range(len(ids)), limit)),
                           dtype=np.int64)]
    chosen = np.searchsorted(positions.ids, ids)
    copies = _copies(positions, chosen, weight)
    reached = 0
    if fmt == "usi" and index is not None:
        tree = index.shortest_tree()
        rows = index.rows(ids)
        reached = int((tree[2][rows] >= 0).sum())
        written = _write(out, lambda stream: _write_usi(
            stream, store.conn, total, ids, ply[chosen], copies, index, tree, rows))
    elif fmt == "sfen":
        written = _write(out, lambda stream: _write_sfen(
            stream, store.conn, total, ids, ply[chosen], copies))
    else:
        written = _write(out, lambda stream: _write_records(
            stream, fmt, store.conn, total, ids, ply[chosen], copies))
    bests = best[chosen]
    bests = bests[bests != NULL]
    return {"file": str(out), "format": fmt, "positions": len(chosen), "written": written,
            "from_startpos": reached, "by_ply": _by_ply(ply[chosen]),
            "value_min": int(bests.min()) if len(bests) else None,
            "value_max": int(bests.max()) if len(bests) else None}


def _by_ply(plies: np.ndarray) -> dict[str, int]:
    """Positions per ply (unknown: "None"), by ply; ply 0 and unknown ties in the
    order they first occur."""
    keys, first, counts = np.unique(plies, return_index=True, return_counts=True)
    items = sorted(((None if k == NULL else int(k), int(f), int(c))
                    for k, f, c in zip(keys, first, counts)), key=lambda t: (t[0] or 0, t[1]))
    return {str(k): c for k, _first, c in items}


def _copies(positions: _Positions, chosen: np.ndarray, weight: str) -> np.ndarray:
    """How many times each position is written: 1, or in proportion to visits
    (the median weight gives one copy)."""
    if weight == "none" or not len(chosen):
        return np.ones(len(chosen), dtype=np.int64)
    visits = positions.visits[chosen]
    weights = np.where((visits == NULL) | (visits == 0), positions.count[chosen], visits)
    ordered = np.sort(weights)
    n = len(ordered)
    # statistics.median: the middle value, or the mean of the two middle ones
    unit = int(ordered[n // 2]) if n % 2 else (int(ordered[n // 2 - 1]) + int(ordered[n // 2])) / 2
    unit = unit or 1
    return np.maximum(1, np.rint(weights / unit)).astype(np.int64)


def _sfens(conn: sqlite3.Connection, ids: np.ndarray, total: int) -> Iterator[str]:
    """The sfens of the positions ``ids`` (in sfen order), in that order."""
    if len(ids) * 16 < total:  # a few: look them up
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500].tolist()
            found = queries.sfens_of(conn, part)
            for pid in part:
                yield found[pid]
        return
    wanted = iter(ids.tolist())
    target = next(wanted, None)
    if target is None:
        return
    for pid, sfen in queries.ids_and_sfens_by_sfen(conn):
        if pid == target:
            yield sfen
            target = next(wanted, None)
            if target is None:
                return


def _write(out: Path, write: Callable[[BinaryIO], int]) -> int:
    """Write ``out`` through a temporary file; returns what ``write`` returns."""
    with atomic_output(out) as temporary, open(temporary, "wb") as stream:
        return write(stream)


def _line_plies(ply: np.ndarray) -> np.ndarray:
    """The move number written after a sfen: the ply, 1 when unknown."""
    return np.where((ply == NULL) | (ply == 0), 1, ply)


def _write_sfen(stream: BinaryIO, conn: sqlite3.Connection, total: int, ids: np.ndarray,
                ply: np.ndarray, copies: np.ndarray) -> int:
    plies = _line_plies(ply)
    sfens = _sfens(conn, ids, total)
    repeat = bool((copies != 1).any())
    for start in range(0, len(ids), _CHUNK):
        part = plies[start:start + _CHUNK].tolist()
        if repeat:  # (the chunk's list first: zip must not take a sfen too many)
            lines = [f"sfen {sfen} {p}\n" * n for p, n, sfen in
                     zip(part, copies[start:start + _CHUNK].tolist(), sfens)]
        else:
            lines = [f"sfen {sfen} {p}\n" for p, sfen in zip(part, sfens)]
        stream.write("".join(lines).encode("utf-8"))
    return int(copies.sum())


def _write_records(stream: BinaryIO, fmt: str, conn: sqlite3.Connection, total: int,
                   ids: np.ndarray, ply: np.ndarray, copies: np.ndarray) -> int:
    plies = _line_plies(ply)

    def tasks() -> Iterator[tuple[str, list[str], list[int]]]:
        sfens = _sfens(conn, ids, total)
        for start in range(0, len(ids), _CHUNK):
            part = plies[start:start + _CHUNK].tolist()
            # (the chunk's list first: zip must not take a sfen too many)
            yield fmt, [sfen for _ply, sfen in zip(part, sfens)], part

    workers = _WORKERS if len(ids) >= _PARALLEL_MIN_POSITIONS else 1
    for start, data in zip(range(0, len(ids), _CHUNK),
                           fork_map(encode_positions, tasks(), workers)):
        records = np.frombuffer(data, dtype=POSITION_RECORDS[fmt])
        repeat = copies[start:start + _CHUNK]
        if (repeat != 1).any():
            records = np.repeat(records, repeat)
        stream.write(records.tobytes())
    return int(copies.sum())


def _write_usi(stream: BinaryIO, conn: sqlite3.Connection, total: int, ids: np.ndarray,
               ply: np.ndarray, copies: np.ndarray, index: BookIndex,
               tree: tuple[np.ndarray, np.ndarray, np.ndarray], rows: np.ndarray) -> int:
    """``startpos moves ...`` lines along the shortest book lines, ``sfen ...``
    lines for the positions the initial position does not reach."""
    plies = _line_plies(ply)
    parent, move, depth = tree
    reached = depth[rows] >= 0
    sfens = _sfens(conn, ids[~reached], total)
    tokens = [f" {name}".encode() for name in index.move_names]
    width = max((len(t) for t in tokens), default=1)
    table = np.zeros((max(len(tokens), 1), width), dtype=np.uint8)
    for i, token in enumerate(tokens):
        table[i, :len(token)] = np.frombuffer(token, dtype=np.uint8)
    lengths = np.array([len(t) for t in tokens] or [0], dtype=np.int64)
    simple = not (copies != 1).any()
    for start in range(0, len(ids), _CHUNK):
        stop = min(start + _CHUNK, len(ids))
        here = reached[start:stop]
        blob, sizes = _lines(rows[start:stop][here], parent, move, depth, table, lengths)
        if simple and here.all():
            stream.write(blob)
            continue
        ends = np.cumsum(sizes).tolist()
        pieces = []
        line = at = 0
        for is_reached, p, n in zip(here.tolist(), plies[start:stop].tolist(),
                                    copies[start:stop].tolist()):
            if is_reached:
                text = blob[at:ends[line]]
                at = ends[line]
                line += 1
            else:
                text = f"sfen {next(sfens)} {p}\n".encode()
            pieces.append(text * n)
        stream.write(b"".join(pieces))
    return int(copies.sum())


def _lines(rows: np.ndarray, parent: np.ndarray, move: np.ndarray, depth: np.ndarray,
           table: np.ndarray, lengths: np.ndarray) -> tuple[bytes, np.ndarray]:
    """``startpos [moves ...]`` lines (with newlines) of the tree rows ``rows``, joined,
    and the length of each."""
    k = len(rows)
    if not k:
        return b"", np.zeros(0, dtype=np.int64)
    d = depth[rows].astype(np.int64)
    steps = int(d.max())
    # into[j]: the move into the j-th ancestor of each row (its own move first)
    into = np.zeros((max(steps, 1), k), dtype=np.int64)
    at = rows.astype(np.int64)
    for j in range(steps):
        into[j] = move[at]
        up = parent[at]
        at = np.where(up >= 0, up, at)
    # the t-th move of a line is the move into its (d - 1 - t)-th ancestor
    back = d[:, None] - 1 - np.arange(steps)[None, :]
    valid = back >= 0
    line_moves = np.where(valid, into[np.maximum(back, 0), np.arange(k)[:, None]], 0)
    width = table.shape[1]
    prefix = np.frombuffer(b"startpos moves", dtype=np.uint8)
    body = np.concatenate([np.broadcast_to(prefix, (k, len(prefix))),
                           table[line_moves].reshape(k, steps * width),
                           np.full((k, 1), ord("\n"), dtype=np.uint8)], axis=1)
    keep = np.concatenate([
        np.broadcast_to(np.arange(len(prefix)) < 8, (k, len(prefix))) | (d > 0)[:, None],
        ((np.arange(width)[None, None, :] < lengths[line_moves][:, :, None])
         & valid[:, :, None]).reshape(k, steps * width),
        np.ones((k, 1), dtype=bool)], axis=1)
    return body[keep].tobytes(), keep.sum(axis=1)
