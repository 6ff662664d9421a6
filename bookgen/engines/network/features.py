"""dlshogi network inputs and outputs, without torch (numpy and cshogi only).

Inputs are cshogi's dlshogi features: ``input1`` (N, 62, 9, 9) board planes
and ``input2`` (N, 57, 9, 9) pieces-in-hand planes, or (N, 119, 9, 9) with
dlshogi's entering-king (nyugyoku) features, which a model asks for by the
shape of its ``input2``. Outputs are 2187 policy
logits, laid out as ``cshogi.dlshogi.make_move_label(move, side_to_move)``
(27 move directions x 81 destination squares), and one value. The ONNX
evaluator needs only this module; the torch model is
:mod:`bookgen.engines.network.model`.
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi
import numpy as np
from cshogi import dlshogi

__all__ = ["FEATURES1_NUM", "FEATURES2_NUM", "INPUT2_PLANES", "INPUT_NAMES", "MOVE_DIRECTIONS",
           "MOVE_LABELS", "NYUGYOKU_FEATURES2_NUM", "OUTPUT_NAMES", "features",
           "legal_move_labels"]

FEATURES1_NUM: int = dlshogi.FEATURES1_NUM
FEATURES2_NUM = 57            # cshogi's input2 planes without the entering-king features
NYUGYOKU_FEATURES2_NUM = 119  # with them (cshogi.dlshogi.use_nyugyoku_features(True))
INPUT2_PLANES = (FEATURES2_NUM, NYUGYOKU_FEATURES2_NUM)
MOVE_DIRECTIONS = 27  # dlshogi's MAX_MOVE_LABEL_NUM; cshogi does not export it
MOVE_LABELS = MOVE_DIRECTIONS * 81

INPUT_NAMES = ("input1", "input2")
OUTPUT_NAMES = ("output_policy", "output_value")


def features(boards: Sequence[cshogi.Board], input2: int = FEATURES2_NUM
             ) -> tuple[np.ndarray, np.ndarray]:
    """dlshogi input planes for ``boards``: float32 arrays (N, 62, 9, 9) and
    (N, ``input2``, 9, 9), ``input2`` one of :data:`INPUT2_PLANES`.

    cshogi's choice of the input2 features is process-wide: it is set here
    for every batch and put back to the default (57 planes) after it, so
    models of both kinds can share a process and other callers of
    ``make_input_features`` keep their 57 planes.
    """
    if input2 not in INPUT2_PLANES:
        raise ValueError(f"input2 must have {' or '.join(map(str, INPUT2_PLANES))} planes")
    count = len(boards)
    # make_input_features writes through raw pointers: the buffers must be
    # float32 and C-contiguous; rows of a C-contiguous batch array are.
    features1 = np.zeros((count, FEATURES1_NUM, 9, 9), dtype=np.float32)
    features2 = np.zeros((count, input2, 9, 9), dtype=np.float32)
    if input2 == FEATURES2_NUM:
        for i, board in enumerate(boards):
            dlshogi.make_input_features(board, features1[i], features2[i])
        return features1, features2
    dlshogi.use_nyugyoku_features(True)
    try:
        for i, board in enumerate(boards):
            dlshogi.make_input_features(board, features1[i], features2[i])
    finally:
        dlshogi.use_nyugyoku_features(False)
    return features1, features2


def legal_move_labels(board: cshogi.Board) -> tuple[list[int], np.ndarray]:
    """The legal moves of ``board`` (cshogi ints) and their policy labels (int64)."""
    moves = list(board.legal_moves)
    color = board.turn
    labels = np.fromiter((dlshogi.make_move_label(move, color) for move in moves),
                         dtype=np.int64, count=len(moves))
    return moves, labels
