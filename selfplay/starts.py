"""``bookgen starts``: self-play start positions cut from the book.

:func:`make_starts` takes the book, the output file and a
:class:`StartsSettings` (format, source, :class:`StartsSelection`, weight,
limit, seed) and returns a :class:`StartsSummary`.
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

Positions are numpy columns (the book's
:class:`~bookgen.store.index.BookIndex`: best values and counts over every
``moves`` row), filtered and ordered (by sfen, through the sfen index)
without a Python object per position; the book is read in one snapshot,
sfens in sfen order while the output is written. ``startpos moves`` lines
are assembled from the shortest-line tree in numpy; large books play moves
(child links) and encode hcp/psfen records on forked worker processes.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import cshogi
import numpy as np

from bookgen.arrays import NULL
from bookgen.errors import BookgenError, SettingsError, at_least
from bookgen.files import atomic_output
from bookgen.formats.positions import POSITION_RECORDS, encode_positions
from bookgen.store import Book, ValueColumn, queries
from bookgen.store.columns import mistake_position_ids
from bookgen.store.index import BookIndex, IndexSpec
from bookgen.workers.forked import fork_map

__all__ = ["FORMATS", "SIDES", "SOURCES", "WEIGHTS", "StartsSelection", "StartsSettings",
           "StartsSummary", "make_starts"]

FORMATS = ("usi", "sfen", "hcp", "psfen")
SOURCES = ("all", "leaves", "principal", "mistakes")
SIDES = ("both", "black", "white")
WEIGHTS = ("none", "visits")
VALUES = tuple(str(column) for column in ValueColumn)

_CHUNK = 1 << 14      # positions per block of output (and per encoding task)
_CACHE_KB = 16384     # SQLite page cache while reading the book
_WORKERS = min(4, os.cpu_count() or 1)  # processes playing moves / encoding positions
_PARALLEL_MIN_POSITIONS = 50_000        # fewer: not worth starting them


class _Positions(NamedTuple):
    """The positions with moves as columns, in id order (NULL: bookgen.arrays.NULL):
    their index rows and ids, best move value and sum of move counts (``total``)
    over every ``moves`` row, ply, side to move and visits."""

    rows: np.ndarray
    ids: np.ndarray
    best: np.ndarray
    total: np.ndarray
    ply: np.ndarray
    turn: np.ndarray
    visits: np.ndarray

    @classmethod
    def of(cls, index: BookIndex, column: ValueColumn) -> _Positions:
        """The columns of ``index`` (every row, ``column`` among its values, counts,
        ply, turn and visits)."""
        rows = np.flatnonzero(index.has_moves)
        return cls(rows, index.ids[rows], index.best_values(values=column)[rows],
                   index.total_counts()[rows],
                   *(index.column(name)[rows] for name in ("ply", "turn", "visits")))


def _mistake_ids(store: Book) -> np.ndarray:
    if "mistakes" not in queries.table_names(store.conn):
        raise BookgenError(f"{store.path}: no mistakes table; run 'bookgen refine mistakes'")
    return mistake_position_ids(store.conn)


@dataclass(frozen=True)
class StartsSelection:
    """Which of the source's positions are kept: those at ``min_ply`` ..
    ``max_ply`` (None: no bound), whose best value is within ``max_value_cp`` of 0
    (the book's own values or refine minimax's: ``values``), whose side to move
    is ``side`` (``both``, ``black``, ``white``) and whose moves' counts add up
    to ``min_count`` or to the ``count_percentile`` percentile of the kept
    positions' counts (one or the other). ``principal_margin_cp``: the
    ``principal`` source also follows moves within this many cp of the best."""

    min_ply: int | None = None
    max_ply: int | None = None
    max_value_cp: int | None = None
    side: str = "both"
    min_count: int | None = None
    count_percentile: float | None = None
    values: ValueColumn = ValueColumn.RAW
    principal_margin_cp: int = 0

    def __post_init__(self) -> None:
        for name in ("min_ply", "max_ply", "max_value_cp", "min_count", "principal_margin_cp"):
            at_least(f"selection.{name}", getattr(self, name), 0)
        if self.side not in SIDES:
            raise SettingsError("selection.side",
                                f"must be both, black or white, not {self.side!r}")
        if self.min_count is not None and self.count_percentile is not None:
            raise SettingsError("selection.min_count",
                                f"{SettingsError.FIELD} and "
                                f"{SettingsError.mention('selection.count_percentile')} "
                                "exclude each other")
        if self.count_percentile is not None and not 0 <= self.count_percentile <= 100:
            raise SettingsError("selection.count_percentile", "must be between 0 and 100")
        if self.values not in VALUES:
            raise BookgenError(f"unknown values {self.values!r} (choose from "
                               f"{', '.join(VALUES)})")
        object.__setattr__(self, "values", ValueColumn(self.values))


@dataclass(frozen=True)
class StartsSettings:
    """What :func:`make_starts` writes (see the module docstring and ``bookgen starts
    --help``): the ``format`` (:data:`FORMATS`), the positions it starts from
    (``source``, :data:`SOURCES`) and the ``selection`` among them; ``weight``
    ``visits`` repeats positions in proportion to their visits (the median gives
    one copy); at most ``limit`` positions, sampled with ``seed``."""

    format: str = "usi"
    source: str = "all"
    selection: StartsSelection = field(default_factory=StartsSelection)
    weight: str = "none"
    limit: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise BookgenError(f"unknown format {self.format!r} (choose from "
                               f"{', '.join(FORMATS)})")
        if self.source not in SOURCES:
            raise BookgenError(f"unknown source {self.source!r} (choose from "
                               f"{', '.join(SOURCES)})")
        if self.weight not in WEIGHTS:
            raise SettingsError("weight", f"must be none or visits, not {self.weight!r}")
        at_least("limit", self.limit, 1)


@dataclass(frozen=True)
class StartsSummary:
    """What :func:`make_starts` wrote: ``written`` lines or records for ``positions``
    positions to ``file`` in ``format``; ``from_startpos`` of them (usi) as
    ``startpos moves ...``; positions per ply (``"None"``: unknown) and the
    range of their best values in cp (None: no value)."""

    file: str
    format: str
    positions: int
    written: int
    from_startpos: int
    by_ply: dict[str, int]
    value_min: int | None
    value_max: int | None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output."""
        return {"file": self.file, "format": self.format, "positions": self.positions,
                "written": self.written, "from_startpos": self.from_startpos,
                "by_ply": dict(self.by_ply), "value_min": self.value_min,
                "value_max": self.value_max}


