"""numpy helpers shared by the book's columnar index and refine's solvers."""

from __future__ import annotations

import numpy as np

__all__ = ["NULL", "find_rows", "ranges"]

NULL = np.iinfo(np.int64).min  # an SQL NULL in the int64 columns of BookIndex


def ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(starts[i], stops[i])``."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


def find_rows(ids: np.ndarray, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``pids`` in the ascending ``ids``, and which of them are there."""
    if len(ids) and int(ids[-1]) - int(ids[0]) + 1 == len(ids):  # ids without gaps
        rows = pids - ids[0]
        return rows, (rows >= 0) & (rows < len(ids))
    rows = np.searchsorted(ids, pids)
    found = rows < len(ids)
    found[found] = ids[rows[found]] == pids[found]
    return rows, found
