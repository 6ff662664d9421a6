"""The Apery walk (bookgen.formats.apery.read_apery) against the reader it
replaced (tests/apery_reference.py: push, book_key_after and pop per legal move,
a set of sfens): the same positions in the same order with the same zobrist
keys, plies and sides to move, the same moves, problems and summary counts.

Books: generated books (benchmarks/generate_book.py) and the sample book
exported to .bin; the same with keys taken out (gaps, and positions behind them
that are reached only across a gap or not at all), records that are no move
or no legal one, keys of no position and duplicate records; roots inside and
outside the book; a handicap position and its twin whose positions share book
keys (the key leaves out the hand of the side not to move); forked workers
walking in small chunks. And the SQLite book of ``bookgen import`` equals the
one the reference reader writes through the same writer.
"""

from __future__ import annotations

import importlib.util
import random
import sqlite3
from pathlib import Path

import cshogi
import numpy as np
import pytest

from apery_reference import ListSink, reference_read_apery
from bookgen.bookfiles.importer import ImportSettings, import_books
from bookgen.diagnostics import Diagnostics
from bookgen.formats import apery
from bookgen.formats.apery import read_apery
from bookgen.store import Book, BulkWriter, writes
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
HANDICAP = "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"   # rook and bishop
TWIN = "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w RB 1"     # black holds them


def _generate(path: Path, positions: int, seed: int) -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_book", ROOT / "benchmarks" / "generate_book.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(path, positions, seed)


def export_bin(root: Path, text_book: Path, name: str) -> Path:
    """``text_book`` imported and exported as an Apery book."""
    import_books(root / f"{name}.sqlite", [text_book], ImportSettings(parser_workers=1),
                 progress=False)
    run_cli("export", "--format", "apery", "-b", root / f"{name}.sqlite",
            "-o", root / f"{name}.bin")
    return root / f"{name}.bin"


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("apery_walk")
    found = {}
    for positions, seed in ((3000, 1), (1500, 7)):
        _generate(root / f"gen{seed}.db", positions, seed)
        found[f"gen{seed}"] = export_bin(root, root / f"gen{seed}.db", f"gen{seed}")
    found["sample"] = export_bin(root, ROOT / "data" / "sample.db", "sample")
    return found


def assert_same_walk(path: Path, max_gap: int = 1, roots: tuple[str, ...] = (),
                     workers: int = 1) -> ListSink:
    """read_apery gives what the reference reader gives; returns its sink."""
    got, expected = ListSink(), ListSink()
    got_problems, expected_problems = Diagnostics(stream=None), Diagnostics(stream=None)
    summary = read_apery(path, got, got_problems, [cshogi.Board(s) for s in roots], max_gap,
                         workers)
    reference = reference_read_apery(path, expected, expected_problems,
                                     [cshogi.Board(s) for s in roots], max_gap)
    assert summary.as_dict() == reference
    assert got.positions == expected.positions
    assert got.moves == expected.moves
    assert got_problems.problems == expected_problems.problems
    assert dict(got_problems.skipped) == dict(expected_problems.skipped)
    return got


def records_of(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype=cshogi.BookEntry)


def write_records(path: Path, records: np.ndarray) -> Path:
    records.tofile(path)
    return path


@pytest.mark.parametrize("name", ["gen1", "gen7", "sample"])
@pytest.mark.parametrize("max_gap", [1, 0])
def test_exported_books_walk_as_before(books, name, max_gap):
    sink = assert_same_walk(books[name], max_gap)
    assert len(sink.positions) > 50 and len(sink.moves) > len(sink.positions)


def test_generated_book_has_gaps_to_look_through(books):
    summary = read_apery(books["gen1"], ListSink(), Diagnostics(stream=None))
    assert summary.gap_positions > 0 and summary.records_unreached == 0


def damaged(records: np.ndarray, seed: int) -> np.ndarray:
    """Every fifth key taken out (gaps, unreachable positions); records that encode
    no move, moves that are not legal, keys of no position, duplicates."""
    rng = np.random.default_rng(seed)
    keys = np.unique(records["key"])
    kept = records[~np.isin(records["key"], keys[2::5])]
    noise = kept[rng.choice(len(kept), 60, replace=False)].copy()
    noise["fromToPro"] = rng.integers(-2**15, 2**15, 60).astype(np.int16)
    strangers = kept[:20].copy()
    strangers["key"] = rng.integers(0, 2**63, 20).astype(np.uint64)
    doubles = kept[rng.choice(len(kept), 30, replace=False)]
    out = np.concatenate([kept, noise, strangers, doubles])
    return out[rng.permutation(len(out))]


@pytest.mark.parametrize("max_gap", [1, 0])
def test_books_with_gaps_and_bad_records(books, tmp_path, max_gap):
    path = write_records(tmp_path / "damaged.bin", damaged(records_of(books["gen1"]), 3))
    sink = assert_same_walk(path, max_gap)
    summary = read_apery(path, ListSink(), Diagnostics(stream=None), (), max_gap)
    assert summary.invalid_records > 0 and summary.records_unreached > 0
    assert (summary.gap_positions > 0) == (max_gap > 0)
    assert sink.positions


