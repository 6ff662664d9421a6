"""``bookgen import``: read book files into a book, all or nothing.

:func:`import_books` takes the book, the files and an :class:`ImportSettings`
and returns an :class:`ImportSummary`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError, SettingsError
from bookgen.formats import FORMATS, SAMPLE_BYTES, detect_format
from bookgen.formats.apery import read_apery
from bookgen.formats.db2016 import iter_lines, read_db2016, sniff_encoding
from bookgen.formats.positions import Roots
from bookgen.progress import progress_bar
from bookgen.signals import fault_point
from bookgen.store import Book, BulkWriter, writes
from bookgen.workers.forked import fork_available


@dataclass(frozen=True)
class ImportSettings:
    """How files are read: their ``format`` (``auto``: by content, see
    :func:`bookgen.formats.detect_format`), whether one invalid entry refuses the
    whole import (``strict``), the positions Apery files are walked from besides
    the initial position (``apery_roots``), the plies outside the book that walk
    looks through (``apery_max_gap_plies``, 0 or 1) and the processes parsing
    large DB2016 files and walking large Apery files (``parser_workers``; None: one
    per core, at most 2)."""

    format: str = "auto"
    strict: bool = False
    apery_roots: Roots = field(default_factory=Roots)
    apery_max_gap_plies: int = 1
    parser_workers: int | None = None

    def __post_init__(self) -> None:
        if self.format != "auto" and self.format not in FORMATS:
            raise BookgenError(f"unknown format {self.format!r} "
                               f"(choose from auto, {', '.join(FORMATS)})")
        if self.apery_max_gap_plies not in (0, 1):
            raise SettingsError("apery_max_gap_plies", "must be 0 or 1")
        if self.parser_workers is not None and self.parser_workers < 1:
            raise SettingsError("parser_workers", "must be at least 1")

    def params(self, paths: Sequence[Path], formats: Sequence[str]) -> dict[str, Any]:
        """The run's ``runs.params`` for these files and their detected formats."""
        return {"sources": [str(p) for p in paths], "formats": list(formats),
                "strict": self.strict, "roots": self.apery_roots.label,
                "max_gap": self.apery_max_gap_plies}


@dataclass
class ImportSummary:
    book: str
    files: list[dict[str, Any]] = field(default_factory=list)
    positions_read: int = 0
    moves_read: int = 0
    positions_added: int = 0
    moves_added: int = 0
    moves_updated: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    problems: int = 0
    run_id: int | None = None
    interrupted_at_commit: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def import_books(book: str | Path, sources: Sequence[str | Path],
                 settings: ImportSettings | None = None, *,
                 diagnostics: Diagnostics | None = None, progress: bool = True,
                 wait: bool = False) -> ImportSummary:
    """Import DB2016 or Apery files into ``book`` (created if missing, else merged).

    Invalid entries are reported to ``diagnostics`` and skipped; with
    ``settings.strict`` any invalid entry aborts the import and the book is left
    exactly as it was. The book is changed in one transaction, so an
    interrupted import changes nothing either. ``wait``: when another process
    writes the book, wait for it instead of raising
    :class:`bookgen.store.lock.BookLocked`.
    """
    settings = settings if settings is not None else ImportSettings()
    workers = settings.parser_workers
    if workers is None:
        workers = min(2, os.cpu_count() or 1)
    if not fork_available():
        workers = 1
    strict, roots, max_gap = settings.strict, settings.apery_roots, settings.apery_max_gap_plies
    if not sources:
        raise BookgenError("no files to import")
    diagnostics = diagnostics if diagnostics is not None else Diagnostics()
    paths = [Path(source) for source in sources]
    for path in paths:
        if not path.is_file():
            raise BookgenError(f"{path}: no such file")
    formats = [detect_format(path, settings.format) for path in paths]
    root_boards = roots.boards()
    if Path(book).resolve() in {path.resolve() for path in paths}:
        raise BookgenError(f"{book}: the book cannot import itself")

    store = Book(book, wait=wait)
    params = settings.params(paths, formats)
    try:
        summary = ImportSummary(book=str(book))
        # Foreign keys are guaranteed by the writer; checking them per row
        # would double the cost of a bulk load.
        writes.foreign_keys_off(store.conn)
        with store.transaction():
            run_id = store.begin_run("import", params)
            writer = BulkWriter(store, run_id, workers)
            for path, file_format in zip(paths, formats):
                info = _read_file(path, file_format, writer, diagnostics, root_boards,
                                  max_gap, workers, progress)
                if info["positions"] == 0 and path.stat().st_size > 0:
                    reason = _nothing_read(path, info, diagnostics, roots)
                    text = f"{path}: nothing imported: {reason}; {book} unchanged"
                    if info["format"] == "apery":  # it says which setting could help
                        raise SettingsError("apery_roots", text)
                    raise BookgenError(text)
                summary.files.append(info)
            summary.positions_read, summary.moves_read = writer.positions, writer.moves
            summary.skipped = dict(diagnostics.skipped)
            summary.problems = len(diagnostics)
            if strict and len(diagnostics):
                raise SettingsError(
                    "strict", f"{len(diagnostics)} invalid entries (first: "
                    f"{diagnostics.problems[0]}); {SettingsError.FIELD}: nothing imported, "
                    f"{book} unchanged")
            added = writer.finish()     # also stores the links
            assert writer.links is not None
            summary.positions_added, summary.moves_added, summary.moves_updated = added
            summary.run_id = run_id
            store.end_run(run_id, positions_added=added[0], moves_added=added[1],
                          moves_updated=added[2],
                          counts={"positions_read": summary.positions_read,
                                  "moves_read": summary.moves_read,
                                  "skipped": summary.skipped,
                                  "links": writer.links.as_dict()})
            fault_point("import-before-commit")
        summary.interrupted_at_commit = store.interrupted
        return summary
    finally:
        store.discard_if_unused()  # a failed first import leaves no empty book


