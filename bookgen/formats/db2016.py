"""YaneuraOu's text book format, DB2016 (``.db``).

Reading accepts what real files contain: UTF-8 (CP932 comments too) or
UTF-16 text, a BOM, CRLF or CR line ends, ``#`` and
``//`` comments, blank lines, optional move fields, ``none`` for a missing
ponder, value or depth, duplicate positions (the minimum ply is kept and the
moves merged by the store). Invalid entries are reported and skipped.

Writing produces normalised sfens with the minimum ply, blocks sorted by sfen
(byte order, as YaneuraOu's on-the-fly reader binary-searches) and moves best
first.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal, TextIO, overload

import cshogi

from bookgen.diagnostics import Diagnostics
from bookgen.formats.sink import BookSink
from bookgen.position import InvalidMove, InvalidPosition, parse_move, parse_sfen, signed64
from bookgen.store import BookMove

HEADER = "#YANEURAOU-DB2016 1.00"

_INT32 = 2**31 - 1
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_SNIFF_BYTES = 4096
DEFAULT_VALUE, DEFAULT_DEPTH, DEFAULT_COUNT = 0, 0, 1


class _BadField(ValueError):
    pass


@overload
def _number(token: str, name: str, allow_none: Literal[False], minimum: int, maximum: int
            ) -> int: ...


@overload
def _number(token: str, name: str, allow_none: bool, minimum: int, maximum: int
            ) -> int | None: ...


def _number(token: str, name: str, allow_none: bool, minimum: int, maximum: int) -> int | None:
    if allow_none and token == "none":
        return None
    # int() alone would also take '1_000', '+5' and non-ASCII digits.
    if token.isascii() and "_" not in token and token[0] != "+":
        try:
            number = int(token)
        except ValueError:
            pass
        else:
            if minimum <= number <= maximum:
                return number
            raise _BadField(f"{name} {number} is out of range [{minimum}, {maximum}]")
    raise _BadField(f"{name} {token!r} is not an integer")


def sniff_encoding(head: bytes) -> tuple[str, int]:
    """(codec, BOM length) of a text file from its first bytes.

    A BOM decides (UTF-8, UTF-16 LE or BE); without one, text whose every
    other byte is NUL is UTF-16 (DB2016 lines are ASCII); anything else is
    read as UTF-8, which also reads the ASCII lines of CP932 files (their
    Japanese can only be in comments).
    """
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:_SNIFF_BYTES - _SNIFF_BYTES % 2]
    if len(sample) >= 2:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) >= 0.9 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "utf-16-be", 0
    return "utf-8", 0


def text_blocks(path: Path, block_bytes: int = 1 << 20) -> Iterator[tuple[bytes, int]]:
    """The text of a DB2016 file as UTF-8 with ``\\n`` line ends, in blocks of
    about ``block_bytes``: (text, bytes of the file they came from).

    The encoding comes from :func:`sniff_encoding` (the BOM is dropped);
    ``\\r\\n`` and a lone ``\\r`` (old Mac files) both end a line.
    """
    with open(path, "rb") as handle:
        raw = handle.read(block_bytes)
        codec, bom = sniff_encoding(raw)
        decoder = (None if codec == "utf-8"
                   else codecs.getincrementaldecoder(codec)(errors="replace"))
        pending_cr = False
        block = raw[bom:]
        while True:
            final = not raw
            if decoder is not None:
                block = decoder.decode(block, final=final).encode("utf-8", "replace")
            if pending_cr:
                block = b"\r" + block
            pending_cr = block.endswith(b"\r") and not final
            if pending_cr:      # a \r\n may be cut between two blocks
                block = block[:-1]
            if b"\r" in block:
                block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if block or raw:
                yield block, len(raw)
            if final:
                return
            raw = handle.read(block_bytes)
            block = raw


def iter_lines(path: Path, on_bytes: Callable[[int], object] | None = None
               ) -> Iterator[tuple[int, str]]:
    """(line number, text without line end) for each line (see :func:`text_blocks`).

    ``on_bytes`` is called now and then with the number of bytes read since.
    """
    number = 0
    carry = b""
    for block, size in text_blocks(path):
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        for raw in lines:
            number += 1
            yield number, raw.decode("utf-8", "replace")
        if on_bytes is not None and size:
            on_bytes(size)
    if carry:
        yield number + 1, carry.decode("utf-8", "replace")


def read_db2016(path: Path, sink: BookSink, diagnostics: Diagnostics,
                lines: Iterable[tuple[int, str]] | None = None) -> None:
    """Parse a DB2016 file into ``sink``; problems go to ``diagnostics``."""
    source = str(path)
    board = cshogi.Board()
    local: int | None = None
    in_block = False          # after an sfen line, valid or not
    add_move = sink.add_move
    for number, raw in (lines if lines is not None else iter_lines(path)):
        line = raw.strip()
        if not line or line[0] == "#" or line.startswith("//"):
            continue
        if line.startswith("sfen "):
            in_block = True
            try:
                position = parse_sfen(line[5:], board)
            except InvalidPosition as error:
                local = None
                diagnostics.report(source, number, f"invalid position: {error}; "
                                   "its moves are skipped", kind="positions")
                continue
            local = sink.add_position(position.sfen, signed64(board.zobrist_hash()),
                                      position.ply, board.turn)
            continue
        if not in_block:
            diagnostics.report(source, number, f"move line before any sfen line: {line!r}",
                               kind="moves")
            continue
        if local is None:
            diagnostics.skipped["moves"] += 1
            continue
        tokens = line.split()
        try:
            move = parse_move(board, tokens[0])
            ponder_token = tokens[1] if len(tokens) > 1 else "none"
            ponder = None if ponder_token == "none" else ponder_token
            if ponder is not None:
                board.push(move)
                try:
                    parse_move(board, ponder)
                except InvalidMove as error:
                    raise InvalidMove(f"ponder: {error}") from None
                finally:
                    board.pop()
            value = (_number(tokens[2], "value", True, -_INT32, _INT32)
                     if len(tokens) > 2 else DEFAULT_VALUE)
            depth = (_number(tokens[3], "depth", True, 0, _INT32)
                     if len(tokens) > 3 else DEFAULT_DEPTH)
            count = (_number(tokens[4], "count", False, 0, 2**63 - 1)
                     if len(tokens) > 4 else DEFAULT_COUNT)
        except (InvalidMove, _BadField) as error:
            diagnostics.report(source, number, f"invalid move line {line!r}: {error}",
                               kind="moves")
            continue
        add_move(local, tokens[0], ponder, value, depth, count)


def _field(value: int | None) -> str:
    return "none" if value is None else str(value)


def format_block(sfen: str, ply: int | None, moves: Iterable[BookMove]) -> str:
    lines = [f"sfen {sfen} {ply if ply is not None else 0}"]
    for move, ponder, value, depth, count in moves:
        lines.append(f"{move} {ponder or 'none'} {_field(value)} {_field(depth)} {count}")
    return "\n".join(lines) + "\n"


def write_db2016(out: TextIO, blocks: Iterable[tuple[str, int | None, list[BookMove]]],
                 noe: int | None = None) -> tuple[int, int]:
    """Write sorted blocks; ``noe`` adds a ``# NOE:n,SORTED`` line.

    Returns the numbers of positions and moves written.
    """
    out.write(HEADER + "\n")
    if noe is not None:
        out.write(f"# NOE:{noe},SORTED\n")
    positions = moves_written = 0
    for sfen, ply, moves in blocks:
        out.write(format_block(sfen, ply, moves))
        positions += 1
        moves_written += len(moves)
    return positions, moves_written
