"""The command line: stats, show, merge, error handling and help."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.cli import main as cli_main
from bookgen.store import Book
from conftest import (
    PYTHON,
    ROOT,
    STARTPOS,
    book_entries,
    dump_book,
    key_of,
    legal_usis,
    random_walk,
    replies_after,
    run_cli,
    write_db2016,
)

START_KEY = STARTPOS.rsplit(" ", 1)[0]
DESCRIBE = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


# ---------------------------------------------------------------- stats


def expected_describe(values: list[float]) -> dict[str, float | None]:
    """pandas-style describe() computed with numpy: sample std, linear percentiles."""
    if not values:
        return {"count": 0.0, **{k: None for k in DESCRIBE[1:]}}
    array = np.array(values, dtype=float)
    return {
        "count": float(len(array)),
        "mean": float(array.mean()),
        "std": float(array.std(ddof=1)) if len(array) > 1 else None,
        "min": float(array.min()),
        "25%": float(np.percentile(array, 25)),
        "50%": float(np.percentile(array, 50)),
        "75%": float(np.percentile(array, 75)),
        "max": float(array.max()),
    }


def assert_describe(got: dict, expected: dict, name: str) -> None:
    assert set(DESCRIBE) <= set(got), f"{name}: keys {sorted(got)}"
    for key in DESCRIBE:
        if expected[key] is None:
            assert got[key] is None, f"{name}[{key}] = {got[key]!r}, expected None"
        else:
            assert got[key] == pytest.approx(expected[key], rel=1e-9, abs=1e-9), \
                f"{name}[{key}] = {got[key]!r}, expected {expected[key]!r}"


def random_stats_book(seed: int, tmp_path: Path):
    """A DB2016 file of random positions; returns its path and the expected stats."""
    rng = random.Random(seed)
    ply_of: dict[str, int] = {}
    turn_of: dict[str, str] = {}
    moves_of: dict[str, dict[str, int | None]] = {}
    blocks = []
    for _ in range(rng.randint(15, 40)):
        board, _ = random_walk(rng, rng.randint(0, 30))
        key = key_of(board)
        legal = legal_usis(board)
        if not legal:
            continue
        ply = rng.randint(1, 200)
        chosen = [u for u in rng.sample(legal, min(len(legal), rng.randint(0, 4)))
                  if u not in moves_of.get(key, {})]
        moves = []
        for usi in chosen:
            value = None if rng.random() < 0.15 else rng.randint(-2000, 2000)
            moves.append((usi, None, value, rng.randint(0, 20), rng.randint(1, 50)))
            moves_of.setdefault(key, {})[usi] = value
        ply_of[key] = min(ply, ply_of.get(key, ply))
        turn_of[key] = key.split(" ")[1]
        blocks.append((f"{key} {ply}", moves))
    write_db2016(tmp_path / f"stats{seed}.db", blocks)
    best = {"b": [], "w": []}
    for key, moves in moves_of.items():
        values = [v for v in moves.values() if v is not None]
        if values:
            best[turn_of[key]].append(max(values))
    expected = {
        "positions": len(ply_of),
        "moves": sum(len(m) for m in moves_of.values()),
        # Book positions are those with moves.
        "ply": expected_describe([ply for key, ply in ply_of.items() if moves_of.get(key)]),
        "value_black": expected_describe(best["b"]),
        "value_white": expected_describe(best["w"]),
        "positions_with_moves": sum(1 for m in moves_of.values() if m),
    }
    return tmp_path / f"stats{seed}.db", expected


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_stats_json_matches_independent_computation(tmp_path, seed):
    source, expected = random_stats_book(seed, tmp_path)
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    stats = json.loads(run_cli("stats", "--json", "-b", book).stdout)
    for key in ("positions", "moves", "ply", "value_black", "value_white"):
        assert key in stats, key
    assert stats["positions"] == expected["positions"]
    assert stats["moves"] == expected["moves"]
    assert stats["positions_with_moves"] == expected["positions_with_moves"]
    for name in ("ply", "value_black", "value_white"):
        assert_describe(stats[name], expected[name], name)


def test_stats_text(tmp_path):
    source, expected = random_stats_book(5, tmp_path)
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    text = run_cli("stats", "-b", book).stdout
    assert re.search(rf"positions:\s+{expected['positions']}\b", text), text
    assert re.search(rf"moves:\s+{expected['moves']}\b", text), text
    header = next(line for line in text.splitlines() if "ply" in line and "value_black" in line)
    assert header.split() == ["ply", "value_black", "value_white"]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.split() and line.split()[0] in DESCRIBE}
    assert set(rows) == set(DESCRIBE)
    for column, name in enumerate(("ply", "value_black", "value_white")):
        for key in DESCRIBE:
            want = expected[name][key]
            cell = rows[key][column]
            if want is None:
                assert cell in ("-", "NaN", "nan"), (name, key, cell)
            else:
                assert float(cell) == pytest.approx(want, abs=0.006), (name, key, cell)


def test_stats_counts_link_runs_apart(tmp_path):
    """One import writes two runs rows, the import and its stored links' `link` run:
    stats says one run and the link run beside it; a merge adds one more of each, a
    refine minimax one run and no link run (the links are complete)."""
    def after(*moves):
        board = cshogi.Board()
        for move in moves:
            board.push_usi(move)
        return board.sfen()

    # 7g7f 3c3d 2g2f and 2g2f 3c3d 7g7f meet: the second's 7g7f is a transposition row
    source = tmp_path / "t.db"
    write_db2016(source, [
        (STARTPOS, [("7g7f", None, 30, 1, 2), ("2g2f", None, 20, 1, 1)]),
        (after("7g7f"), [("3c3d", None, -20, 1, 1)]),
        (after("2g2f"), [("3c3d", None, -10, 1, 1)]),
        (after("7g7f", "3c3d"), [("2g2f", None, 20, 1, 1)]),
        (after("2g2f", "3c3d"), [("1g1f", None, 20, 1, 1)]),
        (after("7g7f", "3c3d", "2g2f"), [("8c8d", None, -20, 1, 1)]),
    ])
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    dumped = dump_book(book)
    assert [row[1] for row in dumped["runs"]] == ["import"]
    assert [row[1] for row in dumped["link_runs"]] == ["link"]
    stats = json.loads(run_cli("stats", "--json", "-b", book).stdout)
    assert (stats["runs"], stats["link_runs"]) == (1, 1)
    assert re.search(r"^runs:\s+1 \(\+1 link\)$", run_cli("stats", "-b", book).stdout, re.M)
    run_cli("refine", "minimax", "-b", book)
    merged = tmp_path / "merged.sqlite"
    run_cli("merge", book, "-o", merged)
    dumped = dump_book(merged)
    stats = json.loads(run_cli("stats", "--json", "-b", merged).stdout)
    assert (stats["runs"], stats["link_runs"]) == (len(dumped["runs"]),
                                                   len(dumped["link_runs"]))
    stats = json.loads(run_cli("stats", "--json", "-b", book).stdout)
    assert (stats["runs"], stats["link_runs"]) == (2, 1)
    # a book without link runs: the line as before
    empty = tmp_path / "empty.sqlite"
    Book(empty).close()
    assert re.search(r"^runs:\s+0$", run_cli("stats", "-b", empty).stdout, re.M)


def test_stats_small_edge_cases(tmp_path):
    # One white position (std undefined), no black value at all.
    after = cshogi.Board()
    after.push_usi("7g7f")
    write_db2016(tmp_path / "e.db", [
        (after.sfen(), [("3c3d", None, -40, 1, 1), ("8c8d", None, 25, 1, 1)]),
        (STARTPOS, [("2g2f", None, None, None, 1)]),
    ])
    run_cli("import", tmp_path / "e.db", "-b", tmp_path / "b.sqlite")
    stats = json.loads(run_cli("stats", "--json", "-b", tmp_path / "b.sqlite").stdout)
    assert stats["positions"] == 2 and stats["moves"] == 3
    assert_describe(stats["value_white"], expected_describe([25]), "value_white")
    assert_describe(stats["value_black"], expected_describe([]), "value_black")
    assert_describe(stats["ply"], expected_describe([1, 2]), "ply")
    # The text form works with empty columns too.
    run_cli("stats", "-b", tmp_path / "b.sqlite")


def test_stats_of_empty_book(tmp_path):
    Book(tmp_path / "b.sqlite").close()   # (importing an empty DB2016 book is an error)
    stats = json.loads(run_cli("stats", "--json", "-b", tmp_path / "b.sqlite").stdout)
    assert stats["positions"] == 0 and stats["moves"] == 0
    assert stats["ply"]["count"] == 0
    run_cli("stats", "-b", tmp_path / "b.sqlite")


# ---------------------------------------------------------------- show


@pytest.fixture
def show_book(tmp_path):
    after = cshogi.Board()
    after.push_usi("7g7f")
    write_db2016(tmp_path / "s.db", [
        (STARTPOS, [("2g2f", "8c8d", 30, 12, 40), ("7g7f", "3c3d", 45, 12, 60),
                    ("5g5f", None, None, None, 2)]),
        (after.sfen().replace(" 2", " 9"),
         [("3c3d", None, -20, 8, 5), ("8c8d", "2g2f", -35, 8, 9)]),
    ])
    book = tmp_path / "book.sqlite"
    run_cli("import", tmp_path / "s.db", "-b", book)
    return book, key_of(after)


def test_show_default_is_startpos(show_book):
    book, _ = show_book
    result = run_cli("show", "-b", book)
    out = result.stdout
    assert f"sfen {START_KEY}" in out
    assert "ply 1, 3 book moves" in out
    lines = [line.split() for line in out.splitlines()]
    move_lines = [fields for fields in lines if fields and fields[0] in ("2g2f", "7g7f", "5g5f")]
    assert [fields[0] for fields in move_lines] == ["7g7f", "2g2f", "5g5f"]
    assert move_lines[0] == ["7g7f", "3c3d", "45", "12", "60"]
    assert move_lines[2] == ["5g5f", "none", "none", "none", "2"]


@pytest.mark.parametrize("args", [
    ["startpos", "moves", "7g7f"],
    ["startpos moves 7g7f"],
    ["position", "startpos", "moves", "7g7f"],
    ["sfen", "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL", "w", "-", "2"],
    ["sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 moves 7g7f"],
])
def test_show_position_forms(show_book, args):
    book, after_key = show_book
    info = json.loads(run_cli("show", "--json", "-b", book, *args).stdout)
    assert info["sfen"] == after_key
    assert info["in_book"] is True
    assert info["ply"] == 9          # the ply stored in the book, not the path length
    assert [(m["move"], m["ponder"], m["value"], m["depth"], m["count"]) for m in info["moves"]] \
        == [("3c3d", None, -20, 8, 5), ("8c8d", "2g2f", -35, 8, 9)]
    text = run_cli("show", "-b", book, *args).stdout
    assert f"sfen {after_key}" in text and "3c3d" in text


def test_show_position_not_in_book(show_book):
    book, _ = show_book
    board = cshogi.Board()
    board.push_usi("2g2f")
    info = json.loads(run_cli("show", "--json", "-b", book, "startpos moves 2g2f").stdout)
    assert info["sfen"] == key_of(board) and info["in_book"] is False and info["moves"] == []
    assert "not in the book" in run_cli("show", "-b", book, "startpos moves 2g2f").stdout


def test_show_svg(show_book, tmp_path):
    book, _ = show_book
    svg = tmp_path / "board.svg"
    run_cli("show", "-b", book, "--svg", svg, "startpos moves 7g7f")
    text = svg.read_text(encoding="utf-8")
    assert "<svg" in text and text.rstrip().endswith("</svg>")


@pytest.mark.parametrize("spec", [
    "startpos moves 7g7e",
    "startpos moves 7g7f+",
    "sfen 9/9/9/9/9/9/9/9/9 b - 1",
    "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSN b - 1",
    "garbage",
    "startpos 7g7f",
])
def test_show_bad_position(show_book, spec):
    book, _ = show_book
    result = run_cli("show", "-b", book, spec, expect=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bookgen: error:"), result.stderr
    assert "Traceback" not in result.output + result.stderr


@pytest.mark.parametrize("spec,moves", [("7g7f", "7g7f"), ("7g7f 3c3d", "7g7f 3c3d"),
                                        ("moves 7g7f", "7g7f"), ("P*5e", "P*5e")])
def test_show_moves_without_a_position_suggest_startpos(show_book, spec, moves):
    book, _ = show_book
    result = run_cli("show", "-b", book, *spec.split(), expect=2)
    assert result.stderr.strip() == (
        f"bookgen: error: position {spec!r}: starts with a move, not a position; for moves "
        f"from the initial position write 'startpos moves {moves}'")


def test_show_svg_says_where_it_wrote(show_book, tmp_path):
    book, after_key = show_book
    svg = tmp_path / "board.svg"
    result = run_cli("show", "-b", book, "--svg", svg, "startpos moves 7g7f")
    assert result.stdout.rstrip().endswith(f"{svg}: board written")
    assert svg.exists()
    # With --json the confirmation goes to stderr: stdout stays one JSON document.
    result = run_cli("show", "--json", "-b", book, "--svg", svg, "startpos moves 7g7f")
    assert json.loads(result.stdout)["sfen"] == after_key
    assert result.stderr.strip() == f"{svg}: board written"


# ---------------------------------------------------------------- merge


def test_merge_rules(tmp_path):
    after = cshogi.Board()
    after.push_usi("7g7f")
    after_key = key_of(after)
    far, _ = random_walk(random.Random(3), 12)
    far_key = key_of(far)
    far_move = legal_usis(far)[0]
    write_db2016(tmp_path / "a.db", [
        (f"{START_KEY} 7", [("7g7f", "3c3d", 30, 10, 5),
                            ("2g2f", "8c8d", 20, 5, 100),
                            ("6g6f", None, 1, None, 1000),
                            ("1g1f", None, 11, 4, 4)]),
        (f"{after_key} 9", [("3c3d", None, -10, 3, 3)]),
    ])
    write_db2016(tmp_path / "b.db", [
        (f"{START_KEY} 3", [("7g7f", "8c8d", 50, 12, 1),     # deeper: wins over A
                            ("2g2f", None, 21, 5, 200),       # same depth, more counted: wins
                            ("6g6f", "8c8d", 2, 0, 1),        # a depth beats no depth
                            ("1g1f", "1c1d", 99, 4, 4)]),     # full tie with A: A stays
        (f"{after_key} 30", [("8c8d", None, -15, 2, 2)]),
    ])
    write_db2016(tmp_path / "c.db", [
        (f"{START_KEY} 5", [("7g7f", "3c3d", 99, 12, 1),     # tie with B: B stays
                            ("2g2f", None, 0, 4, 999),        # shallower: loses
                            ("5g5f", None, 7, 1, 1)]),        # only in C
        (f"{after_key} 2", [("3c3d", "2g2f", -11, 3, 4)]),    # more counted than A
        (f"{far_key} 13", [(far_move, None, 3, 3, 3)]),       # only in C
    ])
    books = []
    for name in "abc":
        books.append(tmp_path / f"{name}.sqlite")
        run_cli("import", tmp_path / f"{name}.db", "-b", books[-1])
    out = tmp_path / "merged.sqlite"
    result = json.loads(run_cli("merge", "--json", *books, "-o", out).stdout)
    assert book_entries(out) == {
        (START_KEY, "7g7f", "8c8d", 50, 12, 1),
        (START_KEY, "2g2f", None, 21, 5, 200),
        (START_KEY, "6g6f", "8c8d", 2, 0, 1),
        (START_KEY, "1g1f", None, 11, 4, 4),
        (START_KEY, "5g5f", None, 7, 1, 1),
        (after_key, "3c3d", "2g2f", -11, 3, 4),
        (after_key, "8c8d", None, -15, 2, 2),
        (far_key, far_move, None, 3, 3, 3),
    }
    plies = {sfen: ply for sfen, _z, ply, _t in dump_book(out)["positions"]}
    assert plies == {START_KEY: 3, after_key: 2, far_key: 13}
    # All three sources counted.
    assert result["positions_added"] == 3 and result["positions"] == 3
    assert result["moves_added"] == 8 and result["moves"] == 8
    assert result["moves_updated"] == 4        # B: 7g7f, 2g2f, 6g6f; C: after/3c3d
    runs = dump_book(out)["runs"]
    assert len(runs) == 1 and json.loads(runs[0][2])["sources"] == [str(b) for b in books]
    counts = json.loads(runs[0][10])                      # counts column
    assert counts["sources"] == 3 and set(counts) == {"sources", "links"}
    # Inputs are not modified.
    assert book_entries(books[0]) == {
        (START_KEY, "7g7f", "3c3d", 30, 10, 5), (START_KEY, "2g2f", "8c8d", 20, 5, 100),
        (START_KEY, "6g6f", None, 1, None, 1000), (START_KEY, "1g1f", None, 11, 4, 4),
        (after_key, "3c3d", None, -10, 3, 3)}


def test_merge_into_existing_output_and_export(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    write_db2016(tmp_path / "b.db",
                 [(STARTPOS, [("7g7f", None, 2, 2, 2), ("2g2f", None, 0, 0, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "out.sqlite")
    run_cli("import", tmp_path / "b.db", "-b", tmp_path / "b.sqlite")
    run_cli("merge", tmp_path / "b.sqlite", "-o", tmp_path / "out.sqlite")
    assert book_entries(tmp_path / "out.sqlite") == {(START_KEY, "7g7f", None, 2, 2, 2),
                                                     (START_KEY, "2g2f", None, 0, 0, 1)}
    assert [r[1] for r in dump_book(tmp_path / "out.sqlite")["runs"]] == ["import", "merge"]


def test_merge_errors(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "a.sqlite")
    before = dump_book(tmp_path / "a.sqlite")
    out = tmp_path / "m.sqlite"
    result = run_cli("merge", tmp_path / "a.sqlite", tmp_path / "missing.sqlite", "-o", out,
                     expect=2)
    assert "missing.sqlite" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
    run_cli("merge", tmp_path / "a.sqlite", "-o", tmp_path / "a.sqlite", expect=2)
    assert dump_book(tmp_path / "a.sqlite") == before


# ---------------------------------------------------------------- errors and help


def test_export_to_a_directory(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "a.sqlite")
    target = tmp_path / "outdir"
    target.mkdir()
    for fmt in ("db2016", "apery"):
        result = run_cli("export", "--format", fmt, "-o", target, "-b", tmp_path / "a.sqlite",
                         expect=2)
        assert "Traceback" not in result.output + result.stderr
        assert list(target.iterdir()) == []


def test_export_into_missing_directory(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "a.sqlite")
    result = run_cli("export", "-o", tmp_path / "nodir" / "x.db", "-b", tmp_path / "a.sqlite",
                     expect=2)
    assert "Traceback" not in result.stderr


def test_import_missing_file(tmp_path):
    result = run_cli("import", tmp_path / "nope.db", "-b", tmp_path / "b.sqlite", expect=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "nope.db" in lines[0]
    assert not (tmp_path / "b.sqlite").exists()


def test_import_unknown_text_file(tmp_path):
    (tmp_path / "x.txt").write_text("hello\n")
    run_cli("import", tmp_path / "x.txt", "-b", tmp_path / "b.sqlite", expect=2)
    assert not (tmp_path / "b.sqlite").exists()


def test_import_into_missing_directory(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    result = run_cli("import", tmp_path / "a.db", "-b", tmp_path / "no" / "b.sqlite", expect=2)
    assert "Traceback" not in result.stderr


def test_import_book_into_itself(tmp_path):
    write_db2016(tmp_path / "a.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    run_cli("import", tmp_path / "a.db", "-b", tmp_path / "a.sqlite")
    run_cli("import", tmp_path / "a.sqlite", "-b", tmp_path / "a.sqlite", expect=2)


def test_help_for_every_command():
    commands = sorted(cli_main.commands)
    assert {"import", "export", "stats", "show", "merge"} <= set(commands)
    result = run_cli("--help")
    for name in commands:
        assert name in result.stdout
        sub = run_cli(name, "--help")
        assert "Usage:" in sub.stdout and name in sub.stdout
        assert run_cli(name, "-h").stdout == sub.stdout
    assert "0." in run_cli("--version").stdout


# Loaded by a command that runs, never by help texts (nor by `import bookgen.cli`).
HEAVY_LIBRARIES = ("numpy", "pandas", "scipy", "torch", "matplotlib")

HELP_IMPORTS = """
import sys
import click
from bookgen.cli import main

