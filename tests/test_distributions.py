"""stats and the book part of report read their distributions from the BookIndex:
the same numbers, in the same order, as the SQL aggregates they replaced.

The old implementation (one SQL query per number) is kept here for the
comparison; books: imported, grown and random ones, each also refined (which
adds transposition rows, not book moves).
"""

from __future__ import annotations

import math
import random
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from bookgen.analysis.report_book import read_book
from bookgen.bookfiles.importer import import_books
from bookgen.bookfiles.stats import DESCRIBE_KEYS, book_stats, format_stats
from bookgen.grow import grow
from bookgen.refine.minimax import MinimaxSettings, refine_minimax
from conftest import generate_blocks, small_grow, write_db2016

OWN = ("NOT (m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT NULL "
       "AND m.run_id IN (SELECT id FROM main.runs WHERE command IN ('refine minimax', 'link')))")


# ---------------------------------------------------------------- the old implementation


def _old_describe(series: pd.Series) -> dict[str, float | None]:
    described = series.dropna().astype(float).describe()
    result: dict[str, float | None] = {}
    for key in DESCRIBE_KEYS:
        value = float(described[key]) if key in described else math.nan
        result[key] = None if math.isnan(value) else value
    result["count"] = float(series.dropna().shape[0])
    return result


def old_distributions(path: Path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return {
            "positions": conn.execute("SELECT count(*) FROM positions").fetchone()[0],
            "moves": conn.execute(f"SELECT count(*) FROM moves m WHERE {OWN}").fetchone()[0],
            "with_moves": conn.execute(
                f"SELECT count(DISTINCT position_id) FROM moves m WHERE {OWN}").fetchone()[0],
            "plies": [r[0] for r in conn.execute(
                "SELECT ply FROM positions WHERE id IN "
                f"(SELECT position_id FROM moves m WHERE {OWN})")],
            "best": conn.execute(
                "SELECT p.turn, max(m.value) FROM moves m JOIN positions p ON "
                f"p.id = m.position_id WHERE {OWN} GROUP BY m.position_id").fetchall(),
            "runs": conn.execute("SELECT count(*) FROM runs WHERE command != 'link'"
                                 ).fetchone()[0],
            "link_runs": conn.execute("SELECT count(*) FROM runs WHERE command = 'link'"
                                      ).fetchone()[0],
        }
    finally:
        conn.close()


def old_stats(path: Path) -> dict:
    found = old_distributions(path)
    ply = pd.Series(found["plies"], dtype=float)
    best = pd.DataFrame(found["best"], columns=["turn", "best"], dtype=float)
    return {"book": str(path), "positions": found["positions"],
            "positions_with_moves": found["with_moves"], "moves": found["moves"],
            "runs": found["runs"], "link_runs": found["link_runs"], "ply": _old_describe(ply),
            "value_black": _old_describe(best.loc[best["turn"] == 0, "best"]),
            "value_white": _old_describe(best.loc[best["turn"] == 1, "best"])}


def old_report_values(path: Path) -> tuple[list[int], dict[str, list[int]]]:
    found = old_distributions(path)
    values: dict[str, list[int]] = {"black to move": [], "white to move": []}
    for turn, best in found["best"]:
        if best is not None:
            values["black to move" if turn == 0 else "white to move"].append(int(best))
    return [int(p) for p in found["plies"] if p is not None], values


# ---------------------------------------------------------------- the books


def random_blocks(seed: int) -> list[tuple[str, list[tuple]]]:
    """Random positions; some moves without value, some positions without ply."""
    rng = random.Random(seed)
    blocks = []
    for sfen, moves in generate_blocks(seed, 60):
        moves = [(m[0], m[1], None if rng.random() < 0.2 else m[2], m[3], m[4]) for m in moves]
        if rng.random() < 0.1:
            sfen = sfen.rsplit(" ", 1)[0] + " 0"
        blocks.append((sfen, moves))
    return blocks


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("distributions")
    paths = []
    for seed in (1, 2):
        path = root / f"random{seed}.sqlite"
        import_books(path, [write_db2016(root / f"random{seed}.db", random_blocks(seed))],
                     progress=False)
        paths.append(path)
    grown = root / "grown.sqlite"
    grow(grown, small_grow(30, 25, seed=4), progress=False)
    paths.append(grown)
    for path in list(paths):
        refined = path.with_name(f"refined-{path.name}")
        shutil.copy(path, refined)
        refine_minimax(refined, MinimaxSettings(scan_workers=1))
        paths.append(refined)
    return paths


def test_the_books_have_transposition_rows(books):
    rows = 0
    for path in books:
        conn = sqlite3.connect(path)
        rows += conn.execute(f"SELECT count(*) FROM moves m WHERE NOT {OWN}").fetchone()[0]
        conn.close()
    assert rows > 0


def test_stats_are_the_old_ones(books):
    for path in books:
        stats = book_stats(path)
        assert stats.as_dict() == old_stats(path), path
        assert list(stats.as_dict()) == list(old_stats(path))
        format_stats(stats)


def test_the_report_reads_the_old_distributions(books):
    for path in books:
        summary = read_book(path)
        found = old_distributions(path)
        assert (summary.positions, summary.positions_with_moves, summary.moves) == \
            (found["positions"], found["with_moves"], found["moves"])
        assert (summary.plies, summary.values) == old_report_values(path), path
