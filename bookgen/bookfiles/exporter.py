"""``bookgen export``: write a book as a DB2016, Apery, policy or hcpe file.

:func:`export_book` takes the book, the output file and an
:class:`ExportSettings` and returns an :class:`ExportSummary`. Values
:attr:`~bookgen.store.ValueColumn.RAW` (the default) writes the book's own values and depths, and
leaves out the transposition moves that ``refine minimax`` added, so that it
writes exactly what it wrote before a refine. :attr:`~bookgen.store.ValueColumn.MINIMAX` writes the
values and depths ``refine minimax`` stored, transposition moves included,
with peta_shock's rule for ties: a move that is not the best but has the
best value with a different depth is written one lower, so that an engine
choosing by value plays the intended move.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError, SettingsError
from bookgen.files import atomic_output
from bookgen.formats.apery import export_records
from bookgen.formats.db2016 import usi_names, write_db2016
from bookgen.formats.policy import write_policy_book
from bookgen.formats.training import training_arrays
from bookgen.progress import progress_bar
from bookgen.signals import fault_point
from bookgen.store import (
    REFINE_MINIMAX_COMMAND,
    Book,
    BookMove,
    MoveRows,
    ValueColumn,
    queries,
)
from bookgen.store.runs import last_params
from bookgen.values import DrawValues  # refine's draw values, converted as refine does

EXPORT_FORMATS = ("db2016", "apery", "policy", "hcpe")
EXPORT_VALUES = tuple(str(column) for column in ValueColumn)


@dataclass(frozen=True)
class ExportSettings:
    """What :func:`export_book` writes: the ``format`` (:data:`EXPORT_FORMATS`), the
    ``values`` (the book's own, or refine minimax's), DB2016's ``# NOE:`` line
    (``db2016_noe``) and the temperature T of hcpe's policy targets
    (``softmax((s_i - s_max) * (1000 / T) / 754.3)``, ``hcpe_policy_temperature``)."""

    format: str = "db2016"
    values: ValueColumn = ValueColumn.RAW
    db2016_noe: bool = False
    hcpe_policy_temperature: float = 100.0

    def __post_init__(self) -> None:
        if self.format not in EXPORT_FORMATS:
            raise BookgenError(f"unknown export format {self.format!r} (choose from "
                               f"{', '.join(EXPORT_FORMATS)})")
        if self.values not in EXPORT_VALUES:
            raise BookgenError(f"unknown values {self.values!r} (choose from "
                               f"{', '.join(EXPORT_VALUES)})")
        object.__setattr__(self, "values", ValueColumn(self.values))
        if not self.hcpe_policy_temperature > 0:
            raise SettingsError("hcpe_policy_temperature", "must be more than 0")


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_book` wrote: ``positions`` to ``file``; ``moves`` (DB2016,
    policy and hcpe, whose ``policy_file`` holds the policy targets); ``records``,
    ``counts_scaled`` (positions whose counts were scaled into 16 bits),
    ``scores_clamped`` and ``key_collisions`` (Apery)."""

    file: str
    format: str
    values: str
    positions: int
    moves: int | None = None
    policy_file: str | None = None
    records: int | None = None
    counts_scaled: int | None = None
    scores_clamped: int | None = None
    key_collisions: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output: the counts of the format, then file, format and values."""
        counts: tuple[str, ...] = ("positions", "moves", "policy_file")
        if self.format == "apery":
            counts = ("positions", "records", "counts_scaled", "scores_clamped",
                      "key_collisions")
        result = {name: getattr(self, name) for name in counts
                  if getattr(self, name) is not None}
        result.update(file=self.file, format=self.format, values=self.values)
        return result

Block = tuple[str, "int | None", list[BookMove]]


def _value(m: BookMove) -> int:
    """The value of a move of refine minimax's book (every one has a value)."""
    assert m.value is not None
    return m.value


@cache
def usi_rank() -> np.ndarray:
    """int32 [65536]: the place of each ``move16``'s USI text among all of them in
    byte order (the order :func:`minimax_moves` breaks ties by)."""
    names = usi_names()
    moves = [m for m in range(1 << 16) if names[m] is not None]
    rank = np.zeros(1 << 16, dtype=np.int32)
    rank[sorted(moves, key=names.__getitem__)] = np.arange(len(moves), dtype=np.int32)
    return rank


