"""``bookgen refine minimax``: minimax values over the whole book graph, stored in the book.

:func:`refine_minimax` reads the book graph in one snapshot
(:mod:`bookgen.refine.minimax_graph`), solves it with one of two methods
(:data:`METHODS`: the exact :func:`bookgen.refine.retrograde.retrograde`, or
dlshogi's :func:`bookgen.refine.negascout.negascout`; the rules for
repetitions, perpetual checks, draw values and depths are in
:mod:`bookgen.refine.retrograde`) and writes the values in one transaction.

Per-move minimax values go to ``moves.minimax_value/minimax_depth``, per-position
values to ``positions.minimax_value/minimax_depth``; the book's ``value`` and
``eval_value`` are never changed. Transposition edges the book does not store
are inserted as ``moves`` rows (count 0, value/depth NULL, child_id set) so
that ``export --values minimax`` can offer them; ``--values raw`` leaves them
out.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bookgen.arrays import NULL
from bookgen.errors import BookgenError, SettingsError
from bookgen.refine.minimax_graph import MinimaxGraph, build_graph
from bookgen.refine.negascout import negascout
from bookgen.refine.retrograde import DEPTH_INF, Propagation, analyse, retrograde
from bookgen.signals import fault_point
from bookgen.store import DEFAULT_BOOK, REFINE_MINIMAX_COMMAND, Book, queries, stored_links, writes
from bookgen.values import DrawValues

__all__ = ["METHODS", "MinimaxSeconds", "MinimaxSettings", "MinimaxSummary", "peak_memory_mb",
           "refine_minimax", "solve", "write_results"]

METHODS = ("retrograde", "negascout")


def _move_names(moves: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct USI moves of an S5 column, sorted, and each row's index into them."""
    padded = np.zeros((len(moves), 8), dtype=np.uint8)
    padded[:, :moves.dtype.itemsize] = np.ascontiguousarray(moves).view(np.uint8).reshape(
        len(moves), moves.dtype.itemsize)
    codes, index = np.unique(padded.view(">u8").ravel(), return_inverse=True)
    names = [name.decode("ascii") for name in codes.astype(">u8").view("S8").tolist()]
    return names, index


def write_results(store: Book, graph: MinimaxGraph, result: Propagation, run_id: int
                  ) -> dict[str, int]:
    """Store the minimax values in the caller's transaction; returns row counts."""
    position_ids = graph.position_ids
    edge = graph.target >= 0
    link = edge & ~graph.child_linked
    stored = graph.stored
    # A stored row gets its child as a link when it has none; a new row always has one.
    child = np.where(link | ~stored, position_ids[np.where(edge, graph.target, 0)], NULL)
    names, move = _move_names(graph.move)
    # Only rows whose values (or link) change are written, and counted as updated.
    updated = writes.write_minimax(
        store.conn, graph.stale_transpositions,
        writes.MinimaxMoves(position_ids[graph.source], move, names, result.option_value,
                            _depths(result.option_depth), child, stored),
        writes.MinimaxPositions(position_ids, result.node_value, _depths(result.node_depth)),
        run_id)
    new = int((~stored).sum())
    return {"transposition_rows_added": new, "moves_updated": updated,
            "transposition_rows_removed": len(graph.stale_transpositions),
            "child_links_added": int((link & stored).sum())}


def _depths(depths: np.ndarray) -> np.ndarray:
    """Depths as stored: NULL for a line that ends in a repetition."""
    return np.where(depths >= DEPTH_INF, NULL, depths.astype(np.int64))


@dataclass(frozen=True)
class MinimaxSettings:
    """How ``refine minimax`` solves the book graph: ``method`` (:data:`METHODS`),
    the draw values of repetitions (per mille of a win), the processes that
    scan for transpositions (``scan_workers``; None: up to 2) and whether to scan
    even when the book's stored links are complete (``rescan_links``; the result
    is the same)."""

    method: str = "retrograde"
    draws: DrawValues = field(default_factory=DrawValues)
    scan_workers: int | None = None
    rescan_links: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise BookgenError(f"unknown method {self.method!r} "
                               f"(choose from {', '.join(METHODS)})")
        if self.scan_workers is not None and self.scan_workers < 1:
            raise SettingsError("scan_workers", "must be at least 1")

    def params(self) -> dict[str, Any]:
        """The run's ``runs.params`` (draw values per mille, as always)."""
        return {"draw_value_black": self.draws.black, "draw_value_white": self.draws.white,
                "method": self.method}


