"""Apery / dlshogi binary books (.bin): export, import by walking, gaps, roots."""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import cshogi
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import STARTPOS, book_entries, key_of, legal_usis, run_cli, write_db2016

RECORD = struct.Struct("<QhHi")   # key, fromToPro, count, score
assert RECORD.size == 16


@st.composite
def book_trees(draw, max_depth: int = 4, max_children: int = 3, max_count: int = 65535):
    """A book grown from the initial position: {sfen key: {usi: (value, count)}}.

    Every position with moves is reached from the start through book moves.
    """
    book: dict[str, dict[str, tuple[int, int]]] = {}

    def expand(board: cshogi.Board, depth: int) -> None:
        key = key_of(board)
        if key in book or depth >= max_depth:
            return
        legal = legal_usis(board)
        if not legal:
            return
        size = draw(st.integers(1 if depth == 0 else 0, min(max_children, len(legal))))
        chosen = draw(st.lists(st.sampled_from(legal), unique=True, min_size=size,
                               max_size=size))
        book[key] = {}
        for usi in chosen:
            value = draw(st.one_of(st.integers(-3000, 3000),
                                   st.integers(-(2**31 - 1), 2**31 - 1)))
            count = draw(st.integers(0, max_count))
            book[key][usi] = (value, count)
        for usi in chosen:
            child = cshogi.Board(board.sfen())
            child.push_usi(usi)
            expand(child, depth + 1)

    expand(cshogi.Board(), 0)
    return {key: moves for key, moves in book.items() if moves}


def write_tree(path: Path, tree) -> Path:
    return write_db2016(path, [(f"{key} 1", [(usi, None, value, 0, count)
                                             for usi, (value, count) in moves.items()])
                               for key, moves in tree.items()])


def expected_records(tree):
    """{book_key: [(move16, count, score), ...]} computed with cshogi alone."""
    result: dict[int, list[tuple[int, int, int]]] = {}
    for key, moves in tree.items():
        board = cshogi.Board(f"{key} 1")
        records = result.setdefault(board.book_key(), [])
        for usi, (value, count) in moves.items():
            records.append((cshogi.move16(board.move_from_usi(usi)), count, value))
    return result


def read_raw_records(path: Path) -> list[tuple[int, int, int, int]]:
    data = path.read_bytes()
    assert len(data) % 16 == 0
    return [RECORD.unpack_from(data, offset) for offset in range(0, len(data), 16)]


def tree_entries(tree, keep=lambda key: True):
    return {(key, usi, value, count) for key, moves in tree.items() if keep(key)
            for usi, (value, count) in moves.items()}


def entries_without_ponder_depth(book: Path):
    return {(sfen, move, value, count) for sfen, move, _p, value, _d, count in book_entries(book)}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(book_trees())
def test_apery_roundtrip(tree):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_tree(tmp / "tree.db", tree)
        run_cli("import", tmp / "tree.db", "-b", tmp / "a.sqlite")
        result = run_cli("export", "--json", "--format", "apery", "-o", tmp / "book.bin",
                         "-b", tmp / "a.sqlite")
        info = json.loads(result.stdout)
        raw = read_raw_records(tmp / "book.bin")
        as_numpy = np.fromfile(tmp / "book.bin", dtype=cshogi.BookEntry)
        imported = run_cli("import", "--json", "--format", "apery", tmp / "book.bin",
                           "-b", tmp / "b.sqlite")
        summary = json.loads(imported.stdout)
        got = entries_without_ponder_depth(tmp / "b.sqlite")

    expected = expected_records(tree)
    total = sum(len(r) for r in expected.values())
    assert info["records"] == total == len(raw) == len(as_numpy)
    # The numpy dtype and the hand-decoded layout agree.
    assert [tuple(int(x) for x in row) for row in as_numpy.tolist()] == raw
    # Sorted by key; within a key, counts descending.
    keys = [r[0] for r in raw]
    assert keys == sorted(keys)
    for a, b in zip(raw, raw[1:]):
        if a[0] == b[0]:
            assert a[2] >= b[2], "records of one key not in descending count order"
    # Keys are Board.book_key(); moves are cshogi move16; counts and scores as given.
    by_key: dict[int, list] = {}
    for key, move16, count, score in raw:
        by_key.setdefault(key, []).append((move16 & 0xFFFF, count, score))
    assert {k: sorted(v) for k, v in by_key.items()} == \
        {k: sorted(v) for k, v in expected.items()}
    # Reading the .bin back from the start position finds everything.
    assert got == tree_entries(tree)
    assert summary["problems"] == 0
    assert summary["files"][0]["records_unreached"] == 0


