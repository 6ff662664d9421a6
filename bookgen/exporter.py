"""``bookgen export``: write a book as a DB2016 or Apery file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bookgen.diagnostics import Diagnostics
from bookgen.errors import BookgenError
from bookgen.formats.apery import export_records
from bookgen.formats.db2016 import write_db2016
from bookgen.progress import progress_bar
from bookgen.store import DEFAULT_BOOK, Book

EXPORT_FORMATS = ("db2016", "apery")


def export_book(out: str | Path, book: str | Path = DEFAULT_BOOK, *, fmt: str = "db2016",
                noe: bool = False, diagnostics: Diagnostics | None = None,
                progress: bool = True) -> dict[str, Any]:
    """Write every position that has moves to ``out``; returns what was written.

    The file is written beside ``out`` and renamed into place, so an
    interrupted export never leaves a truncated book under the final name.
    """
    if fmt not in EXPORT_FORMATS:
        raise BookgenError(f"unknown export format {fmt!r} (choose from "
                           f"{', '.join(EXPORT_FORMATS)})")
    out = Path(out)
    if out.is_dir():
        raise BookgenError(f"{out}: is a directory")
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with Book(book, create=False, readonly=True) as store:
        total = int(store.conn.execute(
            "SELECT count(DISTINCT position_id) FROM moves").fetchone()[0])
        try:
            with progress_bar(total=total, unit="pos", desc=f"writing {out.name}",
                              disable=None if progress else True) as bar:
                def blocks():  # type: ignore[no-untyped-def]
                    for block in store.iter_blocks():
                        bar.update()
                        yield block

                if fmt == "db2016":
                    with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
                        positions, moves = write_db2016(handle, blocks(),
                                                        noe=total if noe else None)
                    result: dict[str, Any] = {"positions": positions, "moves": moves}
                else:
                    records, result = export_records(blocks(), diagnostics)
                    records.tofile(temporary)
            os.replace(temporary, out)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise BookgenError(f"{out}: cannot write ({error.strerror})") from None
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    result.update(file=str(out), format=fmt)
    return result
