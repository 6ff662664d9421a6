"""The book as training targets: an hcpe file plus per-move policy targets.

``OUT.hcpe`` holds one ``cshogi.HuffmanCodedPosAndEval`` record per position
with moves: the position, ``eval`` = the book's value of the position (cp for
the side to move, clipped to int16; minimax values with ``--values minimax``),
``bestMove16`` = the best move, ``gameResult`` = 0 (no game was played: use
``eval`` as the value target).

``OUT.hcpe.policy.npy`` is a numpy structured array (``numpy.load``) with one
row per book move: ``record`` (uint32, index into the hcpe file),
``move16`` (uint16, cshogi move16), ``probability`` (float32) and ``count``
(uint16), where, as in dlshogi's book-to-policy conversion,
``probability = softmax((s_i - s_max) * beta / 754.3)`` over the position's
moves with ``beta = 1000 / temperature`` and ``count = floor(65535 * probability)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import cshogi
import numpy as np

from bookgen.store import BookMove

POLICY_DTYPE = np.dtype([("record", "<u4"), ("move16", "<u2"), ("probability", "<f4"),
                         ("count", "<u2")])
BOOK_POLICY_COEF = 754.3


def policy_targets(values: list[int], temperature: float = 100.0) -> list[float]:
    """dlshogi's book-to-policy probabilities for move values ``values`` (cp)."""
    beta = 1000.0 / temperature
    top = max(values)
    weights = [math.exp((v - top) * beta / BOOK_POLICY_COEF) for v in values]
    total = sum(weights)
    return [w / total for w in weights]


def training_arrays(blocks: Iterable[tuple[str, int | None, list[BookMove]]],
                    temperature: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    """(hcpe records, policy rows) for the positions whose moves have values."""
    board = cshogi.Board()
    records: list[np.ndarray] = []
    rows: list[tuple[int, int, float, int]] = []
    for sfen, ply, moves in blocks:
        valued = [m for m in moves if m.value is not None]
        if not valued:
            continue
        board.set_sfen(f"{sfen} {ply or 1}")
        record = np.zeros(1, dtype=cshogi.HuffmanCodedPosAndEval)
        board.to_hcp(record["hcp"])
        best = max(valued, key=lambda m: (m.value, m.count))
        assert best.value is not None  # one of the valued moves
        record["eval"] = max(-32767, min(32767, best.value))
        record["bestMove16"] = cshogi.move16(board.move_from_usi(best.move))
        index = len(records)
        records.append(record)
        values = [m.value for m in valued if m.value is not None]  # all of them, typed int
        for move, probability in zip(valued, policy_targets(values, temperature)):
            rows.append((index, cshogi.move16(board.move_from_usi(move.move)), probability,
                         int(65535 * probability)))
    hcpe = (np.concatenate(records) if records
            else np.zeros(0, dtype=cshogi.HuffmanCodedPosAndEval))
    return hcpe, np.array(rows, dtype=POLICY_DTYPE)
