"""``bookgen suite``: balanced-position suites cut from a book.

dlshogi's ``make_gokaku_sfen`` rule: walk the book breadth-first from the
initial position; keep a position whose best value is within ``max_value_cp``
of 0, unless following the best moves from it repeats a position within 36
plies (such lines are not real openings). The walk follows the valued own
moves of the book's :class:`~bookgen.store.index.BookIndex` to their child
positions. A ply range (or a list of plies)
restricts the suite to openings or middle games, and ``per_line_cap`` limits
how many positions may share the same first ``cap_plies`` moves, so one
opening family cannot dominate. Output: ``startpos moves ...`` lines, readable
by ``cshogi.cli``, ShogiHome and the match runner.

Suites from game records (:mod:`bookgen.analysis.record_suites`) share the selection
(:class:`SuiteSelection`), writing and summary code here (:class:`SuiteLine`,
:func:`write_suite`, :class:`SuiteSummary`). :func:`make_suite` takes a
:class:`BookSuiteSettings`.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bookgen.arrays import NULL
from bookgen.errors import BookgenError, SettingsError, at_least
from bookgen.files import atomic_write
from bookgen.store import Book, MoveRows, ValueColumn
from bookgen.store.index import BookIndex, IndexSpec

__all__ = ["BookSuiteSettings", "SuiteLine", "SuiteSelection", "SuiteSummary", "make_suite",
           "parse_plies", "write_suite"]

REPETITION_PLIES = 36
VALUE_BUCKET = 50
# Signed value buckets beyond these bounds are merged into open-ended ones.
_VALUE_BUCKET_LOW, _VALUE_BUCKET_HIGH = -1000, 1000


@dataclass(frozen=True, slots=True)
class SuiteLine:
    """One suite position: the moves from its start, and its value.

    ``start`` is the sfen (with move number) the moves start from, or None
    for the initial position. ``value`` is from the side to move's point of
    view (None: not known).
    """

    moves: tuple[str, ...]
    value: int | None
    start: str | None = None

    @property
    def ply(self) -> int:
        """Plies counted from the start position, which is ply 1."""
        return len(self.moves) + 1

    def text(self) -> str:
        """``startpos moves ...`` or ``sfen SFEN moves ...`` (no ``moves`` if none)."""
        head = "startpos" if self.start is None else f"sfen {self.start}"
        return f"{head} moves {' '.join(self.moves)}" if self.moves else head

    def order(self) -> tuple[int, str, tuple[str, ...]]:
        return len(self.moves), self.start or "", self.moves


def parse_plies(text: str) -> tuple[int, ...]:
    """``"24,32,40"`` -> ``(24, 32, 40)`` (sorted, duplicates removed), for
    :attr:`SuiteSelection.plies`."""
    plies: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()) or int(item) < 1:
            raise SettingsError("selection.plies", f"{SettingsError.FIELD} {text!r}: {item!r} "
                                "is not a ply number (1 or more)")
        plies.add(int(item))
    return tuple(sorted(plies))


@dataclass(frozen=True)
class SuiteSelection:
    """Which positions a suite keeps, from the book or from records.

    Positions within ``max_value_cp`` of 0 at the plies ``min_ply`` to
    ``max_ply`` (ply 1 is the start position, as in sfen move numbers), or at
    exactly ``plies`` when given (sorted, duplicates removed). Then at most
    ``per_line_cap`` positions sharing their start and first ``cap_plies``
    moves (chosen at random with ``seed``), and at most ``limit`` positions
    (sampled with ``seed``).
    """

    max_value_cp: int = 100
    min_ply: int = 1
    max_ply: int = 1000
    plies: tuple[int, ...] | None = None
    per_line_cap: int | None = None
    cap_plies: int = 4
    limit: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.plies is not None:
            object.__setattr__(self, "plies", tuple(sorted(set(self.plies))))
            if not self.plies:
                raise SettingsError("selection.plies", "is empty")
            if self.plies[0] < 1:
                raise SettingsError("selection.plies",
                                    "are numbered from 1 (the start position)")
        else:
            at_least("selection.min_ply", self.min_ply, 1)
            if self.min_ply > self.max_ply:
                raise SettingsError("selection.min_ply", (
                    f"{SettingsError.FIELD} {self.min_ply} is above "
                    f"{SettingsError.mention('selection.max_ply')} {self.max_ply}"))
        at_least("selection.max_value_cp", self.max_value_cp, 0)
        at_least("selection.per_line_cap", self.per_line_cap, 1)
        at_least("selection.cap_plies", self.cap_plies, 1)
        at_least("selection.limit", self.limit, 1)

    def wanted_plies(self) -> tuple[Collection[int] | range, int]:
        """The selected plies (a set or a range) and the last of them."""
        if self.plies is not None:
            return frozenset(self.plies), self.plies[-1]
        return range(self.min_ply, self.max_ply + 1), self.max_ply


@dataclass(frozen=True)
class BookSuiteSettings:
    """What :func:`make_suite` keeps (``selection``) and which book values decide
    the balance (``values``: the book's own, or refine minimax's)."""

    selection: SuiteSelection = field(default_factory=SuiteSelection)
    values: ValueColumn = ValueColumn.RAW

    def __post_init__(self) -> None:
        if self.values not in tuple(str(column) for column in ValueColumn):
            raise SettingsError("values", f"must be raw or minimax, not {self.values!r}")
        object.__setattr__(self, "values", ValueColumn(self.values))


@dataclass(frozen=True)
class SuiteSummary:
    """What a suite holds: its ``file``, its number of ``positions``, and their
    counts ``by_ply``, by |value| (25 cp buckets, ``by_abs_value``) and by signed
    value (:func:`value_bucket`, ``by_value``); values from the side to move's
    point of view. Keys are the labels of the JSON output, in order."""

    file: str
    positions: int
    by_ply: dict[str, int]
    by_abs_value: dict[str, int]
    by_value: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output, in the order of the fields."""
        return {"file": self.file, "positions": self.positions, "by_ply": dict(self.by_ply),
                "by_abs_value": dict(self.by_abs_value), "by_value": dict(self.by_value)}


