"""Parsing large DB2016 files in worker processes.

Validating a position costs far more than storing it, so large files are cut
(as UTF-8 with ``\\n`` line ends, whatever their encoding and line ends) into
chunks at ``sfen`` lines and parsed by a process pool while the main
process stores the rows. Each chunk's positions get handles
``chunk << 32 | i``, unique without coordination; problems are reported in
file order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bookgen.diagnostics import Diagnostics
from bookgen.formats.db2016 import read_db2016, text_blocks
from bookgen.workers.forked import fork_map

CHUNK_BYTES = 4 << 20
PARALLEL_MIN_BYTES = 4 << 20


class _ChunkSink:
    def __init__(self, chunk: int) -> None:
        self.base = chunk << 32
        self.positions: list[tuple[Any, ...]] = []
        self.moves: list[tuple[Any, ...]] = []

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        local = self.base + len(self.positions)
        self.positions.append((local, sfen, zobrist, ply, turn))
        return local

    def add_move(self, local: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        self.moves.append((local, move, ponder, value, depth, count))


def _lines(data: bytes, first_line: int) -> Iterator[tuple[int, str]]:
    for offset, raw in enumerate(data.split(b"\n")):
        yield first_line + offset, raw.decode("utf-8", "replace")


def parse_chunk(job: tuple[str, int, int, bytes, int]) -> tuple[Any, ...]:
    source, chunk, first_line, data, size = job
    sink = _ChunkSink(chunk)
    diagnostics = Diagnostics(stream=None)
    read_db2016(Path(source), sink, diagnostics, _lines(data, first_line))
    problems = [(p.line, p.reason) for p in diagnostics.problems]  # skips are counted apart
    return sink.positions, sink.moves, problems, dict(diagnostics.skipped), size


def _chunks(path: Path) -> Iterator[tuple[str, int, int, bytes, int]]:
    """(source, chunk number, first line number, text, bytes of the file it came
    from), cut before ``sfen`` lines; the text is :func:`text_blocks`'."""
    chunk = 0
    line = 1
    carry = b""
    size = 0
    for block, block_size in text_blocks(path, CHUNK_BYTES):
        size += block_size
        data = carry + block
        cut = data.rfind(b"\nsfen ")
        if cut <= 0:
            carry = data
            continue
        piece, carry = data[:cut], data[cut + 1:]
        yield str(path), chunk, line, piece, size
        size = 0
        line += piece.count(b"\n") + 1
        chunk += 1
    if carry or size:
        yield str(path), chunk, line, carry, size


def read_db2016_parallel(path: Path, writer: Any, diagnostics: Diagnostics,
                         workers: int = 2,
                         on_bytes: Callable[[int], object] | None = None) -> None:
    """Like :func:`read_db2016` into a :class:`~bookgen.store.BulkWriter`, on ``workers``
    forked processes (:func:`bookgen.workers.forked.fork_map`)."""
    source = str(path)
    for positions, moves, problems, skipped, size in fork_map(parse_chunk, _chunks(path),
                                                               workers):
        writer.add_rows(positions, moves)
        for line, reason in problems:
            diagnostics.report(source, line, reason, skipped=0)
        diagnostics.skipped.update(Counter(skipped))
        if on_bytes is not None:
            on_bytes(size)
