"""``bookgen merge``: combine books into one.

Positions are matched by their exact sfen and keep the minimum ply. A move
present in several books keeps the entry with the greatest depth, then the
greatest count (the first book wins a full tie). All stored columns travel,
child links are re-pointed to the output's rows. The rows ``refine minimax``
adds for transposition edges are derived data tied to the source's runs:
they are not copied; the merge stores the merged book's links anew
(:func:`bookgen.store.stored_links.store_links`: every legal move between
positions with moves linked, the missing ones as transposition rows of a
``link`` run), so the merged book's links are complete.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError
from bookgen.store import Book, MoveRows, stored_links
from bookgen.store.bulk import attach_source, merge_attached

MAX_SOURCES = 9  # SQLite attaches at most 10 databases, the output included


@dataclass(frozen=True)
class MergeSummary:
    """What a merge wrote (rows added and changed in ``book``) and the book after it."""

    positions_added: int
    moves_added: int
    moves_updated: int
    book: str
    positions: int
    moves: int
    run_id: int

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output, in the order of the fields."""
        return asdict(self)


def merge_books(out: str | Path, sources: Sequence[str | Path], *,
                wait: bool = False) -> MergeSummary:
    """Merge ``sources`` into ``out`` (created if missing); returns the counts.
    ``wait``: wait for another process writing ``out`` instead of failing."""
    if not sources:
        raise BookgenError("no books to merge")
    out_path = Path(out).resolve()
    for source in sources:
        if Path(source).resolve() == out_path:
            raise BookgenError(f"{source}: the output book cannot also be an input")
        Book(source, create=False, readonly=True).close()  # validates each input first
    if len(sources) > MAX_SOURCES:
        raise BookgenError(f"at most {MAX_SOURCES} books can be merged at once "
                           f"(got {len(sources)}); merge in steps")
    store = Book(out, wait=wait)
    try:
        for number, source in enumerate(sources):
            attach_source(store, source, f"src{number}")
        totals = {"positions_added": 0, "moves_added": 0, "moves_updated": 0}
        with store.transaction():
            run_id = store.begin_run("merge", {"sources": [str(s) for s in sources]})
            for number in range(len(sources)):
                added = merge_attached(store, f"src{number}", run_id)
                for key, value in zip(totals, added):
                    totals[key] += value
            links = stored_links.store_links(store, run_id, min(2, os.cpu_count() or 1))
            store.end_run(run_id, positions_added=totals["positions_added"],
                          moves_added=totals["moves_added"],
                          moves_updated=totals["moves_updated"],
                          counts={"sources": len(sources), "links": links.as_dict()})
        return MergeSummary(**totals, book=str(out), positions=store.count_positions(),
                            moves=store.count_moves(MoveRows.OWN), run_id=run_id)
    finally:
        store.discard_if_unused()
