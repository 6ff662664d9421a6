"""``bookgen suite``: balanced-position suites cut from a book.

dlshogi's ``make_gokaku_sfen`` rule: walk the book breadth-first from the
initial position; keep a position whose best value is within ``max_value``
of 0, unless following the best moves from it repeats a position within 36
plies (such lines are not real openings). A ply range restricts the suite to
openings or middle games, and ``per_line_cap`` limits how many positions may
share the same first ``cap_plies`` moves, so one opening family cannot
dominate. Output: ``startpos moves ...`` lines, readable by ``cshogi.cli``,
ShogiHome and the match runner.
"""

from __future__ import annotations

import os
import random
from collections import Counter, deque
from pathlib import Path
from typing import Any

import cshogi

from bookgen.errors import BookgenError
from bookgen.position import STARTPOS_SFEN, board_key
from bookgen.store import DEFAULT_BOOK, TRANSPOSITION_ROW_SQL, Book

REPETITION_PLIES = 36


def _load(store: Book, values: str) -> dict[str, list[tuple[int, str]]]:
    """sfen -> [(value, move)] of the book's own moves with a value."""
    column = "coalesce(m.minimax_value, m.value)" if values == "minimax" else "m.value"
    book: dict[str, list[tuple[int, str]]] = {}
    for sfen, move, value in store.conn.execute(
            f"SELECT p.sfen, m.move, {column} FROM moves m JOIN positions p "
            f"ON p.id = m.position_id WHERE NOT {TRANSPOSITION_ROW_SQL}"):
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
               min_ply: int = 1, max_ply: int = 1000, values: str = "raw",
               limit: int | None = None, per_line_cap: int | None = None, cap_plies: int = 4,
               seed: int = 0) -> dict[str, Any]:
    """Write balanced book positions as ``startpos moves ...`` lines; returns a summary.

    ``min_ply``/``max_ply`` count plies from the initial position (ply 1 is
    the initial position itself, as in sfen move numbers).
    """
    if values not in ("raw", "minimax"):
        raise BookgenError(f"--values must be raw or minimax, not {values!r}")
    if min_ply > max_ply:
        raise BookgenError(f"--min-ply {min_ply} is above --max-ply {max_ply}")
    with Book(book, create=False, readonly=True) as store:
        entries = _load(store, values)
    if STARTPOS_SFEN not in entries:
        raise BookgenError(f"{book}: the initial position has no book moves")
    kept: list[tuple[list[str], int]] = []
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
        if (min_ply <= ply <= max_ply and abs(best_value) <= max_value
                and not _repeats_along_best(board, entries)):
            kept.append((line, best_value))
        if ply >= max_ply:
            continue
        for _value, move in sorted(moves, key=lambda m: m[1]):
            board.push_usi(move)
            key = board_key(board)
            board.pop()
            if key not in seen:
                seen.add(key)
                queue.append(line + [move])
    if per_line_cap is not None:
        rng = random.Random(seed)
        rng.shuffle(kept)
        per_prefix: Counter[tuple[str, ...]] = Counter()
        capped = []
        for line, value in kept:
            prefix = tuple(line[:cap_plies])
            if per_prefix[prefix] < per_line_cap:
                per_prefix[prefix] += 1
                capped.append((line, value))
        kept = sorted(capped, key=lambda item: (len(item[0]), item[0]))
    if limit is not None and len(kept) > limit:
        kept = sorted(random.Random(seed).sample(kept, limit),
                      key=lambda item: (len(item[0]), item[0]))
    out = Path(out)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text("".join(
            ("startpos moves " + " ".join(line) if line else "startpos") + "\n"
            for line, _value in kept), encoding="utf-8")
        os.replace(temporary, out)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise BookgenError(f"{out}: cannot write ({error.strerror})") from None
    by_ply = Counter(len(line) + 1 for line, _value in kept)
    by_value = Counter(min(abs(value) // 25 * 25, 1000) for _line, value in kept)
    return {"file": str(out), "positions": len(kept),
            "by_ply": {str(k): v for k, v in sorted(by_ply.items())},
            "by_abs_value": {f"{k}-{k + 24}": v for k, v in sorted(by_value.items())}}