def paths(group, prefix):
    for name, command in sorted(group.commands.items()):
        yield [*prefix, name]
        if isinstance(command, click.Group):
            yield from paths(command, [*prefix, name])

for path in [[], *paths(main, [])]:
    try:
        main([*path, "--help"], prog_name="bookgen")
    except SystemExit as done:
        assert done.code == 0, (path, done.code)
print("loaded:", " ".join(sorted(m for m in HEAVY if m in sys.modules)))
"""


def test_help_loads_no_heavy_library():
    """`bookgen --help` and every command's --help import no numpy, pandas, scipy,
    torch or matplotlib: command modules import the library only when they run."""
    done = subprocess.run([PYTHON, "-c", f"HEAVY = {HEAVY_LIBRARIES!r}\n" + HELP_IMPORTS],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Usage: bookgen") > 20
    assert done.stdout.splitlines()[-1] == "loaded: ", done.stdout.splitlines()[-1]


def test_unknown_command_and_option():
    run_cli("frobnicate", expect=2)
    run_cli("stats", "--no-such-option", expect=2)


def test_ponder_roundtrip_through_show(tmp_path):
    """A ponder written in a file is what show reports (legal reply of the move)."""
    board = cshogi.Board()
    replies = replies_after(board, "7g7f")
    write_db2016(tmp_path / "p.db", [(STARTPOS, [("7g7f", replies[0], 5, 5, 5)])])
    run_cli("import", tmp_path / "p.db", "-b", tmp_path / "b.sqlite")
    info = json.loads(run_cli("show", "--json", "-b", tmp_path / "b.sqlite").stdout)
    assert info["moves"][0]["ponder"] == replies[0]


def test_paths_with_spaces_and_uri_characters(tmp_path):
    """Books are opened through SQLite URIs: '#', '?', '%', spaces and non-ASCII in
    paths must not change which file is used."""
    where = tmp_path / "my books #1 %41 ü?x=1&y"
    where.mkdir()
    write_db2016(where / "in #1.db", [(STARTPOS, [("7g7f", None, 1, 1, 1)])])
    write_db2016(where / "in %2.db", [(STARTPOS, [("2g2f", None, 2, 2, 2)])])
    first, second = where / "a #1 ü.sqlite", where / "b %41?.sqlite"
    run_cli("import", where / "in #1.db", "-b", first)
    run_cli("import", where / "in %2.db", "-b", second)
    run_cli("merge", first, second, "-o", where / "m&x=1.sqlite")
    assert book_entries(where / "m&x=1.sqlite") == {(START_KEY, "7g7f", None, 1, 1, 1),
                                                    (START_KEY, "2g2f", None, 2, 2, 2)}
    run_cli("export", "-o", where / "out #.db", "-b", where / "m&x=1.sqlite")
    run_cli("stats", "-b", where / "m&x=1.sqlite")
    names = {p.name for p in where.iterdir()}
    # No stray files created under a truncated / decoded name.
    assert {n.split(".sqlite")[0] + ".sqlite" for n in names if ".sqlite" in n} == {
        "a #1 ü.sqlite", "b %41?.sqlite", "m&x=1.sqlite"}
    assert [p.name for p in tmp_path.iterdir()] == [where.name]


def test_merge_nine_books(tmp_path):
    board = cshogi.Board()
    books = []
    legal = legal_usis(board)
    for i in range(9):
        write_db2016(tmp_path / f"{i}.db", [(f"{START_KEY} {i + 1}", [(legal[i], None, i, i, i)])])
        books.append(tmp_path / f"{i}.sqlite")
        run_cli("import", tmp_path / f"{i}.db", "-b", books[-1])
    result = json.loads(run_cli("merge", "--json", *books, "-o", tmp_path / "all.sqlite").stdout)
    assert result["moves"] == 9
    assert book_entries(tmp_path / "all.sqlite") == {
        (START_KEY, legal[i], None, i, i, i) for i in range(9)}
