"""Position files: root, opening and start positions, read and encoded.

- Position lines (grow's and import's roots, match openings, self-play
  starts): one ``startpos moves ...``, ``sfen ...`` or bare sfen per line,
  read by :func:`read_position_lines`, :meth:`Roots.read` and
  :func:`read_openings`; :class:`Roots` holds root positions as such lines;
- self-play starts (:func:`read_starts`): position lines, or a ``.hcp`` file of
  ``cshogi.HuffmanCodedPos`` records (dlshogi's ``roots.hcp``), each checked
  by :func:`bookgen.formats.hcp.read_hcp`;
- :func:`encode_positions`: sfens as raw hcp or psfen (``cshogi.PackedSfen``,
  YaneuraOu) records, what ``bookgen starts`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from bookgen.errors import BookgenError, SettingsError
from bookgen.formats.hcp import read_hcp
from bookgen.position import InvalidMove, InvalidPosition, parse_position_spec

__all__ = ["POSITION_RECORDS", "Roots", "encode_positions", "read_openings",
           "read_position_lines", "read_starts"]

HCP = cshogi.HuffmanCodedPos
# The raw position records bookgen writes, by format name.
POSITION_RECORDS = {"hcp": cshogi.HuffmanCodedPos, "psfen": cshogi.PackedSfen}


# --------------------------------------------------------------------------
# position lines


def read_position_lines(path: str | Path, what: str = "root positions"
                        ) -> list[tuple[str, cshogi.Board]]:
    """(line, board) for each position of a file; blank lines and ``#`` comments are ignored.

    Lines are ``startpos [moves ...]``, ``sfen SFEN [moves ...]`` or bare
    sfens. A bad line is an error naming the file and line (``what`` names
    the file's role in messages): such files define what a command walks or
    plays, so silently dropping a line would change the result.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise BookgenError(f"{path}: cannot read {what} ({error.strerror})") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        entries.append((line, _position(line, f"{path}:{number}")))
    if not entries:
        raise BookgenError(f"{path}: no {what}")
    return entries


def _position(line: str, where: str) -> cshogi.Board:
    """The board of a position line; ``where`` starts the message of a bad one."""
    try:
        board, _moves = parse_position_spec(line)
    except (InvalidPosition, InvalidMove) as error:
        raise BookgenError(f"{where}: bad position: {error}") from None
    if not any(True for _ in board.legal_moves):
        raise BookgenError(f"{where}: the side to move has no legal move")
    return board


@dataclass(frozen=True)
class Roots:
    """Root positions, as position lines (``startpos moves ...``, ``sfen ...``), and
    the label a run records for them (``runs.params.roots``: the file they were
    read from, or what made them). No lines: no roots given (grow then starts
    from the initial position). Every line is checked when the roots are made."""

    lines: tuple[str, ...] = ()
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.lines, str):
            raise SettingsError("roots.lines", "must be a sequence of position lines, not a "
                                "string")
        object.__setattr__(self, "lines", tuple(self.lines))
        if self.lines and not self.label:
            raise SettingsError("roots.label", "must name where the roots come from")
        for number, line in enumerate(self.lines, 1):
            _position(line, f"{self.label}:{number}")

    @classmethod
    def read(cls, path: str | Path) -> Roots:
        """The roots of a file (see :func:`read_position_lines`), labelled with its path."""
        return cls(tuple(line for line, _board in read_position_lines(path)), str(path))

    def boards(self) -> list[cshogi.Board]:
        """A fresh board for each root."""
        return [parse_position_spec(line)[0] for line in self.lines]


def read_openings(path: str | Path) -> list[str]:
    """The position lines of an openings file (``startpos moves ...``, ``sfen ...``), checked."""
    return [line for line, _board in read_position_lines(path, "openings")]


# --------------------------------------------------------------------------
# self-play starts


def read_starts(path: str | Path) -> np.ndarray:
    """Start positions as an array of ``cshogi.HuffmanCodedPos`` records.

    ``.hcp`` files are read as raw records, each checked to be a valid position
    (:func:`bookgen.formats.hcp.read_hcp`); anything else as ``startpos moves
    ...`` / ``sfen ...`` lines.
    """
    path = Path(path)
    if path.suffix.lower() != ".hcp":
        boards = [board for _line, board in read_position_lines(path)]
        records = np.zeros(len(boards), HCP)
        for i, board in enumerate(boards):
            board.to_hcp(records[i]["hcp"])
        return records
    records = read_hcp(path)
    if not len(records):
        raise BookgenError(f"{path}: empty file, no start positions")
    board = cshogi.Board()
    for index, hcp in enumerate(records["hcp"]):
        board.set_hcp(hcp)
        if board.is_game_over():
            raise BookgenError(f"{path}: record {index}: the side to move has no legal move")
    return records


# --------------------------------------------------------------------------
# hcp and psfen records


def encode_positions(task: tuple[str, list[str], list[int]]) -> bytes:
    """hcp or psfen records (``task``: the format, sfens and their move numbers).

    One tuple argument, so that it can be mapped over tasks by worker processes
    (:func:`bookgen.workers.forked.fork_map`).
    """
    fmt, sfens, plies = task
    records = np.zeros(len(sfens), dtype=POSITION_RECORDS[fmt])
    board = cshogi.Board()
    set_sfen = board.set_sfen
    encode = board.to_hcp if fmt == "hcp" else board.to_psfen
    for i, (sfen, ply) in enumerate(zip(sfens, plies)):
        set_sfen(f"{sfen} {ply}")
        encode(records[i:i + 1])
    return records.tobytes()
