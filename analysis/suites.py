"""``bookgen suite``: balanced-position suites cut from a book.

dlshogi's ``make_gokaku_sfen`` rule: walk the book breadth-first from the
initial position; keep a position whose best value is within ``max_value``
of 0, unless following the best moves from it repeats a position within 36
plies (such lines are not real openings). A ply range (or a list of plies)
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

import cshogi

from bookgen.errors import BookgenError
from bookgen.files import atomic_write
from bookgen.position import STARTPOS_SFEN, board_key
from bookgen.store import DEFAULT_BOOK, Book, MoveRows, ValueColumn, queries

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


def _load(store: Book, values: str) -> dict[str, list[tuple[int, str]]]:
    """sfen -> [(value, move)] of the book's own moves with a value."""
    book: dict[str, list[tuple[int, str]]] = {}
    for sfen, move, value in queries.sfen_move_values(store.conn, ValueColumn(values),
                                                      MoveRows.OWN):
        if value is not None:
            book.setdefault(sfen, []).append((value, move))
    return book


def _best(entries: list[tuple[int, str]]) -> tuple[int, str]:
    return max(entries, key=lambda entry: (entry[0], entry[1]))


def _repeats_along_best(board: cshogi.Board, book: dict[str, list[tuple[int, str]]]) -> bool:
    """Whether following best book moves from ``board`` repeats a position
    within REPETITION_PLIES plies."""
    seen = {board_key(board)}
    pushed = 0
    try:
        for _ in range(REPETITION_PLIES):
            entries = book.get(board_key(board))
            if not entries:
                return False
            board.push_usi(_best(entries)[1])
            pushed += 1
            key = board_key(board)
            if key in seen:
                return True
            seen.add(key)
        return False
    finally:
        for _ in range(pushed):
            board.pop()


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
        entries = _load(store, values)
    if STARTPOS_SFEN not in entries:
        raise BookgenError(f"{book}: the initial position has no book moves")
    kept: list[SuiteLine] = []
    reached = 0
    rejected = {"outside the plies": 0, f"|value| over {max_value}": 0, "best line repeats": 0}
    seen = {STARTPOS_SFEN}
    queue: deque[list[str]] = deque([[]])
    board = cshogi.Board()
    while queue:
        line = queue.popleft()
        board.reset()
        for move in line:
            board.push_usi(move)
        ply = len(line) + 1
        moves = entries.get(board_key(board))
        if not moves:
            continue
        best_value = _best(moves)[0]
        reached += 1
        if ply not in wanted:
            rejected["outside the plies"] += 1
        elif abs(best_value) > max_value:
            rejected[f"|value| over {max_value}"] += 1
        elif _repeats_along_best(board, entries):
            rejected["best line repeats"] += 1
        else:
            kept.append(SuiteLine(tuple(line), best_value))
        if ply >= last_ply:
            continue
        for _value, move in sorted(moves, key=lambda m: m[1]):
            board.push_usi(move)
            key = board_key(board)
            board.pop()
            if key not in seen:
                seen.add(key)
                queue.append(line + [move])
    if not kept:
        left_out = ", ".join(f"{count} {rule}" for rule, count in rejected.items() if count)
        raise BookgenError(f"no position qualified, {out} not written: {reached} book "
                           f"positions reached from the initial position"
                           + (f", left out: {left_out}" if left_out else ""))
    return write_suite(out, kept, limit=limit, per_line_cap=per_line_cap,
                       cap_plies=cap_plies, seed=seed)
