"""File formats, without SQL: books, training data, positions and game records.

Book files: YaneuraOu DB2016 text books (:mod:`~bookgen.formats.db2016`, read
in bulk, large files on workers), Apery/dlshogi binary books
(:mod:`~bookgen.formats.apery`) and YaneuraOu policy books
(:mod:`~bookgen.formats.policy`); this module tells DB2016 and Apery apart
(:func:`detect_format`). Training data: hcp and hcpe records
(:mod:`~bookgen.formats.hcp`, :mod:`~bookgen.formats.move16`), the book as
hcpe and policy targets (:mod:`~bookgen.formats.training`). Position files
(roots, openings, self-play starts, hcp/psfen encoding):
:mod:`~bookgen.formats.positions`. Game records (CSA and KIF read, CSA
written, PGN read and written): :mod:`~bookgen.formats.records`.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from bookgen.errors import BookgenError, SettingsError
from bookgen.formats.db2016 import sniff_encoding
from bookgen.formats.move16 import is_move16

FORMATS = ("db2016", "apery")
APERY_RECORD_SIZE = 16
SAMPLE_BYTES = 1 << 16          # what format detection reads of a file
_MAX_BAD_MOVES = 0.5            # share of Apery records with no move that is still plausible
_MAX_ODD_CHARACTERS = 0.01      # share of control characters that is still text


@dataclass(frozen=True)
class Content:
    """What the start of a file looks like."""

    text: str | None        # the sample decoded, if the file is text
    encoding: str           # the text's encoding (when text)
    db2016: bool            # text with a DB2016 header, an 'sfen ' line or a leading comment
    apery: str | None       # why it is not an Apery book (None: it may be one)


def _decode(data: bytes, codec: str, errors: str = "strict") -> str | None:
    """``data`` decoded (the sample may end inside a character), None if it is not
    text: undecodable, NUL characters or too many control (or, with
    ``errors="replace"``, undecodable) characters."""
    try:
        text = codecs.getincrementaldecoder(codec)(errors).decode(data, final=False)
    except UnicodeDecodeError:
        return None
    odd = sum(1 for ch in text
              if not (ch.isprintable() or ch in "\r\n\t\f\v") or ch == "\ufffd")
    if "\0" in text or odd > _MAX_ODD_CHARACTERS * max(len(text), 1):
        return None
    return text


def examine(path: Path) -> Content:
    """Look at the first :data:`SAMPLE_BYTES` of a book file."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SAMPLE_BYTES)
        size = path.stat().st_size
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None
    codec, bom = sniff_encoding(head)
    text = _decode(head[bom:], codec)
    if text is None and codec == "utf-8":
        # CP932 (Shift_JIS) comments; their ASCII lines read the same in UTF-8.
        text = _decode(head, "cp932")
        codec = "cp932" if text is not None else codec
        if text is None:    # a few damaged bytes in text
            text = _decode(head[bom:], codec, "replace")
    db2016 = False
    if text is not None:
        lines = [line.strip() for line in text.replace("\r", "\n").split("\n")]
        first = next((line for line in lines if line), "")
        db2016 = (first.startswith(("#", "//"))
                  or any(line.startswith("sfen ") for line in lines))
    return Content(text, codec, db2016, _apery_doubt(head, size, text is not None))


def _apery_doubt(head: bytes, size: int, text: bool) -> str | None:
    """Why a file is not an Apery book (16-byte records sorted by key whose
    moves are moves), or None."""
    if text:
        return "it is text"
    if size % APERY_RECORD_SIZE:
        return f"its size, {size} bytes, is not a multiple of {APERY_RECORD_SIZE}"
    records = np.frombuffer(head[:len(head) - len(head) % APERY_RECORD_SIZE],
                            dtype=cshogi.BookEntry)
    keys = records["key"]
    if np.any(keys[1:] < keys[:-1]):
        return "its 16-byte records are not sorted by key"
    bad = int((~is_move16(records["fromToPro"])).sum())
    if bad > _MAX_BAD_MOVES * len(records):
        return f"{bad} of its first {len(records)} records hold no move"
    return None


_FIELD = SettingsError.FIELD  # where a message names the format setting (CLI: --format)


def detect_format(path: Path, given: str = "auto") -> str:
    """A book file's format, from its content.

    Text with a ``#`` or ``//`` comment first or an ``sfen`` line (UTF-8,
    UTF-16 or CP932) is DB2016; binary 16-byte records sorted by key whose
    moves are moves are Apery; anything else is refused. A ``given`` format
    (not ``auto``) is taken unless the content is clearly the other one. A file
    that is neither, or not the format given, is a
    :class:`bookgen.errors.SettingsError` of the field ``format``.
    """
    content = examine(path)
    if given == "db2016":
        if content.text is None:
            kind = "an Apery book" if content.apery is None else "binary data"
            raise SettingsError("format", f"{path}: {_FIELD} db2016, but the file is not text "
                                          f"(it looks like {kind})")
        return given
    if given == "apery":
        if content.db2016:
            raise SettingsError("format", f"{path}: {_FIELD} apery, but the file is a DB2016 "
                                          f"text book ({content.encoding})")
        return given
    if path.stat().st_size == 0:
        raise SettingsError("format", f"{path}: empty file, format unknown (use {_FIELD})")
    if content.db2016:
        return "db2016"
    if content.apery is None:
        return "apery"
    text = ("text, but without a '#' comment first or an 'sfen ' line"
            if content.text is not None else "not text")
    raise SettingsError("format", f"{path}: neither a DB2016 text book ({text}) nor an Apery "
                                  f"book ({content.apery}); use {_FIELD} to force one")