@dataclass(frozen=True)
class MinimaxSeconds:
    """Where the time of a run went."""

    graph: float
    propagate: float
    write: float
    total: float


@dataclass(frozen=True)
class MinimaxSummary:
    """What a run did. ``counts`` holds, in this order, the graph's counts
    (``positions``, ``options``, ``edges``, ``book_edges``, ``transposition_edges``,
    ``leaf_moves``), the method's (retrograde: ``value_levels``, ...; negascout:
    ``negascout_searches``, ...; both: ``cycle_components``,
    ``positions_in_cycles``, ``checking_components``, ``passes``, ``games``...)
    and the rows written (``transposition_rows_added``, ``moves_updated``,
    ``transposition_rows_removed``, ``child_links_added``), as ``runs.counts``
    stores them."""

    book: str
    run_id: int
    settings: MinimaxSettings
    counts: Mapping[str, int]
    seconds: MinimaxSeconds
    peak_memory_mb: float

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output: book, run, method, draw values, counts, seconds, memory."""
        return {"book": self.book, "run_id": self.run_id, "method": self.settings.method,
                **self.settings.params(), **self.counts, "seconds": asdict(self.seconds),
                "peak_memory_mb": self.peak_memory_mb}


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def solve(graph: MinimaxGraph, settings: MinimaxSettings) -> Propagation:
    """The values of ``graph`` by ``settings.method`` with ``settings.draws``; its
    ``seconds`` are the propagation's."""
    started = time.perf_counter()
    structure = analyse(graph)
    if settings.method == "retrograde":
        result = retrograde(graph, settings.draws, structure)
    else:
        result = negascout(graph, settings.draws, structure)
    result.seconds = time.perf_counter() - started
    return result


def refine_minimax(book: str | Path = DEFAULT_BOOK, settings: MinimaxSettings | None = None, *,
                   wait: bool = False) -> MinimaxSummary:
    """Minimax over the whole book; stores per-position and per-move values and
    returns a summary. See ``bookgen refine minimax --help`` and the module docstring.

    The graph is read in one snapshot; if another process commits to the book
    before the results are written, nothing is written and BookgenError says so.
    ``wait``: when another process writes the book, wait for it instead of
    raising :class:`bookgen.store.lock.BookLocked`.
    """
    settings = settings if settings is not None else MinimaxSettings()
    started = time.perf_counter()
    with Book(book, create=False, wait=wait) as store:
        queries.begin(store.conn)      # one read snapshot for the whole graph
        try:
            version = queries.data_version(store.conn)
            graph = build_graph(store, settings.scan_workers, rescan=settings.rescan_links)
        finally:
            queries.commit(store.conn)
        result = solve(graph, settings)
        fault_point("refine-minimax-propagated")
        write_started = time.perf_counter()
        # The links written are positions of the snapshot read, which nothing changed
        # since (data_version); checking their foreign keys row by row costs SQLite
        # more than writing them.
        writes.foreign_keys_off(store.conn)
        with store.transaction():
            if queries.data_version(store.conn) != version:
                raise BookgenError(f"{book}: changed by another process during the refine; "
                                   "nothing written, run it again")
            run_id = store.begin_run(REFINE_MINIMAX_COMMAND, settings.params())
            written = write_results(store, graph, result, run_id)
            # Every legal edge between nodes is now a linked row.
            stored_links.mark_links_complete(store.conn)
            counts: dict[str, Any] = {**graph.counts(), **result.counts, **written}
            counts["seconds"] = {"graph": round(graph.seconds, 3),
                                 "propagate": round(result.seconds, 3),
                                 "write": round(time.perf_counter() - write_started, 3),
                                 "total": round(time.perf_counter() - started, 3)}
            store.end_run(run_id, moves_added=written["transposition_rows_added"],
                          moves_updated=written["moves_updated"], counts=counts)
    # The commit is part of writing.
    seconds = counts.pop("seconds")
    seconds["write"] = round(time.perf_counter() - write_started, 3)
    seconds["total"] = round(time.perf_counter() - started, 3)
    return MinimaxSummary(str(book), run_id, settings, counts, MinimaxSeconds(**seconds),
                          round(peak_memory_mb(), 1))