def sfens_of(path: Path) -> list[str]:
    sink = ListSink()
    read_apery(path, sink, Diagnostics(stream=None))
    return [sfen for sfen, *_ in sink.positions]


def test_roots_inside_and_outside_the_book(books, tmp_path):
    records = damaged(records_of(books["gen7"]), 4)
    path = write_records(tmp_path / "damaged.bin", records)
    sfens = sfens_of(books["gen7"])
    inside = sfens[100::400]
    # positions whose keys were taken out: all their moves are looked through
    taken_out = [s for s in sfens[50:]
                 if cshogi.Board(s + " 1").book_key() not in set(records["key"].tolist())]
    board = cshogi.Board(inside[0] + " 1")
    board.push(next(iter(board.legal_moves)))
    board.push(next(iter(board.legal_moves)))
    outside = [board.sfen(), HANDICAP, inside[1] + " 31", *(f"{s} 5" for s in taken_out[:15])]
    for max_gap in (1, 0):
        assert_same_walk(path, max_gap, tuple(f"{s} 9" for s in inside) + tuple(outside))
    only_outside = tuple(f"{s} 5" for s in taken_out[:15])
    with_gaps = read_apery(path, ListSink(), Diagnostics(stream=None),
                           [cshogi.Board(s) for s in only_outside])
    without = read_apery(path, ListSink(), Diagnostics(stream=None),
                         [cshogi.Board(s) for s in only_outside], 0)
    assert with_gaps.gap_positions > 0 and with_gaps.positions > without.positions


def twin_book(path: Path, seed: int) -> Path:
    """Records of random games from HANDICAP and from TWIN (most of them from
    HANDICAP, so that the twin's positions after white's moves, which share their
    keys, are reached across gaps), and black drops of the rook or bishop (legal
    only in TWIN's games)."""
    rng = random.Random(seed)
    rows = []
    board = cshogi.Board()
    for game in range(30):
        board.set_sfen(TWIN if game % 6 == 0 else HANDICAP)
        for _ in range(12):
            moves = list(board.legal_moves)
            if not moves:
                break
            move = rng.choice(moves)
            rows.append((board.book_key(), cshogi.move16(move), rng.randrange(1, 500),
                         rng.randrange(-300, 300)))
            if board.turn == cshogi.BLACK:    # a drop the twin's black could play
                to = rng.randrange(81)
                rows.append((board.book_key(), to | (81 + rng.choice([4, 5])) << 7, 1, 0))
            board.push(move)
    records = np.zeros(len(rows), dtype=cshogi.BookEntry)
    for i, (key, move16, count, score) in enumerate(rows):
        records[i] = (key, np.uint16(move16).astype(np.int16), count, score)
    return write_records(path, records)


@pytest.mark.parametrize("max_gap", [1, 0])
def test_twins_sharing_book_keys_stay_apart(tmp_path, max_gap):
    path = twin_book(tmp_path / "twins.bin", 5)
    sink = assert_same_walk(path, max_gap, (HANDICAP, TWIN))
    keys: dict[int, set[str]] = {}
    for sfen, *_ in sink.positions:
        keys.setdefault(cshogi.Board(sfen + " 1").book_key(), set()).add(sfen)
    assert sum(len(s) > 1 for s in keys.values()) > 5   # keys two positions share


@pytest.fixture
def small_chunks(monkeypatch):
    """Forked workers even for a few records, in small chunks."""
    monkeypatch.setattr(apery, "_PARALLEL_MIN_RECORDS", 0)
    monkeypatch.setattr(apery, "_CHUNK", 7)


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_and_small_chunks_walk_as_before(books, tmp_path, small_chunks, workers):
    assert_same_walk(books["gen7"], 1, workers=workers)
    path = write_records(tmp_path / "damaged.bin", damaged(records_of(books["gen7"]), 5))
    assert_same_walk(path, 1, (HANDICAP,), workers=workers)
    assert_same_walk(twin_book(tmp_path / "twins.bin", 6), 1, (HANDICAP, TWIN),
                     workers=workers)


def dump(path: Path) -> tuple[list[tuple], list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        positions = conn.execute("SELECT id, sfen, zobrist, ply, turn FROM positions "
                                 "ORDER BY id").fetchall()
        moves = conn.execute("SELECT position_id, move, ponder, value, depth, count, "
                             "child_id FROM moves ORDER BY position_id, move").fetchall()
    finally:
        conn.close()
    return positions, moves


def test_the_imported_book_is_the_one_the_reference_writes(books, tmp_path):
    path = write_records(tmp_path / "damaged.bin", damaged(records_of(books["gen1"]), 6))
    import_books(tmp_path / "new.sqlite", [path], ImportSettings("apery", parser_workers=2),
                 progress=False)
    store = Book(tmp_path / "old.sqlite")
    writes.foreign_keys_off(store.conn)
    with store.transaction():
        writer = BulkWriter(store, store.begin_run("import", {}))
        reference_read_apery(path, writer, Diagnostics(stream=None))
        writer.finish()
    store.close()
    new, old = dump(tmp_path / "new.sqlite"), dump(tmp_path / "old.sqlite")
    assert new == old and len(new[0]) > 1000
