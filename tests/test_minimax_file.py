"""refine minimax --in/--out: file to file, as import + refine minimax + export --values
minimax write it, and against the plain recursive negamax of test_minimax."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from pathlib import Path

import cshogi
import pytest

from conftest import PYTHON, ROOT, key_of, parse_db2016, run_cli, write_db2016
from test_minimax import (
    DRAWS,
    INF,
    MATE,
    RefBook,
    Reference,
    blocks_of,
    check_book,
    consistent_counts,
    ref_key,
    shuffle_book,
    tree_book,
    trusted,
)


def through_the_book(tmp_path: Path, source: Path, *args: object) -> tuple[bytes, str]:
    """import + refine minimax + export --values minimax: (the file, import's stderr)."""
    book = tmp_path / f"{source.stem}.sqlite"
    imported = run_cli("import", source, "-b", book)
    run_cli("refine", "minimax", "-b", book, *args)
    out = tmp_path / f"{source.stem}.sqlite.db"
    run_cli("export", "--values", "minimax", "-b", book, "-o", out)
    return out.read_bytes(), imported.stderr


def file_to_file(tmp_path: Path, source: Path, *args: object) -> tuple[bytes, str, dict]:
    """refine minimax --in/--out: (the file, stderr, the --json summary)."""
    out = tmp_path / f"{source.stem}.file.db"
    result = run_cli("refine", "minimax", "--in", source, "--out", out, "--json", *args)
    return out.read_bytes(), result.stderr, json.loads(result.stdout)


def write_book(tmp_path: Path, book: dict[str, dict], name: str = "in") -> Path:
    return write_db2016(tmp_path / f"{name}.db", blocks_of(book))


CASES = [(shuffle_book, seed, 30, DRAWS[seed % len(DRAWS)], "retrograde") for seed in range(6)]
CASES += [(tree_book, seed, 60, (500, 500), "retrograde") for seed in range(3)]
CASES += [(check_book, seed, 24, DRAWS[seed % 3], "retrograde") for seed in (0, 1, 3, 5)]
CASES += [(shuffle_book, 1, 24, (400, 550), "negascout"), (check_book, 3, 24, (400, 550),
                                                           "negascout"),
          (tree_book, 2, 40, (300, 700), "negascout")]


@pytest.mark.parametrize("maker, seed, size, draws, method", CASES)
def test_file_to_file_writes_what_import_refine_export_write(tmp_path, maker, seed, size,
                                                             draws, method):
    source = write_book(tmp_path, maker(seed, size))
    args = ("--draw-value-black", draws[0], "--draw-value-white", draws[1], "--method", method)
    expected, _ = through_the_book(tmp_path, source, *args)
    written, _, summary = file_to_file(tmp_path, source, *args)
    assert written == expected
    assert summary["method"] == method
    assert (summary["draw_value_black"], summary["draw_value_white"]) == draws
    if maker is shuffle_book:
        assert summary["cycle_components"] >= 1
    assert summary["transposition_edges"] >= 1
    assert summary["moves_written"] == written.count(b"\n") - 1 - summary["positions_written"]


def assert_file_matches_reference(text: str, book: dict[str, dict], draws=(500, 500),
                                  leaf_value=None) -> None:
    """The written file against the reference: every option with its value and depth,
    the best first (by value, then the shorter line when at least the mover's draw
    value, else the longer), one lower where it ties with the best at another depth
    (peta_shock's rule); transposition moves with count 0."""
    reference = Reference(RefBook(book), *draws, leaf_value)
    _positions, want_moves = reference.all_values()
    parsed = parse_db2016(text)
    assert {sfen for sfen, _ply, _moves in parsed.blocks} == set(book)
    for sfen, _ply, written in parsed.blocks:
        assert {m[0] for m in written} == {m for s, m in want_moves if s == sfen}
        best_move, _ponder, best_value, best_depth, _count = written[0]
        best = (best_value, INF if best_depth is None else best_depth)
        assert best == want_moves[(sfen, best_move)]
        turn = reference.book.turn[sfen]
        draw = reference.draws[turn] if turn == 0 else -reference.draws[turn]
        assert all(ref_key(*want_moves[(sfen, m[0])], draw) <= ref_key(*best, draw)
                   for m in written)
        for move, _ponder, value, depth, count in written[1:]:
            want_value, want_depth = want_moves[(sfen, move)]
            assert (INF if depth is None else depth) == want_depth
            tie = want_value == best[0] and want_depth != best[1]
            assert value == (want_value - 1 if tie else want_value)
            assert count == (book[sfen][move][1] if move in book[sfen] else 0)


@pytest.mark.parametrize("maker, seed, size", [(shuffle_book, 2, 30), (shuffle_book, 9, 40),
                                               (check_book, 5, 24), (check_book, 11, 24),
                                               (tree_book, 1, 60)])
@pytest.mark.parametrize("draws", [(500, 500), (300, 700), (650, 600)])
def test_file_to_file_matches_the_reference(tmp_path, maker, seed, size, draws):
    book = maker(seed, size)
    written, _, _ = file_to_file(tmp_path, write_book(tmp_path, book),
                                 "--draw-value-black", draws[0], "--draw-value-white", draws[1])
    assert_file_matches_reference(written.decode(), book, draws)


def test_file_to_file_negascout_matches_the_reference_with_trusted_scores(tmp_path):
    for maker, seed in ((shuffle_book, 7), (check_book, 12)):
        book = maker(seed, 24)
        written, _, summary = file_to_file(tmp_path, write_book(tmp_path, book, f"n{seed}"),
                                           "--method", "negascout", "--draw-value-black", 400,
                                           "--draw-value-white", 550)
        assert summary["negascout_components_approximated"] == 0
        assert_file_matches_reference(written.decode(), book, (400, 550), trusted(book))
    book = consistent_counts(tree_book(3, positions=50))
    written, _, _ = file_to_file(tmp_path, write_book(tmp_path, book, "consistent"),
                                 "--method", "negascout")
    assert_file_matches_reference(written.decode(), book)


def test_file_to_file_through_the_api(tmp_path):
    from bookgen.diagnostics import Diagnostics
    from bookgen.refine.minimax import MinimaxSettings
    from bookgen.refine.minimax_file import refine_minimax_file
    from bookgen.values import DrawValues

    book = shuffle_book(4, positions=30)
    source = write_book(tmp_path, book)
    settings = MinimaxSettings(draws=DrawValues(450, 520))
    summary = refine_minimax_file(source, tmp_path / "out.db", settings,
                                  diagnostics=Diagnostics(stream=None))
    assert summary.counts["positions"] == summary.counts["positions_written"] == len(book)
    assert summary.seconds.total >= summary.seconds.propagate >= 0
    assert summary.as_dict()["out"] == str(tmp_path / "out.db")
    assert_file_matches_reference((tmp_path / "out.db").read_text(), book, (450, 520))


# ------------------------------------------------------------------ what files hold


def messy_text(rng: random.Random, book: dict[str, dict]) -> str:
    """The book as real files have it: duplicate positions (other plies, moves again
    deeper, shallower or as deep with other counts), ponders (legal and not), none
    fields, missing fields, comments, invalid positions and moves, CRLF."""
    board = cshogi.Board()
    lines = ["#YANEURAOU-DB2016 1.00", "// a comment"]
    blocks = list(book.items())
    blocks += [rng.choice(blocks) for _ in range(len(blocks) // 3)]   # duplicates
    rng.shuffle(blocks)
    for sfen, moves in blocks:
        lines.append(f"sfen {sfen} {rng.choice([0, 1, 5, 12, 40])}")
        board.set_sfen(sfen + " 1")
        for move, (value, count) in moves.items():
            board.push_usi(move)
            replies = [cshogi.move_to_usi(m) for m in board.legal_moves]
            board.pop()
            ponder = rng.choice(replies + ["none", "none"]) if replies else "none"
            depth = rng.choice(["none", 0, 3, 7, 7, 20])
            fields = [move, ponder, "none" if value is None else value, depth,
                      count + rng.choice([0, 0, 5])]
            lines.append(" ".join(map(str, fields[:rng.choice([5, 5, 5, 5, 4, 3, 1])])))
            roll = rng.random()
            if roll < 0.04:
                lines.append(f"{move} 1a1b 10 10 10")                 # illegal ponder
            elif roll < 0.08:
                lines.append("9a9b none 0 0 1")                       # illegal move
            elif roll < 0.10:
                lines.append(f"{move} none 5 five 1")                 # bad depth
            elif roll < 0.12:
                lines.append("# a comment between moves")
            elif roll < 0.14:
                lines.append(f"  {move}   none 1 2 3  ")              # odd spacing
        if rng.random() < 0.05:
            lines.append("sfen 9/9/9/9/9/9/9/9/9 b - 1")                # no kings
            lines.append("7g7f none 1 1 1")
    return "\r\n".join(lines) + "\r\n"


@pytest.mark.parametrize("seed", range(4))
def test_messy_files_give_what_import_refine_export_give(tmp_path, seed):
    rng = random.Random(seed)
    book = shuffle_book(seed, positions=30) if seed % 2 else tree_book(seed, positions=40)
    source = tmp_path / "messy.db"
    source.write_bytes(messy_text(rng, book).encode())
    expected, import_stderr = through_the_book(tmp_path, source)
    written, stderr, summary = file_to_file(tmp_path, source)
    assert written == expected
    assert stderr == import_stderr        # the same problems, the same words
    assert summary["problems"] == len(stderr.splitlines()) > 0


def test_the_reader_takes_lines_in_bulk_as_the_line_reader_does(tmp_path):
    """The messy files through the bulk path and through the line reader alone."""
    import numpy as np

    from bookgen.formats.db2016 import parse_chunk

    for seed in range(6):
        rng = random.Random(seed)
        text = messy_text(rng, shuffle_book(seed, positions=40)).replace("\r\n", "\n").encode()
        bulk = parse_chunk(("m.db", 1, text, len(text)))
        lines = parse_chunk(("m.db", 1, text, len(text)), bulk=False)
        assert bulk.sfen == lines.sfen and bulk.problems == lines.problems
        assert list(bulk.skipped.items()) == list(lines.skipped.items())
        for name in ("ply", "zobrist", "turn", "book_key", "position", "move", "ponder",
                     "value", "depth", "count"):
            assert np.array_equal(getattr(bulk, name), getattr(lines, name)), name


# ------------------------------------------------------------------ errors and crashes


def one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bookgen: error: ")
    return lines[0]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    source = write_book(tmp_path, tree_book(1, positions=10))
    out = tmp_path / "out.db"
    cases = [
        (["--in", tmp_path / "missing.db", "--out", out], "no such file"),
        (["--in", source, "--out", tmp_path / "nowhere" / "out.db"], "does not exist"),
        (["--in", source], "--in and --out go together"),
        (["--out", out], "--in and --out go together"),
        (["--in", source, "--out", out, "-b", tmp_path / "b.sqlite"], "exclude each other"),
        (["--in", source, "--out", tmp_path / "out.txt"], "--out must end in .db"),
        (["--in", source, "--out", source], "would overwrite an input file"),
    ]
    for args, words in cases:
        result = run_cli("refine", "minimax", *args, expect=2)
        assert words in one_line_error(result), (args, result.stderr)
    garbage = tmp_path / "garbage.db"
    garbage.write_text("#YANEURAOU-DB2016 1.00\nsfen 9/9/9/9/9/9/9/9/9 b - 1\n7g7f none 1 1 1\n")
    result = run_cli("refine", "minimax", "--in", garbage, "--out", out, expect=2)
    assert "no valid position with moves" in result.stderr.strip().splitlines()[-1]
    assert f"{garbage}:2: invalid position" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.db", "in.db"]


def test_strict_refuses_a_file_with_an_invalid_line(tmp_path):
    source = write_book(tmp_path, tree_book(2, positions=10))
    with open(source, "a") as handle:
        handle.write("7g7f 7g7f 10 10 10\n")   # 7g is empty after 7g7f

    out = tmp_path / "out.db"
    result = run_cli("refine", "minimax", "--in", source, "--out", out, "--strict", expect=2)
    assert "1 invalid entries" in result.stderr.strip().splitlines()[-1]
    assert not out.exists()
    run_cli("refine", "minimax", "--in", source, "--out", out)   # without: skipped, reported
    assert out.exists()


def test_a_kill_while_writing_leaves_the_old_file(tmp_path):
    source = write_book(tmp_path, shuffle_book(5, positions=40))
    out = tmp_path / "out.db"
    out.write_text("the old refined book\n")
    env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
    env["BOOKGEN_FAULT"] = "refine-minimax-file-writing"
    killed = subprocess.run([PYTHON, "-m", "bookgen", "refine", "minimax", "--in", str(source),
                             "--out", str(out)], cwd=str(ROOT), env=env, capture_output=True,
                            timeout=300)
    assert killed.returncode == -signal.SIGKILL
    assert out.read_text() == "the old refined book\n"
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == sorted(["in.db", "out.db", f".out.db.{killed_pid(leftovers)}.tmp"])
    done = run_cli("refine", "minimax", "--in", source, "--out", out)
    assert done.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.db", "out.db"]
    expected, _ = through_the_book(tmp_path, source)
    assert out.read_bytes() == expected


def killed_pid(names: list[str]) -> str:
    return next(name.split(".")[3] for name in names if name.endswith(".tmp"))


def test_positions_of_the_file_without_moves_are_no_nodes(tmp_path):
    """A position written without moves (or whose moves are all invalid) is not a
    node, as in the book: a move into it is a leaf move."""
    board = cshogi.Board()
    start = key_of(board)
    board.push_usi("7g7f")
    child = key_of(board)
    text = (f"#YANEURAOU-DB2016 1.00\nsfen {start} 1\n7g7f none 40 3 2\n"
            f"sfen {child} 2\n2b3b none 1 1 1\n")   # a bishop does not step sideways
    source = tmp_path / "in.db"
    source.write_text(text)
    written, stderr, summary = file_to_file(tmp_path, source)
    assert summary["positions"] == 1 and summary["leaf_moves"] == 1
    assert written == through_the_book(tmp_path, source)[0]
    assert parse_db2016(written.decode()).blocks == [(start, 1, [("7g7f", None, 40, 0, 2)])]
    assert "not legal" in stderr and MATE > 0


def test_random_books_match_the_reference_file_to_file(tmp_path):
    from bookgen.diagnostics import Diagnostics
    from bookgen.refine.minimax import MinimaxSettings
    from bookgen.refine.minimax_file import refine_minimax_file
    from bookgen.values import DrawValues
    from test_minimax import for_random_books

    def refine_and_check(work, book, draws):
        out = work / "out.db"
        refine_minimax_file(write_book(work, book), out,
                            MinimaxSettings(draws=DrawValues(*draws)),
                            diagnostics=Diagnostics(stream=None))
        assert_file_matches_reference(out.read_text(), book, draws)

    for_random_books(tmp_path, refine_and_check)


def test_apery_output_is_what_export_writes(tmp_path):
    for seed in (1, 4):
        source = write_book(tmp_path, shuffle_book(seed, positions=30), f"a{seed}")
        book = tmp_path / f"a{seed}.sqlite"
        run_cli("import", source, "-b", book)
        run_cli("refine", "minimax", "-b", book, "--draw-value-black", 450)
        run_cli("export", "--values", "minimax", "--format", "apery", "-b", book,
                "-o", tmp_path / f"a{seed}.sqlite.bin")
        result = run_cli("refine", "minimax", "--in", source, "--out", tmp_path / f"a{seed}.bin",
                         "--draw-value-black", 450, "--json")
        assert (tmp_path / f"a{seed}.bin").read_bytes() == \
            (tmp_path / f"a{seed}.sqlite.bin").read_bytes()
        summary = json.loads(result.stdout)
        assert summary["format"] == "apery" and summary["moves_written"] > 0