def value_bucket(value: int | None) -> tuple[int, str]:
    """Sort key and label of the signed ``VALUE_BUCKET``-wide bucket of ``value``:
    ``-100..-51``, ``-50..-1``, ``0..49``, ...; ``none`` for no value."""
    if value is None:
        return _VALUE_BUCKET_HIGH + VALUE_BUCKET, "none"
    low = value // VALUE_BUCKET * VALUE_BUCKET
    if low >= _VALUE_BUCKET_HIGH:
        return _VALUE_BUCKET_HIGH, f"{_VALUE_BUCKET_HIGH}.."
    if low < _VALUE_BUCKET_LOW:
        return _VALUE_BUCKET_LOW - VALUE_BUCKET, f"..{_VALUE_BUCKET_LOW - 1}"
    return low, f"{low}..{low + VALUE_BUCKET - 1}"


def _abs_value_bucket(value: int | None) -> tuple[int, str]:
    if value is None:
        return 10_000, "none"
    low = min(abs(value) // 25 * 25, 1000)
    return low, f"{low}-{low + 24}"


def summarize(out: Path, kept: Iterable[SuiteLine]) -> SuiteSummary:
    """The summary both suite kinds share: counts by ply and by value bucket."""
    kept = list(kept)
    by_ply = Counter(line.ply for line in kept)

    def buckets(key: Any) -> dict[str, int]:
        counts = Counter(key(line.value) for line in kept)
        return {label: n for (_low, label), n in sorted(counts.items())}

    return SuiteSummary(file=str(out), positions=len(kept),
                        by_ply={str(k): v for k, v in sorted(by_ply.items())},
                        by_abs_value=buckets(_abs_value_bucket),
                        by_value=buckets(value_bucket))


def write_suite(out: str | Path, kept: list[SuiteLine], selection: SuiteSelection
                ) -> SuiteSummary:
    """Apply the selection's per-family cap and limit, write the lines atomically
    (temporary file + rename), and return the summary.

    ``per_line_cap`` keeps at most that many positions sharing their start and
    first ``cap_plies`` moves (chosen at random with ``seed``); ``limit`` then
    samples at most that many. Lines are written by ply, then text order.
    """
    per_line_cap, cap_plies = selection.per_line_cap, selection.cap_plies
    limit, seed = selection.limit, selection.seed
    if per_line_cap is not None:
        rng = random.Random(seed)
        kept = list(kept)
        rng.shuffle(kept)
        per_prefix: Counter[tuple[str | None, tuple[str, ...]]] = Counter()
        capped = []
        for line in kept:
            prefix = (line.start, line.moves[:cap_plies])
            if per_prefix[prefix] < per_line_cap:
                per_prefix[prefix] += 1
                capped.append(line)
        kept = sorted(capped, key=SuiteLine.order)
    if limit is not None and len(kept) > limit:
        kept = random.Random(seed).sample(kept, limit)
    kept = sorted(kept, key=SuiteLine.order)
    out = Path(out)
    atomic_write(out, "".join(line.text() + "\n" for line in kept).encode("utf-8"))
    return summarize(out, kept)


def _best_edges(index: BookIndex) -> np.ndarray:
    """Each row's best valued move (an edge; -1 for none): the highest value, then the
    last move by name."""
    value = index.value_column()
    edges = np.flatnonzero(value != NULL)
    source = index.edge_rows()[edges]
    edges = edges[np.lexsort((index.edge_move[edges], value[edges], source))]
    source = index.edge_rows()[edges]
    last = np.ones(len(edges), dtype=bool)
    last[:-1] = source[1:] != source[:-1]
    best = np.full(len(index.ids), -1, dtype=np.int64)
    best[source[last]] = edges[last]
    return best


def _repeats_along_best(row: int, best: np.ndarray, child: np.ndarray) -> bool:
    """Whether following best book moves from ``row`` repeats a position
    within REPETITION_PLIES plies."""
    seen = {row}
    for _ in range(REPETITION_PLIES):
        edge = best[row]
        if edge < 0:
            return False
        row = int(child[edge])
        if row < 0:  # out of the book: the line ends
            return False
        if row in seen:
            return True
        seen.add(row)
    return False


def make_suite(book: str | Path, out: str | Path, settings: BookSuiteSettings | None = None
               ) -> SuiteSummary:
    """Write the balanced positions of ``book`` to ``out`` as ``startpos moves ...``
    lines (see the module docstring and :class:`BookSuiteSettings`; None: the
    defaults); returns the summary."""
    settings = settings if settings is not None else BookSuiteSettings()
    selection = settings.selection
    max_value = selection.max_value_cp
    wanted, last_ply = selection.wanted_plies()
    with Book(book, create=False, readonly=True) as store:
        # The book's own moves (also with minimax values), children by their links.
        index = BookIndex.load(store, IndexSpec(positions=frozenset(), rows=MoveRows.OWN,
                                                values=(settings.values,),
                                                edges=frozenset()))
    best = _best_edges(index)
    if index.start < 0 or best[index.start] < 0:
        raise BookgenError(f"{book}: the initial position has no book moves")
    value, child = index.value_column(), index.edge_child
    kept: list[SuiteLine] = []
    reached = 0
    rejected = {"outside the plies": 0, f"|value| over {max_value}": 0, "best line repeats": 0}
    # Breadth first from the initial position along the valued book moves (by
    # move name); each position once, at its first (shortest) line.
    seen = np.zeros(len(index.ids), dtype=bool)
    seen[index.start] = True
    queue: deque[tuple[int, tuple[str, ...]]] = deque([(index.start, ())])
    while queue:
        row, line = queue.popleft()
        if best[row] < 0:
            continue
        ply = len(line) + 1
        best_value = int(value[best[row]])
        reached += 1
        if ply not in wanted:
            rejected["outside the plies"] += 1
        elif abs(best_value) > max_value:
            rejected[f"|value| over {max_value}"] += 1
        elif _repeats_along_best(row, best, child):
            rejected["best line repeats"] += 1
        else:
            kept.append(SuiteLine(line, best_value))
        if ply >= last_ply:
            continue
        for edge in range(int(index.indptr[row]), int(index.indptr[row + 1])):
            to = int(child[edge])
            if value[edge] != NULL and to >= 0 and not seen[to]:
                seen[to] = True
                queue.append((to, line + (index.move_names[index.edge_move[edge]],)))
    if not kept:
        left_out = ", ".join(f"{count} {rule}" for rule, count in rejected.items() if count)
        raise BookgenError(f"no position qualified, {out} not written: {reached} book "
                           f"positions reached from the initial position"
                           + (f", left out: {left_out}" if left_out else ""))
    return write_suite(out, kept, selection)