def black_to_move(key: str) -> bool:
    return key.split(" ")[1] == "b"


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(book_trees(max_depth=5, max_children=2))
def test_apery_one_ply_gap_is_walked_across(tree):
    """Keep only black-to-move positions in the .bin: every other ply is a gap."""
    black_keys = {cshogi.Board(f"{k} 1").book_key() for k in tree if black_to_move(k)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_tree(tmp / "tree.db", tree)
        run_cli("import", tmp / "tree.db", "-b", tmp / "a.sqlite")
        run_cli("export", "--format", "apery", "-o", tmp / "full.bin", "-b", tmp / "a.sqlite")
        records = np.fromfile(tmp / "full.bin", dtype=cshogi.BookEntry)
        kept = records[np.isin(records["key"], np.array(sorted(black_keys), dtype=np.uint64))]
        kept.tofile(tmp / "gap.bin")
        summary = json.loads(run_cli("import", "--json", "--format", "apery", tmp / "gap.bin",
                                     "-b", tmp / "g.sqlite").stdout)
        got = entries_without_ponder_depth(tmp / "g.sqlite")
        # Without looking through gaps only the start position is read.
        summary0 = json.loads(run_cli("import", "--json", "--format", "apery", "--max-gap", "0",
                                      tmp / "gap.bin",
                                      "-b", tmp / "g0.sqlite").stdout)
        got0 = entries_without_ponder_depth(tmp / "g0.sqlite")
    expected = tree_entries(tree, black_to_move)
    assert got == expected
    assert summary["files"][0]["records_unreached"] == 0
    start_key = STARTPOS.rsplit(" ", 1)[0]
    assert got0 == tree_entries(tree, lambda k: k == start_key)
    assert summary0["files"][0]["records_unreached"] == len(expected) - len(got0)


# ---------------------------------------------------------------- unreached / roots

FAR_PATH = ["2g2f", "8c8d", "2f2e", "8d8e", "6i7h"]


def far_board(plies: int = len(FAR_PATH)) -> cshogi.Board:
    board = cshogi.Board()
    for usi in FAR_PATH[:plies]:
        board.push_usi(usi)
    return board


def build_far_bin(tmp: Path) -> tuple[Path, set]:
    start = cshogi.Board()
    far = far_board()
    far_moves = [(usi, None, 10 * i, 0, 100 + i) for i, usi in enumerate(legal_usis(far)[:4])]
    write_db2016(tmp / "far.db", [(start.sfen(), [("7g7f", None, 40, 0, 7)]),
                                  (far.sfen(), far_moves)])
    run_cli("import", tmp / "far.db", "-b", tmp / "src.sqlite")
    run_cli("export", "--format", "apery", "-o", tmp / "far.bin", "-b", tmp / "src.sqlite")
    far_entries = {(key_of(far), usi, value, count) for usi, _p, value, _d, count in far_moves}
    return tmp / "far.bin", far_entries


def test_unreached_records_are_reported(tmp_path):
    path, far_entries = build_far_bin(tmp_path)
    result = run_cli("import", path, "-b", tmp_path / "b.sqlite")
    assert f"{len(far_entries)} never reached" in result.stdout, result.stdout
    got = entries_without_ponder_depth(tmp_path / "b.sqlite")
    assert got == {(STARTPOS.rsplit(" ", 1)[0], "7g7f", 40, 7)}
    summary = json.loads(run_cli("import", "--json", path, "-b", tmp_path / "c.sqlite").stdout)
    assert summary["files"][0]["records_unreached"] == len(far_entries)
    assert summary["files"][0]["records"] == len(far_entries) + 1


ROOT_SPECS = {
    "exact": "startpos moves " + " ".join(FAR_PATH),
    "sfen": "sfen " + far_board().sfen(),
    "one ply before": "startpos moves " + " ".join(FAR_PATH[:-1]),
    "two plies before (sfen + moves)": f"sfen {far_board(1).sfen()} moves "
                                       + " ".join(FAR_PATH[1:3]),
}


def import_with_roots(tmp_path: Path, spec: str):
    path, far_entries = build_far_bin(tmp_path)
    roots = tmp_path / "roots.txt"
    roots.write_text(f"# roots\n\n{spec}\n")
    result = run_cli("import", "--json", "--roots", roots, path, "-b", tmp_path / "b.sqlite")
    return far_entries, json.loads(result.stdout), entries_without_ponder_depth(
        tmp_path / "b.sqlite")


@pytest.mark.parametrize("name", sorted(ROOT_SPECS))
def test_roots_file_makes_positions_reachable(tmp_path, name):
    far_entries, _summary, got = import_with_roots(tmp_path, ROOT_SPECS[name])
    assert far_entries <= got, f"{name}: {got}"


def test_roots_are_walked_besides_the_initial_position(tmp_path):
    """import --help: --roots is a 'file of ... lines to walk from besides the initial
    position', so the start position's records must still be read."""
    name = "exact"
    far_entries, summary, got = import_with_roots(tmp_path, ROOT_SPECS[name])
    start_entry = (STARTPOS.rsplit(" ", 1)[0], "7g7f", 40, 7)
    assert got == far_entries | {start_entry}, (
        f"{name}: the initial position was not walked when --roots was given")
    assert summary["files"][0]["records_unreached"] == 0


def test_bad_roots_file_is_an_error(tmp_path):
    path, _ = build_far_bin(tmp_path)
    roots = tmp_path / "roots.txt"
    roots.write_text("startpos moves 7g7f 7g7f\n")
    result = run_cli("import", "--roots", roots, path, "-b", tmp_path / "b.sqlite", expect=2)
    assert "roots.txt:1" in result.stderr
    assert not (tmp_path / "b.sqlite").exists()


# ---------------------------------------------------------------- damaged records


def test_illegal_move16_record_is_reported(tmp_path):
    start = cshogi.Board()
    later = cshogi.Board()
    later.push_usi("7g7f")
    later.push_usi("3c3d")
    illegal = cshogi.move16(later.move_from_usi("7f7e"))   # no pawn on 7f at the start
    legal = cshogi.move16(start.move_from_usi("7g7f"))
    records = np.zeros(3, dtype=cshogi.BookEntry)
    records["key"] = start.book_key()
    records["fromToPro"] = [legal, illegal, -1]            # -1: 0xFFFF, garbage
    records["count"] = [10, 5, 3]
    records["score"] = [33, 44, 55]
    records.tofile(tmp_path / "bad.bin")
    result = run_cli("import", "--json", tmp_path / "bad.bin", "-b", tmp_path / "b.sqlite")
    summary = json.loads(result.stdout)
    reports = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(reports) == 2, result.stderr
    assert all(str(tmp_path / "bad.bin") in line for line in reports)
    assert summary["problems"] == 2
    assert summary["skipped"].get("moves") == 2
    assert entries_without_ponder_depth(tmp_path / "b.sqlite") == {
        (STARTPOS.rsplit(" ", 1)[0], "7g7f", 33, 10)}
    # --strict refuses the file and creates no book.
    run_cli("import", "--strict", tmp_path / "bad.bin", "-b", tmp_path / "s.sqlite", expect=2)
    assert not (tmp_path / "s.sqlite").exists()


def test_truncated_bin_is_an_error(tmp_path):
    records = np.zeros(2, dtype=cshogi.BookEntry)
    records["key"] = cshogi.Board().book_key()
    (tmp_path / "t.bin").write_bytes(records.tobytes()[:-3])
    result = run_cli("import", tmp_path / "t.bin", "-b", tmp_path / "b.sqlite", expect=2)
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "b.sqlite").exists()


