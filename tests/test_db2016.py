"""DB2016 text books: import/export round trips, ordering, and messy input files."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import cshogi
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import (
    DB2016_HEADER,
    STARTPOS,
    book_entries,
    dump_book,
    key_of,
    legal_usis,
    parse_db2016,
    replies_after,
    run_cli,
    walks,
    write_db2016,
)

INT32 = 2**31 - 1
START_KEY = STARTPOS.rsplit(" ", 1)[0]


def shuffle_hands(key: str, rng) -> str:
    board_field, turn, hands = key.split(" ")
    if hands == "-":
        return key
    tokens = re.findall(r"\d*[A-Za-z]", hands)
    rng.shuffle(tokens)
    return f"{board_field} {turn} {''.join(tokens)}"


def move_order_key(move):
    """Best first: value descending (no value after all values), then count descending."""
    _usi, _ponder, value, _depth, count = move
    return (value is None, -(value or 0), -count)


@st.composite
def db2016_inputs(draw):
    """Blocks of (written sfen, ply, moves) with no duplicate (position, move) pair.

    Positions come from random walks; some blocks repeat an earlier position
    (duplicate / transposed entries) with another ply and other moves.
    """
    rng = draw(st.randoms(use_true_random=False))
    pool: list[cshogi.Board] = []
    used: set[tuple[str, str]] = set()
    blocks = []
    for _ in range(draw(st.integers(1, 7))):
        if pool and draw(st.integers(0, 3)) == 0:
            board = draw(st.sampled_from(pool))
        else:
            board, _ = draw(walks(max_plies=14))
            pool.append(board)
        key = key_of(board)
        available = [u for u in legal_usis(board) if (key, u) not in used]
        chosen = (draw(st.lists(st.sampled_from(available), unique=True,
                                max_size=min(5, len(available))))
                  if available else [])
        moves = []
        for usi in chosen:
            used.add((key, usi))
            replies = replies_after(board, usi)
            ponder = draw(st.one_of(st.none(), st.sampled_from(replies))) if replies else None
            value = draw(st.one_of(st.none(), st.integers(-3000, 3000),
                                   st.integers(-INT32, INT32)))
            depth = draw(st.one_of(st.none(), st.integers(0, 64), st.integers(0, INT32)))
            count = draw(st.one_of(st.integers(0, 1000), st.integers(0, 2**63 - 1)))
            moves.append((usi, ponder, value, depth, count))
        ply = draw(st.integers(0, 400))
        blocks.append((key, shuffle_hands(key, rng), ply, moves))
    return blocks


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(db2016_inputs(), st.booleans(), st.booleans())
def test_roundtrip_import_export(blocks, crlf, bom):
    expected = {(key, *move) for key, _written, _ply, moves in blocks for move in moves}
    # Move number 0 means "unknown": it never wins the minimum, and a position
    # whose plies are all unknown is written with 0.
    min_ply: dict[str, int] = {}
    for key, _written, ply, _moves in blocks:
        known = [p for p in (ply, min_ply.get(key, 0)) if p > 0]
        min_ply[key] = min(known) if known else 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = write_db2016(tmp / "in.db",
                              [(f"{written} {ply}", moves) for _k, written, ply, moves in blocks],
                              crlf=crlf, bom=bom)
        book = tmp / "book.sqlite"
        result = run_cli("import", source, "-b", book)
        assert result.stderr == ""
        out = tmp / "out.db"
        run_cli("export", "-o", out, "-b", book)
        raw = out.read_bytes()
        parsed = parse_db2016(raw.decode("utf-8"))
    assert parsed.header == DB2016_HEADER
    assert parsed.noe is None
    assert parsed.entries() == expected
    # The number of move lines is the number of entries: nothing duplicated.
    assert sum(len(moves) for _s, _p, moves in parsed.blocks) == len(expected)
    sfens = [sfen for sfen, _ply, _moves in parsed.blocks]
    assert len(sfens) == len(set(sfens)), "a position written twice"
    assert sfens == sorted(sfens, key=lambda s: s.encode("utf-8")), "blocks not sorted by sfen"
    assert set(sfens) == {key for key, *_ in expected}
    for sfen, ply, moves in parsed.blocks:
        assert ply == min_ply[sfen], f"{sfen}: ply {ply}, minimum was {min_ply[sfen]}"
        keys = [move_order_key(m) for m in moves]
        assert keys == sorted(keys), f"{sfen}: moves not best first: {moves}"


def test_reexport_is_identical(tmp_path):
    """export -> import into a fresh book -> export gives the same bytes."""
    board = cshogi.Board()
    blocks = []
    for usi in ("7g7f", "3c3d", "2g2f", "8c8d"):
        moves = [(u, None, i * 7 - 20, i % 3, i + 1) for i, u in enumerate(legal_usis(board)[:4])]
        blocks.append((board.sfen(), moves))
        board.push_usi(usi)
    write_db2016(tmp_path / "a.db", blocks)
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "b1.sqlite")
    run_cli("export", "-o", tmp_path / "e1.db", "-b", tmp_path / "b1.sqlite")
    run_cli("import", tmp_path / "e1.db", "-b", tmp_path / "b2.sqlite")
    run_cli("export", "-o", tmp_path / "e2.db", "-b", tmp_path / "b2.sqlite")
    assert (tmp_path / "e1.db").read_bytes() == (tmp_path / "e2.db").read_bytes()
    assert len(parse_db2016((tmp_path / "e1.db").read_text()).entries()) == 16


def test_transposition_keeps_minimum_ply_and_merges_moves(tmp_path):
    first, second = cshogi.Board(), cshogi.Board()
    for usi in ("7g7f", "3c3d", "2g2f"):
        first.push_usi(usi)
    for usi in ("2g2f", "3c3d", "7g7f"):
        second.push_usi(usi)
    assert key_of(first) == key_of(second)
    key = key_of(first)
    write_db2016(tmp_path / "t.db", [
        (f"{key} 41", [("8c8d", "2f2e", 15, 20, 3)]),
        (f"{key} 4", [("4a3b", None, -8, 18, 9)]),
        (f"{key} 17", [("5a4b", "6i7h", None, None, 1)]),
    ])
    run_cli("import", tmp_path / "t.db", "-b", tmp_path / "b.sqlite")
    run_cli("export", "-o", tmp_path / "o.db", "-b", tmp_path / "b.sqlite")
    parsed = parse_db2016((tmp_path / "o.db").read_text())
    assert [(s, p) for s, p, _m in parsed.blocks] == [(key, 4)]
    assert [m[0] for m in parsed.blocks[0][2]] == ["8c8d", "4a3b", "5a4b"]


def test_moves_sorted_best_first_with_count_tiebreak(tmp_path):
    write_db2016(tmp_path / "s.db", [(STARTPOS, [
        ("2g2f", None, 10, 5, 1),
        ("7g7f", None, 30, 5, 2),
        ("5g5f", None, 10, 5, 9),
        ("6g6f", None, -100, 5, 100),
        ("1g1f", None, 30, 5, 50),
        ("9g9f", None, 10, 5, 3),
    ])])
    run_cli("import", tmp_path / "s.db", "-b", tmp_path / "b.sqlite")
    run_cli("export", "-o", tmp_path / "o.db", "-b", tmp_path / "b.sqlite")
    parsed = parse_db2016((tmp_path / "o.db").read_text())
    assert [m[0] for m in parsed.blocks[0][2]] == ["1g1f", "7g7f", "5g5f", "9g9f", "2g2f", "6g6f"]


def test_blocks_sorted_by_bytes_not_by_ply(tmp_path):
    board = cshogi.Board()
    written = []
    for ply, usi in enumerate(["7g7f", "3c3d", "8h2b+", "3a2b", "B*4e"], 1):
        written.append((board.sfen(), [(usi, None, 0, 0, ply)]))
        board.push_usi(usi)
    write_db2016(tmp_path / "s.db", list(reversed(written)))
    run_cli("import", tmp_path / "s.db", "-b", tmp_path / "b.sqlite")
    run_cli("export", "-o", tmp_path / "o.db", "-b", tmp_path / "b.sqlite")
    sfens = [s for s, _p, _m in parse_db2016((tmp_path / "o.db").read_text()).blocks]
    assert len(sfens) == 5
    assert sfens == sorted(sfens, key=str.encode)


def test_noe_line(tmp_path):
    board = cshogi.Board()
    blocks = []
    for usi in ("7g7f", "3c3d", "2g2f"):
        blocks.append((board.sfen(), [(usi, None, 1, 1, 1), (legal_usis(board)[0], None, 0, 0, 1)]))
        board.push_usi(usi)
    blocks.append((board.sfen(), []))  # a position without moves is not written
    write_db2016(tmp_path / "n.db", blocks)
    run_cli("import", tmp_path / "n.db", "-b", tmp_path / "b.sqlite")
    run_cli("export", "--noe", "-o", tmp_path / "o.db", "-b", tmp_path / "b.sqlite")
    text = (tmp_path / "o.db").read_text()
    lines = text.split("\n")
    assert lines[0] == DB2016_HEADER
    match = re.fullmatch(r"# NOE:(\d+)(,SORTED)?", lines[1])
    assert match, lines[1]
    parsed = parse_db2016(text)
    assert int(match.group(1)) == len(parsed.blocks) == 3
    # Without --noe there is no such line.
    run_cli("export", "-o", tmp_path / "p.db", "-b", tmp_path / "b.sqlite")
    assert "NOE" not in (tmp_path / "p.db").read_text()


# ---------------------------------------------------------------- messy files

AFTER_7G7F = "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"


def messy_lines():
    """(line, expectation) pairs; expectation is 'ok', 'bad' (reported) or 'silent'
    (a move of an invalid position: skipped without a report of its own)."""
    return [
        ("#YANEURAOU-DB2016 1.00", "ok"),
        ("# a comment", "ok"),
        ("7g7f 3c3d 10 5 2", "bad"),                       # move line before any sfen
        ("", "ok"),
        ("sfen 9/9/9/9/9/9/9/9/9 b - 0", "bad"),           # the stray entry of a real book
        ("none none 1 1 1", "silent"),
        (f"sfen {STARTPOS}", "ok"),
        ("// another comment", "ok"),
        ("7g7f", "ok"),
        ("2g2f 8c8d", "ok"),
        ("5g5f none 10", "ok"),
        ("6g6f none none none 3", "ok"),
        ("  1g1f\t1c1d  -20   7  4  ", "ok"),
        ("", "ok"),
        ("7g7e none 0 0 1", "bad"),                        # illegal move
        ("9g9f none abc 0 1", "bad"),                      # non-numeric value
        ("3g3f none 0 x 1", "bad"),                        # non-numeric depth
        ("4g4f none 0 0 many", "bad"),                     # non-numeric count
        ("7g7f+ none 0 0 1", "bad"),                       # promotion outside the zone
        ("9i9h 8c8e 0 0 1", "bad"),                        # illegal ponder
        ("none none 1 1 1", "bad"),                        # 'none' as a move
        ("4i5h none 99999999999999 0 1", "bad"),           # value out of range
        ("#   3i4h none 0 0 1", "ok"),                     # commented-out move
        (f"sfen {AFTER_7G7F}", "ok"),
        ("3c3d 2g2f 5 3 1", "ok"),
        ("8c8d none -5 none 2", "ok"),
        ("4a3b none 0 0 -1", "bad"),                       # negative count
        ("5a5b+ none 0 0 1", "bad"),                       # king promotion
        (f"sfen {STARTPOS} 7", "bad"),                     # too many fields
        ("2g2f none 0 0 1", "silent"),
        ("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN b - 1", "bad"),
        ("7g7f none 0 0 1", "silent"),
        ("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 3", "ok"),
        ("3i4h none 1 1 1", "ok"),
        ("", "ok"),
        ("", "ok"),
    ]


MESSY_EXPECTED = {
    (START_KEY, "7g7f", None, 0, 0, 1),
    (START_KEY, "2g2f", "8c8d", 0, 0, 1),
    (START_KEY, "5g5f", None, 10, 0, 1),
    (START_KEY, "6g6f", None, None, None, 3),
    (START_KEY, "1g1f", "1c1d", -20, 7, 4),
    (START_KEY, "3i4h", None, 1, 1, 1),
    (AFTER_7G7F.rsplit(" ", 1)[0], "3c3d", "2g2f", 5, 3, 1),
    (AFTER_7G7F.rsplit(" ", 1)[0], "8c8d", None, -5, None, 2),
}


def write_messy(path: Path, crlf: bool, bom: bool) -> Path:
    newline = "\r\n" if crlf else "\n"
    text = newline.join(line for line, _ in messy_lines()) + newline
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def expected_skips():
    kinds = [k for _line, k in messy_lines()]
    bad_lines = [n for n, (_l, k) in enumerate(messy_lines(), 1) if k == "bad"]
    invalid_positions = sum(1 for line, k in messy_lines() if k == "bad" and
                            line.startswith("sfen "))
    skipped_moves = len(bad_lines) - invalid_positions + kinds.count("silent")
    return bad_lines, invalid_positions, skipped_moves


@pytest.mark.parametrize("crlf, bom", [(False, False), (True, True), (True, False),
                                       (False, True)])
def test_messy_file(tmp_path, crlf, bom):
    source = write_messy(tmp_path / "messy.db", crlf, bom)
    book = tmp_path / "book.sqlite"
    result = run_cli("import", source, "-b", book)
    bad_lines, invalid_positions, skipped_moves = expected_skips()

    # Each invalid entry once on stderr, with file:line and a reason.
    reports = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(reports) == len(bad_lines), result.stderr
    reported_lines = []
    for line in reports:
        match = re.match(rf"bookgen: {re.escape(str(source))}:(\d+): (.+)", line)
        assert match, f"report without file:line: {line!r}"
        assert len(match.group(2).strip()) > 5, f"report without a reason: {line!r}"
        reported_lines.append(int(match.group(1)))
    assert sorted(reported_lines) == bad_lines

    # The summary counts what was skipped.
    summary = result.stdout
    assert re.search(rf"\b{skipped_moves} moves\b", summary), summary
    assert re.search(rf"\b{invalid_positions} positions?\b", summary.split("skipped")[-1]), summary
    assert f"{len(bad_lines)} problems" in summary, summary

    # Valid entries are imported, with the defaults for missing fields.
    assert book_entries(book) == MESSY_EXPECTED
    plies = dict((s, p) for s, _z, p, _t in dump_book(book)["positions"])
    assert plies[START_KEY] == 1
    assert plies[AFTER_7G7F.rsplit(" ", 1)[0]] == 2
    assert len(plies) == 2


def test_messy_file_json_summary(tmp_path):
    source = write_messy(tmp_path / "messy.db", True, True)
    result = run_cli("import", "--json", source, "-b", tmp_path / "b.sqlite")
    bad_lines, invalid_positions, skipped_moves = expected_skips()
    summary = json.loads(result.stdout)
    assert summary["problems"] == len(bad_lines)
    assert summary["skipped"].get("moves", 0) == skipped_moves
    assert summary["skipped"].get("positions", 0) == invalid_positions
    assert summary["moves_added"] == len(MESSY_EXPECTED)
    assert summary["positions_added"] == 2


def test_position_without_move_number_and_sfen_only_file(tmp_path):
    key = key_of(cshogi.Board())
    write_db2016(tmp_path / "a.db", [(key, [("7g7f", "3c3d", 12, 3, 4)])], header=False)
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "b.sqlite")
    assert book_entries(tmp_path / "b.sqlite") == {(key, "7g7f", "3c3d", 12, 3, 4)}
    run_cli("export", "-o", tmp_path / "o.db", "-b", tmp_path / "b.sqlite")
    parsed = parse_db2016((tmp_path / "o.db").read_text())
    assert parsed.entries() == {(key, "7g7f", "3c3d", 12, 3, 4)}


def test_reimport_rule_deeper_or_more_counted_wins(tmp_path):
    book = tmp_path / "b.sqlite"
    write_db2016(tmp_path / "1.db", [(STARTPOS, [("7g7f", None, 10, 10, 5),
                                                ("2g2f", None, 20, 10, 5),
                                                ("5g5f", None, 30, 10, 5)])])
    write_db2016(tmp_path / "2.db", [(STARTPOS, [("7g7f", "3c3d", 99, 9, 500),   # shallower
                                                ("2g2f", "8c8d", 98, 10, 6),     # more counted
                                                ("5g5f", "8c8d", 97, 11, 1)])])  # deeper
    run_cli("import", tmp_path / "1.db", "-b", book)
    run_cli("import", tmp_path / "2.db", "-b", book)
    assert book_entries(book) == {
        (START_KEY, "7g7f", None, 10, 10, 5),
        (START_KEY, "2g2f", "8c8d", 98, 10, 6),
        (START_KEY, "5g5f", "8c8d", 97, 11, 1),
    }


# ---------------------------------------------------------------- --strict


def test_strict_leaves_existing_book_untouched(tmp_path):
    book = tmp_path / "book.sqlite"
    board = cshogi.Board()
    write_db2016(tmp_path / "good.db", [(board.sfen(), [("7g7f", "3c3d", 30, 10, 2)])])
    run_cli("import", tmp_path / "good.db", "-b", book)
    before = dump_book(book)
    source = write_messy(tmp_path / "messy.db", False, False)
    result = run_cli("import", "--strict", source, "-b", book, expect=2)
    assert "Traceback" not in result.output + result.stderr
    assert "error" in result.stderr
    after = dump_book(book)
    assert after == before
    assert after["moves"] == [(START_KEY, "7g7f", "3c3d", 30, 10, 2)]


def test_strict_does_not_create_a_new_book(tmp_path):
    book = tmp_path / "new.sqlite"
    source = write_messy(tmp_path / "messy.db", True, False)
    run_cli("import", "--strict", source, "-b", book, expect=2)
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new.sqlite"))
    assert leftovers == []


def test_strict_accepts_a_clean_file(tmp_path):
    write_db2016(tmp_path / "good.db", [(STARTPOS, [("7g7f", "3c3d", 30, 10, 2)])],
                 crlf=True, bom=True)
    result = run_cli("import", "--strict", tmp_path / "good.db", "-b", tmp_path / "b.sqlite")
    assert result.stderr == ""
    assert book_entries(tmp_path / "b.sqlite") == {(START_KEY, "7g7f", "3c3d", 30, 10, 2)}


# ---------------------------------------------------------------- merging rule on import


@st.composite
def overlapping_files(draw):
    """Two or three files over a few positions, with repeated (position, move) pairs."""
    positions = []
    for _ in range(draw(st.integers(1, 3))):
        board, _ = draw(walks(max_plies=8))
        positions.append(board)
    files = []
    for _ in range(draw(st.integers(2, 3))):
        blocks = []
        for _ in range(draw(st.integers(1, 4))):
            board = draw(st.sampled_from(positions))
            legal = legal_usis(board)[:4]    # few candidate moves: many repeats
            moves = []
            for usi in draw(st.lists(st.sampled_from(legal), max_size=4)) if legal else []:
                moves.append((usi, None, draw(st.integers(-50, 50)),
                              draw(st.one_of(st.none(), st.integers(0, 3))),
                              draw(st.integers(0, 4))))
            blocks.append((key_of(board), draw(st.integers(1, 60)), moves))
        files.append(blocks)
    return files


def expected_by_rule(files):
    """Apply the documented rule in file order: an entry replaces the stored one only
    if it is deeper ('none' shallowest), or as deep with a greater count."""
    book: dict[tuple[str, str], tuple] = {}
    plies: dict[str, int] = {}
    for blocks in files:
        for key, ply, moves in blocks:
            plies[key] = min(ply, plies.get(key, ply))
            for move in moves:
                usi, _p, _v, depth, count = move
                old = book.get((key, usi))
                depth_rank = -1 if depth is None else depth
                if old is None:
                    book[(key, usi)] = move
                else:
                    old_rank = -1 if old[3] is None else old[3]
                    if depth_rank > old_rank or (depth_rank == old_rank and count > old[4]):
                        book[(key, usi)] = move
    entries = {(key, *move) for (key, _u), move in book.items()}
    return entries, plies


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(overlapping_files())
def test_duplicates_follow_the_merge_rule(files):
    expected, plies = expected_by_rule(files)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = [write_db2016(tmp / f"f{i}.db", [(f"{k} {p}", m) for k, p, m in blocks])
                 for i, blocks in enumerate(files)]
        run_cli("import", *paths, "-b", tmp / "together.sqlite")
        for path in paths:
            run_cli("import", path, "-b", tmp / "apart.sqlite")
        together, apart = book_entries(tmp / "together.sqlite"), book_entries(tmp / "apart.sqlite")
        got_plies = {s: p for s, _z, p, _t in dump_book(tmp / "together.sqlite")["positions"]}
    assert together == expected
    assert apart == expected
    assert got_plies == plies


def test_reimport_changes_nothing(tmp_path):
    board = cshogi.Board()
    blocks = []
    for usi in ("7g7f", "3c3d", "2g2f", "4c4d"):
        blocks.append((board.sfen(), [(u, None, 3, 3, 3) for u in legal_usis(board)[:3]]))
        board.push_usi(usi)
    write_db2016(tmp_path / "a.db", blocks)
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "b.sqlite")
    before = dump_book(tmp_path / "b.sqlite")
    summary = json.loads(run_cli("import", "--json", tmp_path / "a.db",
                                 "-b", tmp_path / "b.sqlite").stdout)
    assert (summary["positions_added"], summary["moves_added"], summary["moves_updated"]) \
        == (0, 0, 0)
    after = dump_book(tmp_path / "b.sqlite")
    assert after["positions"] == before["positions"] and after["moves"] == before["moves"]
    assert len(after["runs"]) == 2


def test_export_leaves_no_temporary_files(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "b.sqlite")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "book.db").write_text("old content\n")
    run_cli("export", "-o", out_dir / "book.db", "-b", tmp_path / "b.sqlite")
    run_cli("export", "--format", "apery", "-o", out_dir / "book.bin", "-b", tmp_path / "b.sqlite")
    assert sorted(p.name for p in out_dir.iterdir()) == ["book.bin", "book.db"]
    assert parse_db2016((out_dir / "book.db").read_text()).entries() == {
        (START_KEY, "7g7f", None, 1, 1, 1)}


# ---------------------------------------------------------------- reader fuzzing

READER_FUZZ = r'''
import sys
import cshogi
from hypothesis import given, settings, strategies as st, HealthCheck
import numpy as np
from bookgen.formats.db2016 import parse_chunk, usi_names

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
POOL = [
    "#YANEURAOU-DB2016 1.00", "# NOE:3,SORTED", "//x", "", "sfen " + START,
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2",
    "sfen lnsgkgsnl/1r5b1/p1ppppppp/9/1p5P1/9/PPPPPPP1P/1BG4R1/LNS1KGSNL w - 6",
    "sfen 9/9/9/9/9/9/9/9/9 b - 0", "none none 1 1 1", "7g7f 3c3d 42 24 17",
    "2g2f none 38 24 3", "3c3d 2g2f 0 0 1", "8c8d", "P*5e none 0 0 1", "7g7f+ none",
    "4c4d 7g7f none none 3", "1g1f 1c1d -5 2 9223372036854775807",
    "7g7f 3c3d +5 1 1", "7g7f 3c3d 1_0 1 1", "7g7f 3c3d 1e3 1 1", "7g7f 3c3d 99999999999 1 1",
    "7g7f 3c3d 5 -1 1", "7g7f 3c3d 5 1 none", "7g7f  3c3d 5 1 1", " 7g7f 3c3d 5 1 1",
    "7g7f 3c3d 5 1 1 extra", "7g7f 3c3d 5 1 1 \u3000", "7g7f\t3c3d 5 1 1", "7g7f 3c3d 05 007 0",
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 1P 1",
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1234567890",
    "sfen lnsgkgsnl/1r5b1/ppppppppp/45/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
    "sfen 4k4/9/9/9/4R4/9/9/9/4K4 w - 1", "5a5b none 1 1 1",
]
CHARS = "0123456789abcdefghiPLNSGBRKplnsgbrk+*/- \t#_.eE\u00e9\u3000\x0b"


def same(block, other):
    for name in ("sfen", "problems", "skipped"):
        assert getattr(block, name) == getattr(other, name), name
    for name in ("ply", "zobrist", "turn", "book_key", "position", "move", "ponder", "value",
                 "depth", "count"):
        assert np.array_equal(getattr(block, name), getattr(other, name)), name
    assert list(block.skipped) == list(other.skipped)   # in the order met


def mutate(args):
    line, index, char, mode = args
    index %= len(line) + 1
    if mode == 0:
        return line[:index] + char + line[index + 1:]
    if mode == 1:
        return line[:index] + char + line[index:]
    return line[:index] + line[index + 1:]


LINE = st.one_of(
    st.sampled_from(POOL),
    st.tuples(st.sampled_from(POOL), st.integers(0, 90), st.sampled_from(list(CHARS)),
              st.integers(0, 2)).map(mutate),
    st.text(CHARS, max_size=30),
)


@settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(LINE, max_size=25))
def fuzz(lines):
    data = "\n".join(lines).encode()
    block = parse_chunk(("fuzz.db", 1, data, len(data)))
    # The bulk path reads the lines as the line reader does.
    same(block, parse_chunk(("fuzz.db", 1, data, len(data)), bulk=False))
    positions = block.position_rows()
    # Whatever was accepted is a real position with legal moves.
    for _i, sfen, zobrist, ply, turn in positions:
        board = cshogi.Board(sfen + " 1")
        assert board.sfen().rsplit(" ", 1)[0] == sfen
        assert turn == board.turn
        assert zobrist % 2**64 == board.zobrist_hash()
    for local, move, ponder, value, depth, count in block.move_rows():
        board = cshogi.Board(positions[local][1] + " 1")
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        assert move in legal, (move, sink.positions[local][0])
        if ponder is not None:
            board.push_usi(move)
            assert ponder in {cshogi.move_to_usi(m) for m in board.legal_moves}
        assert isinstance(count, int) and count >= 0
    # Nothing is lost silently: an entry is either imported or counted as skipped.
    nonblank = [l for l in lines if l.strip() and not l.strip().startswith(("#", "//"))]
    accounted = len(positions) + len(block.move) + sum(block.skipped.values())
    assert accounted == len(nonblank), (accounted, len(nonblank), lines)


fuzz()
print("ok")
'''


def test_db2016_reader_fuzz_in_subprocess(tmp_path):
    from conftest import run_script

    proc = run_script(tmp_path, READER_FUZZ, 400)
    assert proc.stdout.strip().endswith("ok")


# ---------------------------------------------------------------- parallel reading

import io  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from unittest import mock  # noqa: E402

import bookgen.bookfiles.importer as importer_module  # noqa: E402
import bookgen.formats.db2016 as db2016_module  # noqa: E402
from bookgen.bookfiles.importer import ImportSettings, import_books  # noqa: E402
from bookgen.diagnostics import Diagnostics  # noqa: E402

JUNK_LINES = [
    "7g7e none 0 0 1", "none none 1 1 1", "sfen 9/9/9/9/9/9/9/9/9 b - 0",
    "2g2f none abc", "# comment", "// comment", "", "   ", "sfen garbage", "P*5e",
]


@contextmanager
def tiny_parallel_chunks(chunk_bytes: int):
    """Make every file 'large' and cut it into chunks of about ``chunk_bytes``."""
    with mock.patch.object(db2016_module, "PARALLEL_MIN_BYTES", 1), \
            mock.patch.object(db2016_module, "CHUNK_BYTES", chunk_bytes):
        yield


def import_with(path: Path, book: Path, workers: int):
    stream = io.StringIO()
    diagnostics = Diagnostics(stream=stream)
    summary = import_books(book, [path], ImportSettings(format="db2016", parser_workers=workers),
                           diagnostics=diagnostics, progress=False)
    return summary, [(p.source, p.line, p.reason) for p in diagnostics.problems], stream.getvalue()


@st.composite
def messy_files(draw):
    blocks = draw(db2016_inputs())
    lines = []
    if draw(st.booleans()):
        lines.append(DB2016_HEADER)
    for _key, written, ply, moves in blocks:
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(JUNK_LINES)))
        lines.append(f"sfen {written} {ply}")
        for move in moves:
            lines.append(" ".join("none" if f is None else str(f) for f in move))
            if draw(st.integers(0, 6)) == 0:
                lines.append(draw(st.sampled_from(JUNK_LINES)))
    newline = "\r\n" if draw(st.booleans()) else "\n"
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    bom = draw(st.booleans())
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode(), draw(st.integers(16, 400))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messy_files())
def test_parallel_reader_matches_sequential(case):
    data, chunk_bytes = case
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = tmp / "in.db"
        source.write_bytes(data)
        seq_summary, seq_problems, seq_err = import_with(source, tmp / "seq.sqlite", 1)
        with tiny_parallel_chunks(chunk_bytes):
            par_summary, par_problems, par_err = import_with(source, tmp / "par.sqlite", 2)
        seq_dump, par_dump = dump_book(tmp / "seq.sqlite"), dump_book(tmp / "par.sqlite")
    assert par_dump["positions"] == seq_dump["positions"]
    assert par_dump["moves"] == seq_dump["moves"]
    assert par_problems == seq_problems          # same lines, same reasons, same order
    assert par_err == seq_err
    for key in ("positions_read", "moves_read", "positions_added", "moves_added",
                "moves_updated", "problems"):
        assert getattr(par_summary, key) == getattr(seq_summary, key), key
    nonzero = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
    assert nonzero(par_summary.skipped) == nonzero(seq_summary.skipped)


def test_parallel_import_summary_matches_sequential(tmp_path):
    """The CLI summary of a (parallel) import of a file with problems is the same as
    for a sequential import: no phantom 'skipped 0 entries'."""
    source = write_messy(tmp_path / "messy.db", crlf=False, bom=False)
    seq = run_cli("import", "--json", source, "-b", tmp_path / "seq.sqlite")
    with tiny_parallel_chunks(64):
        with mock.patch.object(importer_module.os, "cpu_count", return_value=2):
            par = run_cli("import", "--json", source, "-b", tmp_path / "par.sqlite")
            text = run_cli("import", source, "-b", tmp_path / "par2.sqlite").stdout
    seq_summary, par_summary = json.loads(seq.stdout), json.loads(par.stdout)
    assert book_entries(tmp_path / "par.sqlite") == MESSY_EXPECTED
    assert par.stderr == seq.stderr
    assert par_summary["skipped"] == seq_summary["skipped"], (
        f"parallel: {par_summary['skipped']}, sequential: {seq_summary['skipped']}")
    assert "skipped 0" not in text and " 0 entries" not in text, text


@pytest.mark.slow
def test_large_file_goes_through_the_parallel_reader(tmp_path, large_db2016):
    """A DB2016 file above the parallel threshold, imported by the real CLI process."""
    import subprocess

    from conftest import PYTHON, ROOT

    path, blocks, bad_position_line, bad_move_line = large_db2016
    assert path.stat().st_size >= db2016_module.PARALLEL_MIN_BYTES
    proc = subprocess.run([PYTHON, "-m", "bookgen.cli", "import", "--json", str(path),
                           "-b", str(tmp_path / "b.sqlite")], capture_output=True, text=True,
                          timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    reports = [line for line in proc.stderr.splitlines() if line.strip()]
    reported = [int(re.match(rf"bookgen: {re.escape(str(path))}:(\d+): ", r).group(1))
                for r in reports]
    assert reported == [bad_position_line, bad_move_line], reports
    expected = set()
    for sfen, moves in blocks:
        if sfen.startswith("9/9"):
            continue
        key = " ".join(sfen.split(" ")[:3])
        expected.update((key, *move) for move in moves if isinstance(move, tuple))
    assert book_entries(tmp_path / "b.sqlite") == expected
    assert summary["positions_added"] == len({" ".join(s.split(" ")[:3]) for s, _m in blocks}) - 1
    assert {k: v for k, v in summary["skipped"].items() if v} == {"positions": 1, "moves": 2}


def test_unknown_ply_never_beats_a_known_one(tmp_path):
    """A position written without a move number is exported with 0; importing
    that export together with the real ply keeps the real ply."""
    start = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
    first = tmp_path / "no_ply.db"
    first.write_text(f"#YANEURAOU-DB2016 1.00\nsfen {start}\n7g7f none 10 5 1\n")
    book = tmp_path / "book.sqlite"
    assert run_cli("import", first, "-b", book).exit_code == 0
    exported = tmp_path / "out.db"
    assert run_cli("export", "-o", exported, "-b", book).exit_code == 0
    assert f"sfen {start} 0\n" in exported.read_text()
    second = tmp_path / "with_ply.db"
    second.write_text(f"#YANEURAOU-DB2016 1.00\nsfen {start} 7\n2g2f none 5 5 1\n")
    again = tmp_path / "again.sqlite"
    assert run_cli("import", exported, second, "-b", again).exit_code == 0
    assert run_cli("export", "-o", exported, "-b", again).exit_code == 0
    assert f"sfen {start} 7\n" in exported.read_text()