def make_starts(book: str | Path, out: str | Path, settings: StartsSettings | None = None
                ) -> StartsSummary:
    """Write start positions chosen from ``book`` to ``out`` as ``settings`` say (None:
    the defaults, every position with moves as usi lines)."""
    settings = settings if settings is not None else StartsSettings()
    with Book(book, create=False, readonly=True) as store:
        # A small page cache: the book is read in a few sequential passes.
        queries.set_cache_size(store.conn, _CACHE_KB)
        queries.begin(store.conn)  # one snapshot of the book for all the queries
        summary = _starts(store, Path(out), settings)
        queries.commit(store.conn)
    return summary


def _starts(store: Book, out: Path, settings: StartsSettings) -> StartsSummary:
    # Every moves row (refine minimax's transposition rows too): best values and
    # counts over all of them; principal lines by the minimax values; child links
    # for the startpos lines and the leaves and principal selections.
    fmt, source, selection = settings.format, settings.source, settings.selection
    column = selection.values
    principal = (ValueColumn.MINIMAX,) if source == "principal" else ()
    index = BookIndex.load(store, IndexSpec(
        positions=frozenset({"ply", "turn", "visits"}),
        values=tuple(dict.fromkeys((*principal, column))),
        resolve_children=fmt == "usi" or source in ("leaves", "principal"),
        workers=_WORKERS))
    positions = _Positions.of(index, column)
    rows, position_ids, best, count = (positions.rows, positions.ids, positions.best,
                                       positions.total)
    ply, turn, visits = positions.ply, positions.turn, positions.visits
    keep = np.ones(len(rows), dtype=bool)
    if source == "leaves":
        keep &= np.isin(rows, index.leaf_rows())
    elif source == "principal":
        keep &= np.isin(rows, index.principal_rows(selection.principal_margin_cp))
    elif source == "mistakes":
        keep &= np.isin(position_ids, _mistake_ids(store))
    if selection.min_ply is not None:
        keep &= (ply != NULL) & (ply >= selection.min_ply)
    if selection.max_ply is not None:
        keep &= (ply != NULL) & (ply <= selection.max_ply)
    if selection.max_value_cp is not None:
        keep &= (best != NULL) & (np.abs(best) <= selection.max_value_cp)
    if selection.side != "both":
        keep &= turn == (cshogi.BLACK if selection.side == "black" else cshogi.WHITE)
    min_count = selection.min_count
    if selection.count_percentile is not None and keep.any():
        min_count = int(np.percentile(count[keep], selection.count_percentile))
    if min_count is not None:
        keep &= count >= min_count
    # Sorted by sfen: the ids in the order of the sfen index.
    by_sfen = np.fromiter(chain.from_iterable(queries.ids_by_sfen(store.conn)), dtype=np.int64)
    total = len(by_sfen)
    ids = by_sfen[np.isin(by_sfen, position_ids[keep])]
    del by_sfen
    limit = settings.limit
    if limit is not None and len(ids) > limit:
        # (what random.sample of the sorted positions picks, by index)
        ids = ids[np.array(sorted(random.Random(settings.seed).sample(range(len(ids)), limit)),
                           dtype=np.int64)]
    chosen = np.searchsorted(position_ids, ids)
    copies = _copies(visits[chosen], count[chosen], settings.weight)
    reached = 0
    if fmt == "usi":
        tree = index.shortest_tree()
        tree_rows = index.rows(ids)
        reached = int((tree[2][tree_rows] >= 0).sum())
        written = _write(out, lambda stream: _write_usi(
            stream, store.conn, total, ids, ply[chosen], copies, index, tree, tree_rows))
    elif fmt == "sfen":
        written = _write(out, lambda stream: _write_sfen(
            stream, store.conn, total, ids, ply[chosen], copies))
    else:
        written = _write(out, lambda stream: _write_records(
            stream, fmt, store.conn, total, ids, ply[chosen], copies))
    bests = best[chosen]
    bests = bests[bests != NULL]
    return StartsSummary(file=str(out), format=fmt, positions=len(chosen), written=written,
                         from_startpos=reached, by_ply=_by_ply(ply[chosen]),
                         value_min=int(bests.min()) if len(bests) else None,
                         value_max=int(bests.max()) if len(bests) else None)


def _by_ply(plies: np.ndarray) -> dict[str, int]:
    """Positions per ply (unknown: "None"), by ply; ply 0 and unknown ties in the
    order they first occur."""
    keys, first, counts = np.unique(plies, return_index=True, return_counts=True)
    items = sorted(((None if k == NULL else int(k), int(f), int(c))
                    for k, f, c in zip(keys, first, counts)), key=lambda t: (t[0] or 0, t[1]))
    return {str(k): c for k, _first, c in items}


def _copies(visits: np.ndarray, count: np.ndarray, weight: str) -> np.ndarray:
    """How many times each position (with these visits and move counts) is written:
    1, or in proportion to visits (the median weight gives one copy)."""
    if weight == "none" or not len(visits):
        return np.ones(len(visits), dtype=np.int64)
    weights = np.where((visits == NULL) | (visits == 0), count, visits)
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