def test_large_counts_are_scaled(tmp_path):
    start = cshogi.Board()
    after = cshogi.Board()
    after.push_usi("7g7f")
    big = {"7g7f": 200_000, "2g2f": 100_000, "5g5f": 70_001, "6g6f": 1, "1g1f": 65_535}
    small = {"3c3d": 65_535, "8c8d": 12}
    write_db2016(tmp_path / "c.db", [
        (start.sfen(), [(u, None, 0, 0, c) for u, c in big.items()]),
        (after.sfen(), [(u, None, 0, 0, c) for u, c in small.items()]),
    ])
    run_cli("import", tmp_path / "c.db", "-b", tmp_path / "a.sqlite")
    info = json.loads(run_cli("export", "--json", "--format", "apery", "-o", tmp_path / "c.bin",
                              "-b", tmp_path / "a.sqlite").stdout)
    assert info["counts_scaled"] == 1
    raw = read_raw_records(tmp_path / "c.bin")
    counts: dict[tuple[int, int], int] = {(k, m & 0xFFFF): c for k, m, c, _s in raw}
    largest = max(big.values())
    for usi, count in big.items():
        got = counts[(start.book_key(), cshogi.move16(start.move_from_usi(usi)))]
        assert 1 <= got <= 65535
        assert abs(got - count * 65535 / largest) <= 1, (usi, count, got)
    assert counts[(start.book_key(), cshogi.move16(start.move_from_usi("7g7f")))] == 65535
    for usi, count in small.items():   # another position: not scaled
        assert counts[(after.book_key(), cshogi.move16(after.move_from_usi(usi)))] == count


