"""Book file formats: YaneuraOu DB2016 text books and Apery/dlshogi binary books."""

from __future__ import annotations

import codecs
from pathlib import Path

from bookgen.errors import BookgenError

FORMATS = ("db2016", "apery")
APERY_RECORD_SIZE = 16


def detect_format(path: Path) -> str:
    """Guess a book file's format from its content.

    Text whose first non-blank line is a ``#`` or ``//`` comment or an ``sfen``
    line is DB2016; a file that is not text (printable UTF-8) and is made of
    16-byte records is Apery; anything else is refused.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None
    if not head:
        raise BookgenError(f"{path}: empty file, format unknown (use --format)")
    text = head.removeprefix(b"\xef\xbb\xbf")
    if text.lstrip().startswith((b"#", b"sfen ", b"//")):
        return "db2016"
    if not _looks_like_text(text) and path.stat().st_size % APERY_RECORD_SIZE == 0:
        return "apery"
    raise BookgenError(
        f"{path}: neither a DB2016 text book nor an Apery binary book "
        "(use --format to force one)")


def _looks_like_text(data: bytes) -> bool:
    # Incremental decoding: the sample may end inside a multi-byte character.
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\r\n\t" for ch in text)
