"""numpy helpers shared by the book's columnar index and refine's solvers."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from functools import cache
from typing import overload

import numpy as np

__all__ = ["NULL", "PackedStrings", "find_rows", "ranges", "return_freed_memory"]

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


_M_MMAP_THRESHOLD = -3          # glibc's mallopt parameter
_MMAP_THRESHOLD = 1 << 20


@cache
def return_freed_memory() -> bool:
    """Make the arrays a long computation frees go back to the system (glibc only; True
    if it could).

    glibc serves a block of memory from its heap instead of a mapping of its own
    once a block of that size has been freed (its threshold grows up to 32 MB), and
    a heap gives back only its top: a pipeline of large temporary arrays then holds
    hundreds of MB it no longer uses. A fixed threshold keeps every block of 1 MB or
    more a mapping, unmapped when freed. Each new mapping costs page faults, so the
    threshold trades CPU for memory (measured on the file to file refine of 1 M
    positions, one process: 1 MB, 502 MB peak and 29 s of CPU, 5.5-6.4 of it in the
    kernel; 16 MB, 546 MB and 26.7 s, 3.6 in the kernel, but 571-615 MB for the
    process tree in bench_peta, over twice peta_shock's 290; no fixed threshold,
    639 MB and 25.8 s).
    """
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def trim_memory() -> None:
    """Give the free memory of glibc's heap back to the system (after a phase of large
    temporary arrays); nothing elsewhere."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PackedStrings(Sequence[str]):
    """ASCII strings without newlines kept as one ``bytes`` (each followed by a
    newline) and their offsets: a million sfens in about 90 MB instead of 140 MB of
    str objects, and one object to pickle. A slice is a list of str."""

    def __init__(self, data: bytes, offsets: np.ndarray) -> None:
        self.data = data
        self.offsets = offsets            # int64 [n + 1]: where each string starts, the end

    @classmethod
    def of(cls, texts: Iterable[str]) -> PackedStrings:
        texts = list(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls("".join(text + "\n" for text in texts).encode("ascii"), offsets)

    @classmethod
    def joined(cls, parts: Sequence[PackedStrings]) -> PackedStrings:
        starts = np.cumsum([0] + [len(part.data) for part in parts])
        offsets = np.concatenate([part.offsets[:-1] + start
                                  for part, start in zip(parts, starts.tolist())]
                                 + [np.array([starts[-1]], dtype=np.int64)])
        return cls(b"".join(part.data for part in parts), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedStrings):
            return NotImplemented
        return self.data == other.data and bool(np.array_equal(self.offsets, other.offsets))

    __hash__ = None  # type: ignore[assignment]

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if stop <= start:
                return []
            texts = self.data[self.offsets[start]:self.offsets[stop] - 1].decode("ascii")
            return texts.split("\n")[::step]
        if index < 0:
            index += len(self)
        return self.data[self.offsets[index]:self.offsets[index + 1] - 1].decode("ascii")

    def tolist(self) -> list[str]:
        return self[0:len(self)]

    def take(self, indices: np.ndarray) -> PackedStrings:
        """The strings at ``indices``."""
        every = self.tolist()
        return PackedStrings.of(every[i] for i in indices.tolist())