def test_format_detection_of_a_bin_without_nul_bytes(tmp_path):
    """A valid one-record Apery book whose bytes happen to contain no 0x00 byte
    (count 257 = 0x0101, score -1) must still be recognised as Apery by auto detection."""
    board = cshogi.Board()
    record = np.zeros(1, dtype=cshogi.BookEntry)
    record["key"] = board.book_key()
    record["fromToPro"] = cshogi.move16(board.move_from_usi("1g1f"))
    record["count"] = 257
    record["score"] = -1
    data = record.tobytes()
    assert b"\x00" not in data and len(data) == 16
    (tmp_path / "one.bin").write_bytes(data)
    result = run_cli("import", "--json", tmp_path / "one.bin", "-b", tmp_path / "b.sqlite",
                     expect=None)
    assert result.exit_code == 0, (
        "auto format detection rejects a valid Apery book without NUL bytes: "
        + result.stderr)
    assert entries_without_ponder_depth(tmp_path / "b.sqlite") == {
        (STARTPOS.rsplit(" ", 1)[0], "1g1f", -1, 257)}


def test_format_detection_of_a_normal_bin(tmp_path):
    """Auto detection (no --format) of an exported .bin, and of a DB2016 file."""
    write_db2016(tmp_path / "s.db",
                 [(STARTPOS, [("7g7f", None, 5, 0, 3), ("2g2f", None, 1, 0, 2)])])
    run_cli("import", tmp_path / "s.db", "-b", tmp_path / "a.sqlite")
    run_cli("export", "--format", "apery", "-o", tmp_path / "s.bin", "-b", tmp_path / "a.sqlite")
    run_cli("import", tmp_path / "s.bin", "-b", tmp_path / "b.sqlite")
    assert entries_without_ponder_depth(tmp_path / "b.sqlite") == {
        (STARTPOS.rsplit(" ", 1)[0], "7g7f", 5, 3), (STARTPOS.rsplit(" ", 1)[0], "2g2f", 1, 2)}


# ---------------------------------------------------------------- key collisions


