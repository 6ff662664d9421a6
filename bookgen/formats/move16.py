"""cshogi's ``move16``, the move encoding of hcpe and Apery records.

``to | from << 7 | promote << 14``: squares in cshogi's numbering (0 = 1a,
1 = 1b, ..., 80 = 9i); a drop's ``from`` is 81 + the piece kind - 1, in
cshogi's order P L N S B R G. Bit 15 is unused.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

_DROP_LETTERS = "PLNSBRG"
_RANKS = "abcdefghi"


def move16_to_usi(move16: int) -> str | None:
    """The USI text of a ``move16``, or None if it is no move's encoding."""
    to, origin, promote = move16 & 0x7F, move16 >> 7 & 0x7F, move16 >> 14
    if to >= 81 or promote > 1 or origin >= 81 + len(_DROP_LETTERS) or origin == to:
        return None
    target = f"{to // 9 + 1}{_RANKS[to % 9]}"
    if origin >= 81:
        return None if promote else f"{_DROP_LETTERS[origin - 81]}*{target}"
    return f"{origin // 9 + 1}{_RANKS[origin % 9]}{target}{'+' if promote else ''}"


def is_move16(move16: np.ndarray) -> np.ndarray:
    """Which of ``move16`` (any integer array, read as 16 bits) encode a move,
    whatever the position (:func:`move16_to_usi` is not None)."""
    move16 = move16.astype(np.int64) & 0xFFFF
    to, origin, promote = move16 & 0x7F, move16 >> 7 & 0x7F, move16 >> 14
    return ((to < 81) & (promote <= 1) & (origin < 81 + len(_DROP_LETTERS)) & (origin != to)
            & ~((origin >= 81) & (promote == 1)))


@cache
def _usi_to_move16() -> dict[str, int]:
    return {usi: move16 for move16 in range(1 << 15)
            if (usi := move16_to_usi(move16)) is not None}


def usi_to_move16(texts: Sequence[str]) -> np.ndarray:
    """uint16 ``move16`` of each USI text (0 for a text that is no move's)."""
    table = _usi_to_move16()
    return np.array([table.get(text, 0) for text in texts], dtype=np.uint16)
