"""YaneuraOu's policy book, "POLICY-DB2024" (``policy_book.db``).

Engines built with YaneuraOu's ``USE_POLICY_BOOK`` blend its move
frequencies into the network policy. Layout (read from YaneuraOu's
``policybook.cpp``, format 1.01): a header line ``#YANEURAOU-POLICY-DB2024
1.01``, then two lines per position: the sfen (``board turn hands ply``,
without ``sfen ``) and ``move freq move freq ... value P`` with P the win
probability for the side to move. The engine keeps the first three moves and
ignores non-promotions of pieces that could promote, so those are left out
here; frequencies are scaled so that their sum fits in 16 bits, as the
engine requires.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

import cshogi

from bookgen.store import BookMove
from bookgen.values import EVAL_COEF, cp_to_value

HEADER = "#YANEURAOU-POLICY-DB2024 1.01"
FREQ_TOTAL_MAX = 65534


def _needless_non_promotion(board: cshogi.Board, usi: str) -> bool:
    """A move that does not promote although the same move promoting is legal
    (the engine's policy never counts these)."""
    if usi.endswith("+") or usi[1] == "*":
        return False
    promoted = board.move_from_usi(usi + "+")
    return promoted != 0 and promoted in set(board.legal_moves)


def write_policy_book(out: TextIO, blocks: Iterable[tuple[str, int | None, list[BookMove]]],
                      coef: float = EVAL_COEF) -> tuple[int, int]:
    """Write positions with moves; returns (positions, moves) written."""
    out.write(HEADER + "\n")
    board = cshogi.Board()
    positions = moves_written = 0
    for sfen, ply, moves in blocks:
        board.set_sfen(f"{sfen} 1")
        kept = sorted((m for m in moves if m.count > 0
                       and not _needless_non_promotion(board, m.move)),
                      key=lambda m: (-m.count, m.move))
        if not kept:
            continue
        counts = [m.count for m in kept]
        while sum(counts) > FREQ_TOTAL_MAX:
            counts = [max(1, c // 2) for c in counts]
        fields = [f"{m.move} {c}" for m, c in zip(kept, counts)]
        values = [m.value for m in moves if m.value is not None]
        if values:
            fields.append(f"value {cp_to_value(max(values), coef):.4f}")
        out.write(f"{sfen} {ply or 1}\n{' '.join(fields)}\n")
        positions += 1
        moves_written += len(kept)
    return positions, moves_written