def _read_file(path: Path, file_format: str, writer: BulkWriter, diagnostics: Diagnostics,
               root_boards: list[Any], max_gap: int, workers: int,
               progress: bool) -> dict[str, Any]:
    before = (writer.positions, writer.moves, len(diagnostics))
    info: dict[str, Any] = {"file": str(path), "format": file_format}
    if file_format == "db2016":
        with progress_bar(total=path.stat().st_size, unit="B", unit_scale=True,
                          desc=f"reading {path.name}", disable=None if progress else True
                          ) as bar:
            for block in read_db2016(path, diagnostics, workers=workers, on_bytes=bar.update):
                writer.add_columns(block.position_rows(), block.book_key, block.position,
                                   block.move, block.ponder, block.value, block.depth,
                                   block.count)
    else:
        walk = read_apery(path, writer, diagnostics, root_boards, max_gap, workers)
        info.update(walk.as_dict())
    info.update(positions=writer.positions - before[0], moves=writer.moves - before[1],
                problems=len(diagnostics) - before[2])
    return info


def _nothing_read(path: Path, info: dict[str, Any], diagnostics: Diagnostics,
                  roots: Roots) -> str:
    """What was read from a non-empty file that gave no position, and why."""
    problems = [p for p in diagnostics.problems if p.source == str(path)]
    first = ""
    if problems:
        line = f"line {problems[0].line}: " if problems[0].line is not None else ""
        first = f" (first: {line}{problems[0].reason})"
    if info["format"] == "apery":
        reached = "the initial position" + (f" or the positions of {roots.label}"
                                            if roots.lines else "")
        return (f"{info['records']} Apery records under {info['keys']} keys, none reached "
                f"from {reached}{first}: not an Apery book, or one of positions that "
                f"are not reached from there (give {SettingsError.FIELD})")
    lines = sfen_lines = 0
    for _number, line in iter_lines(path):
        lines += 1
        sfen_lines += line.lstrip().startswith("sfen ")
    with open(path, "rb") as handle:
        encoding = sniff_encoding(handle.read(SAMPLE_BYTES))[0]
    read = f"{_count(lines, 'line')} of {encoding} text"
    if not sfen_lines:
        return f"{read}, without an 'sfen' line"
    return f"{read}, {_count(sfen_lines, 'sfen line')}, none valid{first}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
