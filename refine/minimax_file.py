"""``bookgen refine minimax --in BOOK.db --out REFINED.db``: minimax from file to file.

:func:`refine_minimax_file` reads a DB2016 file (:func:`bookgen.formats.db2016.read_db2016`:
the same validation and diagnostics as ``bookgen import``), merges duplicate
positions and moves as the book does (the minimum ply; a move read again
replaces the earlier one if it was searched deeper, or as deep with a greater
count), builds the graph the book's refine builds
(:func:`bookgen.refine.minimax_graph.graph_from_rows`), solves it
(:func:`bookgen.refine.minimax.solve`) and writes the values as ``export
--values minimax`` writes a refined book (:func:`bookgen.bookfiles.exporter.minimax_order`):
blocks sorted by sfen, best move first, peta_shock's rule for ties, legal moves
into book positions that the file does not hold written with count 0 and no
ponder. The output is byte for byte that of ``import`` + ``refine minimax`` +
``export --values minimax`` of the same file, without a SQLite book; it is
written whole or not at all (:func:`bookgen.files.atomic_output`). An output
named ``.bin`` is an Apery book, written by the exporter's Apery writer
(:func:`bookgen.formats.apery.export_records`), as ``export --values minimax
--format apery`` writes it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bookgen.arrays import PackedStrings, ranges, return_freed_memory, trim_memory
from bookgen.bookfiles.exporter import minimax_order
from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError, SettingsError
from bookgen.files import atomic_output, check_output
from bookgen.formats import detect_format
from bookgen.formats.apery import export_records
from bookgen.formats.db2016 import (
    NONE,
    Db2016Block,
    format_columns,
    read_db2016,
    usi_names,
    write_db2016_header,
)
from bookgen.refine.minimax import MinimaxSettings, peak_memory_mb, solve
from bookgen.refine.minimax_graph import MinimaxGraph, graph_from_rows
from bookgen.refine.retrograde import DEPTH_INF, Propagation
from bookgen.signals import fault_point
from bookgen.store import BookMove
from bookgen.values import MATE_VALUE
from bookgen.workers.forked import fork_map

__all__ = ["OUTPUT_FORMATS", "MinimaxFileSeconds", "MinimaxFileSummary", "refine_minimax_file"]

OUTPUT_FORMATS = {".db": "db2016", ".bin": "apery"}
_WRITE_ROWS = 1 << 15      # positions formatted and written at a time


@dataclass(frozen=True)
class MinimaxFileSeconds:
    """Where the time of a file-to-file run went."""

    read: float
    graph: float
    propagate: float
    write: float
    total: float


@dataclass(frozen=True)
class MinimaxFileSummary:
    """What a file-to-file run did. ``counts``: what was read (``positions_read``,
    ``moves_read``, ``problems``), the graph's and the method's counts (as
    :class:`bookgen.refine.minimax.MinimaxSummary`'s), then what was written
    (``positions_written``, ``moves_written``, of them ``transposition_moves``)."""

    source: str
    out: str
    format: str
    settings: MinimaxSettings
    counts: Mapping[str, Any]
    seconds: MinimaxFileSeconds
    peak_memory_mb: float

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output: files, method, draw values, counts, seconds, memory."""
        return {"in": self.source, "out": self.out, "format": self.format,
                "method": self.settings.method, **self.settings.params(), **self.counts,
                "seconds": asdict(self.seconds), "peak_memory_mb": self.peak_memory_mb}


@dataclass
class _FileBook:
    """The file's positions with moves (the graph's nodes, in order of first
    appearance) and their moves after merging."""

    sfens: PackedStrings
    ply: np.ndarray          # int64 [N] 0: none
    turn: np.ndarray         # int8 [N]
    book_key: np.ndarray     # uint64 [N] cshogi's book key
    source: np.ndarray       # int32 [M] node of each move
    move: np.ndarray         # uint16 [M]
    ponder: np.ndarray       # uint16 [M]
    value: np.ndarray        # int32 [M] clamped to +-MATE_VALUE, 0 for none (as the graph)
    count: np.ndarray        # int64 [M]


def _merge(blocks: list[Db2016Block]) -> _FileBook:
    """The positions and moves of ``blocks`` merged as an import into an empty book
    merges them (:class:`bookgen.store.BulkWriter`), keeping the positions with moves.
    The blocks are emptied on the way."""
    sfens = PackedStrings.joined([block.sfen for block in blocks])
    for block in blocks:
        block.sfen = PackedStrings.of([])

    def take(name: str) -> np.ndarray:
        """The column of every block, dropped from the blocks."""
        column = np.concatenate([getattr(block, name) for block in blocks])
        for block in blocks:
            setattr(block, name, column[:0])
        return column

    offsets = np.cumsum([0] + [len(block.position) for block in blocks])
    sizes = [len(block.ply) for block in blocks]
    starts = np.cumsum([0] + sizes)
    file_position = np.empty(int(offsets[-1]), dtype=np.int64)
    for block, offset, start in zip(blocks, offsets.tolist(), starts.tolist()):
        file_position[offset:offset + len(block.position)] = block.position
        file_position[offset:offset + len(block.position)] += start
        block.position = block.position[:0]
    zobrist = take("zobrist")
    zobrist.sort()
    repeated_position = bool((zobrist[1:] == zobrist[:-1]).any())
    del zobrist
    ply, turn, book_key = take("ply"), take("turn"), take("book_key")
    if not repeated_position:       # the usual case
        owner = file_position
        first = None
    else:
        index: dict[str, int] = {}
        setdefault = index.setdefault
        position = np.fromiter((setdefault(sfen, len(index)) for sfen in sfens.tolist()),
                               dtype=np.int64, count=len(sfens))
        unique = len(index)
        del index
        unknown = np.iinfo(np.int64).max
        merged_ply = np.full(unique, unknown, dtype=np.int64)
        np.minimum.at(merged_ply, position, np.where(ply > 0, ply, unknown))
        merged_ply[merged_ply == unknown] = 0
        ply = merged_ply
        first = np.full(unique, len(sfens), dtype=np.int64)
        np.minimum.at(first, position, np.arange(len(sfens)))
        owner = position[file_position]
    del file_position
    move, depth, count = take("move"), take("depth"), take("count")
    ponder, value = take("ponder"), take("value")
    value = np.clip(np.where(value == NONE, 0, value), -MATE_VALUE, MATE_VALUE).astype(np.int32)
    key = owner << 16 | move
    key.sort()
    if (key[1:] == key[:-1]).any():
        # One row per (position, move): the deepest, then the most counted, then the first.
        deep = np.where(depth == NONE, -1, depth)
        order = np.lexsort((np.arange(len(move)), -count, -deep, move, owner))
        key = (owner << 16 | move)[order]
        keep = order[np.concatenate(([True], key[1:] != key[:-1]))]
        owner, move, ponder, value, count = (owner[keep], move[keep], ponder[keep],
                                             value[keep], count[keep])
    del key, depth
    positions = len(ply)
    has_moves = np.zeros(positions, dtype=bool)
    has_moves[owner] = True
    if has_moves.all() and first is None:
        return _FileBook(sfens, ply, turn, book_key, owner.astype(np.int32), move, ponder, value,
                         count)
    nodes = np.flatnonzero(has_moves)
    node_of = np.full(positions, -1, dtype=np.int64)
    node_of[nodes] = np.arange(len(nodes))
    at = nodes if first is None else first[nodes]
    return _FileBook(sfens.take(at), ply[nodes], turn[at], book_key[at],
                     node_of[owner].astype(np.int32), move, ponder, value, count)


def _check_files(source: Path, out: Path) -> str:
    if not source.is_file():
        raise BookgenError(f"{source}: no such file")
    suffix = out.suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        kinds = ", ".join(f"{s} ({f})" for s, f in OUTPUT_FORMATS.items())
        raise SettingsError("out", f"{out}: {SettingsError.FIELD} must end in {kinds}")
    check_output(out, protected=[source])
    if detect_format(source) != "db2016":
        raise BookgenError(f"{source}: not a DB2016 book; the file-to-file refine reads "
                           "DB2016 books")
    return OUTPUT_FORMATS[suffix]


_job: dict[str, Any] = {}   # what _blocks_text reads; forked workers inherit it


@dataclass
class _Written:
    """The blocks of a run of positions as written: ``sfens`` and ``ply``; the moves of
    position ``i`` are ``indptr[i]:indptr[i + 1]`` of the other columns, in writing
    order, with the values written; ``transpositions``: how many are not book moves."""

    sfens: list[str]
    ply: np.ndarray
    indptr: np.ndarray
    move: np.ndarray
    ponder: np.ndarray
    value: np.ndarray
    depth: np.ndarray          # NONE: none (a line ending in repetition)
    count: np.ndarray
    transpositions: int


def _written(span: tuple[int, int]) -> _Written:
    """The positions ``start:stop`` in sfen order with their options in writing order
    and the values written (:func:`minimax_order`)."""
    start, stop = span
    book: _FileBook = _job["book"]
    graph: MinimaxGraph = _job["graph"]
    result: Propagation = _job["result"]
    nodes = _job["order"][start:stop]
    starts, stops = graph.indptr[nodes], graph.indptr[nodes + 1]
    options = ranges(starts, stops)
    indptr = np.concatenate(([0], np.cumsum(stops - starts)))
    row = graph.row[options]
    stored = row >= 0
    move16 = graph.move16[options]
    depth = result.option_depth[options].astype(np.int64)
    depth = np.where(depth >= DEPTH_INF, -1, depth)
    count = graph.count[options]
    arranged, written = minimax_order(indptr, move16, result.option_value[options], depth,
                                      count, _job["draws"][graph.turn[nodes]])
    ponder = np.where(stored, book.ponder[np.where(stored, row, 0)], 0).astype(np.uint16)
    depth = depth[arranged]
    return _Written([book.sfens[i] for i in nodes.tolist()], book.ply[nodes], indptr,
                    move16[arranged], ponder[arranged], written[arranged],
                    np.where(depth < 0, NONE, depth), count[arranged],
                    int((~stored).sum()))


def _blocks_text(span: tuple[int, int]) -> tuple[bytes, int, int]:
    """The DB2016 text of the positions ``start:stop`` (see :func:`_written`), the
    numbers of moves and of transposition moves written."""
    w = _written(span)
    text = format_columns(w.sfens, w.ply, w.indptr, w.move, w.ponder, w.value, w.depth,
                          w.count)
    return text, len(w.move), w.transpositions


def _book_moves(spans: list[tuple[int, int]]) -> Iterator[tuple[str, int | None,
                                                                 list[BookMove]]]:
    """The positions as the exporter's blocks (for the Apery writer)."""
    names = usi_names()
    for span in spans:
        w = _written(span)
        ponders = [None if p == 0 else names[p] for p in w.ponder.tolist()]
        depths = [None if d == NONE else d for d in w.depth.tolist()]
        moves = [BookMove(*fields) for fields in zip(names[w.move].tolist(), ponders,
                                                      w.value.tolist(), depths,
                                                      w.count.tolist())]
        bounds = w.indptr.tolist()
        for i, (sfen, ply) in enumerate(zip(w.sfens, w.ply.tolist())):
            yield sfen, ply or None, moves[bounds[i]:bounds[i + 1]]
        fault_point("refine-minimax-file-writing")


def refine_minimax_file(source: str | Path, out: str | Path,
                        settings: MinimaxSettings | None = None, *, strict: bool = False,
                        diagnostics: Diagnostics | None = None) -> MinimaxFileSummary:
    """Minimax values of the DB2016 book ``source`` written to ``out`` (see the module
    docstring); returns a summary. Invalid entries are reported to ``diagnostics`` and
    skipped, as ``bookgen import`` does; with ``strict`` any invalid entry is a
    :class:`SettingsError` of the field ``strict``, and a file with no valid position
    with moves a :class:`BookgenError`: nothing is written then."""
    started = time.perf_counter()
    return_freed_memory()
    settings = settings if settings is not None else MinimaxSettings()
    diagnostics = diagnostics if diagnostics is not None else Diagnostics()
    source, out = Path(source), Path(out)
    output_format = _check_files(source, out)
    workers = settings.scan_workers or min(2, os.cpu_count() or 1)

    blocks = list(read_db2016(source, diagnostics, workers=workers))
    counts: dict[str, Any] = {"positions_read": sum(len(b) for b in blocks),
                              "moves_read": sum(len(b.move) for b in blocks),
                              "problems": len(diagnostics)}
    if strict and len(diagnostics):
        raise SettingsError(
            "strict", f"{len(diagnostics)} invalid entries (first: {diagnostics.problems[0]}); "
            f"{SettingsError.FIELD}: {out} not written")
    book = _merge(blocks)
    del blocks
    if not book.sfens:
        first = f" (first: {diagnostics.problems[0]})" if len(diagnostics) else ""
        raise BookgenError(f"{source}: no valid position with moves{first}; {out} not written")
    read_seconds = time.perf_counter() - started

    nodes = len(book.sfens)
    every = book.sfens.tolist()       # the order written, while memory is low
    order = np.array(sorted(range(nodes), key=every.__getitem__), dtype=np.int64)
    del every
    trim_memory()
    move_rows = {
        "source": book.source, "move16": book.move,
        "value": book.value,
        "count": book.count, "linked": np.zeros(len(book.move), dtype=bool),
        "earlier": np.zeros(len(book.move), dtype=bool)}
    graph = graph_from_rows(np.arange(1, nodes + 1, dtype=np.int64), book.sfens, book.turn,
                            move_rows, workers, book_keys=book.book_key)
    del move_rows
    book.source = book.move = book.value = book.count = book.book_key = book.ponder[:0]
    trim_memory()
    result = solve(graph, settings)
    fault_point("refine-minimax-file-propagated")

    write_started = time.perf_counter()
    draws = np.array([settings.draws.cp(0), settings.draws.cp(1)], dtype=np.int64)
    spans = [(start, min(start + _WRITE_ROWS, nodes)) for start in range(0, nodes, _WRITE_ROWS)]
    moves = transpositions = 0
    _job.update(book=book, graph=graph, result=result, order=order, draws=draws)
    try:
        with atomic_output(out) as temporary, open(temporary, "wb") as handle:
            if output_format == "apery":
                records, apery = export_records(_book_moves(spans), diagnostics)
                handle.write(np.ascontiguousarray(records).view(np.uint8).data)
                moves = int(records.size)
                transpositions = int((graph.row < 0).sum())
                counts["apery"] = apery
            else:
                write_db2016_header(handle)
                for text, written, new in fork_map(_blocks_text, spans,
                                                   workers if len(spans) > 1 else 1):
                    handle.write(text)
                    moves += written
                    transpositions += new
                    fault_point("refine-minimax-file-writing")
    finally:
        _job.clear()
    write_seconds = time.perf_counter() - write_started

    counts.update(graph.counts())
    counts.update(result.counts)
    counts.update(positions_written=nodes, moves_written=moves,
                  transposition_moves=transpositions)
    seconds = MinimaxFileSeconds(read=round(read_seconds, 3), graph=round(graph.seconds, 3),
                                 propagate=round(result.seconds, 3),
                                 write=round(write_seconds, 3),
                                 total=round(time.perf_counter() - started, 3))
    return MinimaxFileSummary(str(source), str(out), output_format, settings, counts, seconds,
                              round(peak_memory_mb(), 1))

