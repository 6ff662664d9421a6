"""``bookgen suite``: balanced-position suites cut from a book.

dlshogi's ``make_gokaku_sfen`` rule: walk the book breadth-first from the
initial position; keep a position whose best value is within ``max_value``
of 0, unless following the best moves from it repeats a position within 36
plies (such lines are not real openings). The walk follows the valued own
moves of the book's :class:`~bookgen.store.index.BookIndex` to their child
positions. A ply range (or a list of plies)
restricts the suite to openings or middle games, and ``per_line_cap`` limits
how many positions may share the same first ``cap_plies`` moves, so one
opening family cannot dominate. Output: ``startpos moves ...`` lines, readable
by ``cshogi.cli``, ShogiHome and the match runner.

Suites from game records (:mod:`bookgen.analysis.record_suites`) share the selection,
writing and summary code here (:class:`SuiteLine`, :func:`write_suite`).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bookgen.arrays import NULL
from bookgen.errors import BookgenError
from bookgen.files import atomic_write
from bookgen.store import DEFAULT_BOOK, Book, MoveRows, ValueColumn
from bookgen.store.index import BookIndex, IndexSpec

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


def parse_plies(text: str) -> list[int]:
    """``"24,32,40"`` -> ``[24, 32, 40]`` (sorted, duplicates removed)."""
    plies: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()) or int(item) < 1:
            raise BookgenError(f"--plies {text!r}: {item!r} is not a ply number (1 or more)")
        plies.add(int(item))
    return sorted(plies)


def ply_filter(min_ply: int, max_ply: int, plies: Collection[int] | None
               ) -> tuple[Collection[int] | range, int]:
    """The selected plies (a set or a range) and the last of them."""
    if plies is not None:
        if not plies:
            raise BookgenError("--plies is empty")
        if min(plies) < 1:
            raise BookgenError("plies are numbered from 1 (the start position)")
        return frozenset(plies), max(plies)
    if min_ply > max_ply:
        raise BookgenError(f"--min-ply {min_ply} is above --max-ply {max_ply}")
    return range(min_ply, max_ply + 1), max_ply


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


def summarize(out: Path, kept: Iterable[SuiteLine]) -> dict[str, Any]:
    """The summary both suite kinds share: counts by ply and by value bucket."""
    kept = list(kept)
    by_ply = Counter(line.ply for line in kept)

    def buckets(key: Any) -> dict[str, int]:
        counts = Counter(key(line.value) for line in kept)
        return {label: n for (_low, label), n in sorted(counts.items())}

    return {"file": str(out), "positions": len(kept),
            "by_ply": {str(k): v for k, v in sorted(by_ply.items())},
            "by_abs_value": buckets(_abs_value_bucket),
            "by_value": buckets(value_bucket)}


def write_suite(out: str | Path, kept: list[SuiteLine], *, limit: int | None = None,
                per_line_cap: int | None = None, cap_plies: int = 4,
                seed: int = 0) -> dict[str, Any]:
    """Apply the per-family cap and the limit, write the lines atomically
    (temporary file + rename), and return the summary.

    ``per_line_cap`` keeps at most that many positions sharing their start and
    first ``cap_plies`` moves (chosen at random with ``seed``); ``limit`` then
    samples at most that many. Lines are written by ply, then text order.
    """
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


def make_suite(out: str | Path, book: str | Path = DEFAULT_BOOK, *, max_value: int = 100,
               min_ply: int = 1, max_ply: int = 1000, plies: Collection[int] | None = None,
               values: str = "raw", limit: int | None = None,
               per_line_cap: int | None = None, cap_plies: int = 4,
               seed: int = 0) -> dict[str, Any]:
    """Write balanced book positions as ``startpos moves ...`` lines; returns a summary.

    ``min_ply``/``max_ply`` count plies from the initial position (ply 1 is
    the initial position itself, as in sfen move numbers); ``plies``, when
    given, selects exactly those plies instead.
    """
    if values not in ("raw", "minimax"):
        raise BookgenError(f"--values must be raw or minimax, not {values!r}")
    wanted, last_ply = ply_filter(min_ply, max_ply, plies)
    with Book(book, create=False, readonly=True) as store:
        # The book's own moves (also with minimax values), children by their links.
        index = BookIndex.load(store, IndexSpec(positions=frozenset(), rows=MoveRows.OWN,
                                                values=(ValueColumn(values),),
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
    return write_suite(out, kept, limit=limit, per_line_cap=per_line_cap,
                       cap_plies=cap_plies, seed=seed)