def test_positions_sharing_an_apery_key_stay_distinct(tmp_path):
    """Apery keys hash only the mover's hand: two positions that differ in the other
    side's hand share a key. The store keeps both; the export reports the collision."""
    first = "4k4/9/9/9/9/9/9/9/4K4 b - 1"
    second = "4k4/9/9/9/9/9/9/9/4K4 b p 1"          # white holds a pawn
    assert cshogi.Board(first).book_key() == cshogi.Board(second).book_key()
    assert cshogi.Board(first).zobrist_hash() != cshogi.Board(second).zobrist_hash()
    write_db2016(tmp_path / "c.db", [(first, [("5i5h", None, 1, 1, 1)]),
                                     (second, [("5i4h", None, 2, 2, 2)])])
    run_cli("import", tmp_path / "c.db", "-b", tmp_path / "b.sqlite")
    assert {(s, m) for s, m, *_ in book_entries(tmp_path / "b.sqlite")} == {
        (first.rsplit(" ", 1)[0], "5i5h"), (second.rsplit(" ", 1)[0], "5i4h")}
    result = run_cli("export", "--json", "--format", "apery", "-o", tmp_path / "c.bin",
                     "-b", tmp_path / "b.sqlite")
    info = json.loads(result.stdout)
    assert info["key_collisions"] == 1
    assert info["records"] == 2
    assert "share Apery key" in result.stderr or "collision" in result.stderr.lower()


# ---------------------------------------------------------------- reader fuzzing

APERY_FUZZ = r'''
import sys, tempfile
from pathlib import Path
import cshogi
import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck
from bookgen.diagnostics import Diagnostics
from bookgen.formats.apery import read_apery

sys.path.insert(0, "tests")
from apery_reference import ListSink, reference_read_apery

board = cshogi.Board()
KEYS = [board.book_key()]
for usi in ("7g7f", "3c3d", "8h2b+", "3a2b"):
    board.push_usi(usi)
    KEYS.append(board.book_key())
for m in list(cshogi.Board().legal_moves)[:6]:
    b = cshogi.Board()
    b.push(m)
    KEYS.append(b.book_key())


class Sink:
    def __init__(self):
        self.positions = []
        self.moves = []

    def add_position(self, sfen, zobrist, ply, turn):
        self.positions.append(sfen)
        return len(self.positions) - 1

    def add_move(self, local, move, ponder, value, depth, count):
        self.moves.append((local, move, value, count))

    def add_rows(self, positions, moves, mask=0xFFFFFFFF):
        ids = [self.add_position(*row[1:]) for row in positions]
        for local, move, ponder, value, depth, count in moves:
            self.add_move(ids[local & mask], move, ponder, value, depth, count)


RECORD = st.tuples(st.one_of(st.sampled_from(KEYS), st.integers(0, 2**64 - 1)),
                   st.integers(0, 65535), st.integers(0, 65535),
                   st.integers(-2**31, 2**31 - 1))
tmp = Path(tempfile.mkdtemp())


@settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(RECORD, max_size=40), st.integers(0, 1))
def fuzz(records, gap):
    array = np.zeros(len(records), dtype=cshogi.BookEntry)
    for i, (key, move16, count, score) in enumerate(records):
        array[i] = (key, np.uint16(move16).astype(np.int16), count, score)
    path = tmp / "f.bin"
    array.tofile(path)
    sink = Sink()
    diagnostics = Diagnostics(stream=None)
    summary = read_apery(path, sink, diagnostics, (), gap)
    assert summary.records == len(records)
    for local, move, value, count in sink.moves:
        b = cshogi.Board(sink.positions[local] + " 1")
        assert move in {cshogi.move_to_usi(m) for m in b.legal_moves}
    assert summary.invalid_records == len(diagnostics)
    # the same walk as the reference reader's
    got, expected = ListSink(), ListSink()
    got_problems, expected_problems = Diagnostics(stream=None), Diagnostics(stream=None)
    assert (read_apery(path, got, got_problems, (), gap).as_dict()
            == reference_read_apery(path, expected, expected_problems, (), gap))
    assert got.positions == expected.positions and got.moves == expected.moves
    assert got_problems.problems == expected_problems.problems


fuzz()
print("ok")
'''


def test_apery_reader_fuzz_in_subprocess(tmp_path):
    from conftest import run_script

    proc = run_script(tmp_path, APERY_FUZZ, 300)
    assert proc.stdout.strip().endswith("ok")