def minimax_moves(draw: int, moves: list[BookMove]) -> list[BookMove]:
    """Moves with minimax values for writing, best first; ``draw`` is the mover's draw
    value in cp. Best: highest value, then (refine's rule) the shorter line when the
    value is at least the draw value, else the longer one (None depth: a line ending in
    repetition, infinitely long), then the most counted. The others follow by written
    value and count; a move with the best value but another depth is written one lower."""
    def preference(m: BookMove) -> tuple[int, float, int]:
        depth = float("inf") if m.depth is None else float(m.depth)
        assert m.value is not None
        return (m.value, -depth if m.value >= draw else depth, m.count)

    ordered = sorted(moves, key=lambda m: m.move)
    chosen = max(ordered, key=preference)
    rest = [m._replace(value=_value(m) - 1)
            if m.value == chosen.value and m.depth != chosen.depth else m
            for m in ordered if m is not chosen]
    rest.sort(key=lambda m: (-_value(m), -m.count, m.move))
    return [chosen, *rest]


def _segment(ufunc: np.ufunc, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``ufunc.reduceat`` over non-empty segments starting at ``starts``."""
    return ufunc.reduceat(values, starts) if len(values) else values[:0]


def minimax_order(indptr: np.ndarray, move16: np.ndarray, value: np.ndarray,
                  depth: np.ndarray, count: np.ndarray, draw: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`minimax_moves` for many positions at once: the moves of position ``i`` are
    ``indptr[i]:indptr[i + 1]`` of ``move16`` (cshogi's), ``value``, ``depth`` (-1 for
    None: a line ending in repetition) and ``count``; ``draw[i]`` is its mover's draw
    value in cp. Returns (the moves in writing order, as indices; the value each is
    written with)."""
    sizes = np.diff(indptr)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    starts = indptr[:-1][sizes > 0]
    group = (np.cumsum(sizes > 0) - 1)[owner]      # the non-empty segment of each move
    rank = usi_rank()[move16.astype(np.int64) & 0xFFFF].astype(np.int64)
    value = value.astype(np.int64)
    depth = depth.astype(np.int64)
    count = count.astype(np.int64)
    endless = depth < 0
    line = np.where(endless, np.iinfo(np.int64).max, depth)     # None: infinitely long
    line = np.where(value >= draw[owner], -line, line)
    # The best: highest value, then line, then count, then the first move in text order.
    best = value == _segment(np.maximum, value, starts)[group]
    low = np.iinfo(np.int64).min
    best &= line == _segment(np.maximum, np.where(best, line, low), starts)[group]
    best &= count == _segment(np.maximum, np.where(best, count, low), starts)[group]
    high = np.iinfo(np.int64).max
    chosen = best & (rank == _segment(np.minimum, np.where(best, rank, high), starts)[group])
    best_value = value[chosen][group]
    best_depth = depth[chosen][group]
    tie = ~chosen & (value == best_value) & (depth != best_depth)
    written = np.where(tie, value - 1, value)
    return _writing_order(owner, chosen, written, count, rank), written


def _writing_order(owner: np.ndarray, chosen: np.ndarray, written: np.ndarray,
                   count: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Indices by owner, the chosen move first, then by written value (high first),
    count (high first) and move text. One sort on a key that leaves the counts out,
    then the positions where two moves of a written value have different counts
    sorted again with them."""
    if not len(owner):
        return np.zeros(0, dtype=np.int64)
    later = (~chosen).astype(np.int64)
    lowered = written.max() - written       # high first
    order = _packed_order([owner, later, lowered, rank])
    if order is None:
        return np.lexsort((rank, -count, -written, later, owner))
    head = (owner << 1 | later)[order]
    same = (head[1:] == head[:-1]) & (lowered[order[1:]] == lowered[order[:-1]])
    clash = same & (count[order[1:]] != count[order[:-1]])
    if clash.any():
        marked = np.zeros(int(owner[-1]) + 1, dtype=bool)
        marked[owner[order[1:][clash]]] = True
        again = marked[owner[order]]
        moves = order[again]
        group = np.cumsum(np.diff(owner[moves], prepend=owner[moves[0]]) != 0)
        fewer = count[moves].max() - count[moves]
        sub = _packed_order([group, later[moves], lowered[moves], fewer, rank[moves]])
        if sub is None:
            sub = np.lexsort((rank[moves], -count[moves], -written[moves], later[moves],
                              owner[moves]))
        order[again] = moves[sub]
    return order


def _packed_order(keys: list[np.ndarray]) -> np.ndarray | None:
    """The stable order of rows by non-negative ``keys`` (the first decides first),
    through one int64 packing them; None if they do not fit in 63 bits."""
    widths = [max(int(key.max()).bit_length(), 1) for key in keys]
    if sum(widths) > 63:
        return None
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for key, width in zip(keys, widths):
        packed = packed << width | key
    return np.argsort(packed, kind="stable")


def _minimax_blocks(store: Book) -> Iterator[Block]:
    params = last_params(store, REFINE_MINIMAX_COMMAND)
    values = DrawValues(int(params.get("draw_value_black", 500)),
                        int(params.get("draw_value_white", 500)))
    draws = (values.cp(0), values.cp(1))  # by the side to move: black 0, white 1
    cursor = queries.minimax_rows(store.conn)
    current: str | None = None
    ply: int | None = None
    turn = 0
    block: list[BookMove] = []
    for sfen, row_ply, row_turn, move, ponder, value, depth, count in cursor:
        if sfen != current:
            if current is not None:
                yield current, ply, minimax_moves(draws[turn], block)
            current, ply, turn, block = sfen, row_ply, row_turn, []
        block.append(BookMove(move, ponder, value, depth, count))
    if current is not None:
        yield current, ply, minimax_moves(draws[turn], block)


def _write_array(path: Path, array: np.ndarray) -> None:
    """Write an array's bytes (through Python's file object, whose errors carry
    an errno, unlike ``ndarray.tofile``'s)."""
    with open(path, "wb") as handle:
        handle.write(np.ascontiguousarray(array).view(np.uint8).data)


def _check_refined(store: Book) -> None:
    missing = queries.unrefined_move_count(store.conn)
    if missing:
        raise BookgenError(
            f"{store.path}: {missing} moves have no minimax value (never refined, or grown "
            "since); run 'bookgen refine minimax' first")


def export_book(book: str | Path, out: str | Path, settings: ExportSettings | None = None, *,
                diagnostics: Diagnostics | None = None, progress: bool = True) -> ExportSummary:
    """Write every position that has moves to ``out``; returns what was written.

    The file is written beside ``out`` and renamed into place, so an
    interrupted export never leaves a truncated book under the final name.
    """
    settings = settings if settings is not None else ExportSettings()
    fmt, values = settings.format, settings.values
    out = Path(out)
    with Book(book, create=False, readonly=True) as store:
        if values == ValueColumn.MINIMAX:
            _check_refined(store)
        total = queries.positions_with_moves(store.conn, MoveRows.ALL)
        with atomic_output(out) as temporary, progress_bar(
                total=total, unit="pos", desc=f"writing {out.name}",
                disable=None if progress else True) as bar:
            source = store.iter_blocks() if values == ValueColumn.RAW else _minimax_blocks(store)

            def blocks() -> Iterator[Block]:
                for block in source:
                    bar.update()
                    yield block
                    fault_point("export-writing")

            if fmt == "db2016":
                with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
                    positions, moves = write_db2016(handle, blocks(),
                                                    noe=total if settings.db2016_noe else None)
                counts: dict[str, Any] = {"positions": positions, "moves": moves}
            elif fmt == "hcpe":
                hcpe, policy = training_arrays(blocks(), settings.hcpe_policy_temperature)
                _write_array(temporary, hcpe)
                policy_out = out.with_name(out.name + ".policy.npy")
                with atomic_output(policy_out) as policy_temporary, \
                        open(policy_temporary, "wb") as policy_handle:
                    np.save(policy_handle, policy)
                counts = {"positions": len(hcpe), "moves": len(policy),
                          "policy_file": str(policy_out)}
            elif fmt == "policy":
                with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
                    positions, moves = write_policy_book(handle, blocks())
                counts = {"positions": positions, "moves": moves}
            else:
                records, counts = export_records(blocks(), diagnostics)
                _write_array(temporary, records)
    return ExportSummary(file=str(out), format=fmt, values=str(values), **counts)
