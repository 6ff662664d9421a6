"""``bookgen import``: formats told by content, DB2016 in any encoding and line
ending, and no silent empty imports.

Files are written here from known blocks (tests/conftest.py) or by cshogi
(Apery records); expected books come from importing the plain UTF-8 file.
"""

from __future__ import annotations

import io
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.bookfiles.importer import ImportSettings, import_books
from bookgen.diagnostics import Diagnostics
from conftest import book_entries, db2016_text, dump_book, generate_blocks, run_cli
from test_db2016 import tiny_parallel_chunks

BLOCKS = generate_blocks(seed=77, positions=60)
TEXT = db2016_text(BLOCKS)


@pytest.fixture(scope="module")
def expected(tmp_path_factory) -> set[tuple]:
    """The book that the plain UTF-8 file gives."""
    tmp = tmp_path_factory.mktemp("utf8")
    (tmp / "plain.db").write_bytes(TEXT.encode("utf-8"))
    run_cli("import", "--strict", tmp / "plain.db", "-b", tmp / "b.sqlite")
    entries = book_entries(tmp / "b.sqlite")
    assert len(entries) > 100
    return entries


ENCODINGS = {
    "utf-16-le-bom": lambda text: b"\xff\xfe" + text.encode("utf-16-le"),
    "utf-16-be-bom": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
    "utf-16-le": lambda text: text.encode("utf-16-le"),
    "utf-16-be-crlf": lambda text: b"\xfe\xff" + text.replace("\n", "\r\n").encode("utf-16-be"),
    "cr": lambda text: text.replace("\n", "\r").encode("utf-8"),
    "cr-bom": lambda text: b"\xef\xbb\xbf" + text.replace("\n", "\r").encode("utf-8"),
    "utf-16-le-cr": lambda text: b"\xff\xfe" + text.replace("\n", "\r").encode("utf-16-le"),
    "cp932-comments": lambda text: ("# 定跡ファイル\n" + text.replace(
        "\nsfen ", "\n// 変化\nsfen ", 3)).encode("cp932"),
}


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_encodings_and_line_ends_give_the_same_book(tmp_path, expected, name):
    source = tmp_path / f"{name}.db"
    source.write_bytes(ENCODINGS[name](TEXT))
    result = run_cli("import", "--strict", "--json", source, "-b", tmp_path / "b.sqlite",
                     expect=None)
    assert result.exit_code == 0, result.stderr
    assert book_entries(tmp_path / "b.sqlite") == expected


@pytest.mark.parametrize("name", ["utf-16-le-bom", "utf-16-be-crlf", "cr", "utf-16-le-cr"])
def test_parallel_reader_reads_them_too(tmp_path, expected, name):
    source = tmp_path / f"{name}.db"
    source.write_bytes(ENCODINGS[name](TEXT))
    stream = io.StringIO()
    with tiny_parallel_chunks(300):
        summary = import_books(tmp_path / "b.sqlite", [source],
                               ImportSettings(strict=True, parser_workers=2),
                               diagnostics=Diagnostics(stream=stream), progress=False)
    assert stream.getvalue() == ""
    assert summary.files[0]["format"] == "db2016"
    assert book_entries(tmp_path / "b.sqlite") == expected


def test_problems_keep_their_line_numbers_with_cr_line_ends(tmp_path):
    text = ("#YANEURAOU-DB2016 1.00\rsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/"
            "LNSGKGSNL b - 1\r7g7f none 1 1 1\r7g7e none 1 1 1\r")
    for data in (text.encode(), b"\xff\xfe" + text.encode("utf-16-le")):
        (tmp_path / "p.db").write_bytes(data)
        result = run_cli("import", tmp_path / "p.db", "-b", tmp_path / "p.sqlite")
        assert f"{tmp_path / 'p.db'}:4: invalid move line '7g7e none 1 1 1'" in result.stderr


def random_records(seed: int, count: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, 16 * count, dtype=np.uint8).tobytes()


def test_random_bytes_are_not_an_apery_book(tmp_path):
    for seed, count in ((1, 100), (2, 7), (3, 4096)):
        (tmp_path / "r.bin").write_bytes(random_records(seed, count))
        result = run_cli("import", tmp_path / "r.bin", "-b", tmp_path / "b.sqlite", expect=2)
        assert result.stderr.startswith(f"bookgen: error: {tmp_path / 'r.bin'}: neither a "
                                        "DB2016 text book (not text) nor an Apery book ("), \
            result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        # Forced: read as Apery, nothing reached, so nothing imported.
        forced = run_cli("import", "--format", "apery", tmp_path / "r.bin", "-b",
                         tmp_path / "b.sqlite", expect=2)
        assert f"r.bin: nothing imported: {count} Apery records" in forced.stderr
        assert "none reached from the initial position" in forced.stderr
        assert not (tmp_path / "b.sqlite").exists()


@pytest.fixture
def apery_book(tmp_path) -> Path:
    """A real Apery book: the UTF-8 file exported by bookgen."""
    (tmp_path / "plain.db").write_bytes(TEXT.encode("utf-8"))
    run_cli("import", tmp_path / "plain.db", "-b", tmp_path / "src.sqlite")
    run_cli("export", "--format", "apery", "-o", tmp_path / "book.bin",
            "-b", tmp_path / "src.sqlite")
    return tmp_path / "book.bin"


def test_apery_with_garbage_keys_or_moves_is_an_error(tmp_path, apery_book):
    records = np.fromfile(apery_book, dtype=cshogi.BookEntry)
    rng = np.random.default_rng(5)
    run_cli("import", apery_book, "-b", tmp_path / "good.sqlite")   # the real one imports
    unsorted = records.copy()
    unsorted["key"] = rng.integers(0, 2**63, len(records), dtype=np.uint64)
    sorted_keys = unsorted.copy()
    sorted_keys.sort(order="key")
    moves = records.copy()
    moves["fromToPro"] = rng.integers(-2**15, 2**15, len(records), dtype=np.int16)
    moves["fromToPro"][::5] = -1                     # surely not a move
    for name, data in (("unsorted", unsorted), ("sorted", sorted_keys), ("moves", moves)):
        path = tmp_path / f"{name}.bin"
        data.tofile(path)
        result = run_cli("import", path, "-b", tmp_path / "b.sqlite", expect=2)
        if name == "unsorted":
            assert "its 16-byte records are not sorted by key" in result.stderr
        elif name == "moves":
            assert "of its first" in result.stderr and "hold no move" in result.stderr
        else:    # sorted garbage keys: read, and nothing is reached
            assert "sorted.bin: nothing imported" in result.stderr
        assert not (tmp_path / "b.sqlite").exists()
        forced = run_cli("import", "--format", "apery", path, "-b", tmp_path / "b.sqlite",
                         expect=None)
        if name != "moves":
            assert forced.exit_code == 2 and "nothing imported" in forced.stderr


def test_nothing_imported_is_an_error_and_the_book_is_untouched(tmp_path):
    (tmp_path / "good.db").write_bytes(TEXT.encode("utf-8"))
    book = tmp_path / "b.sqlite"
    run_cli("import", tmp_path / "good.db", "-b", book)
    before = dump_book(book)
    cases = {
        "invalid.db": "#YANEURAOU-DB2016 1.00\nsfen 9/9/9/9/9/9/9/9/9 b - 0\nnone none 1 1 1\n",
        "header.db": "#YANEURAOU-DB2016 1.00\n",
        "comments.db": "# a book\n// of nothing\n\n",
    }
    messages = {}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        # (with a good file first: the whole import is refused)
        result = run_cli("import", tmp_path / "good.db", tmp_path / name, "-b", book, expect=2)
        messages[name] = result.stderr.strip().splitlines()[-1]
        assert dump_book(book) == before
    assert messages["invalid.db"] == (
        f"bookgen: error: {tmp_path / 'invalid.db'}: nothing imported: 3 lines of utf-8 text, "
        "1 sfen line, none valid (first: line 2: invalid position: each side must have "
        f"exactly one king; its moves are skipped); {book} unchanged")
    assert "header.db: nothing imported: 1 line of utf-8 text, without an 'sfen' line" in \
        messages["header.db"]
    assert "comments.db: nothing imported: 3 lines" in messages["comments.db"]
    # An empty file still imports nothing without complaint.
    (tmp_path / "empty.db").write_bytes(b"")
    run_cli("import", "--format", "db2016", tmp_path / "empty.db", "-b", book)


def test_content_that_contradicts_the_format_given(tmp_path, apery_book):
    (tmp_path / "u16.db").write_bytes(ENCODINGS["utf-16-le-bom"](TEXT))
    result = run_cli("import", "--format", "apery", tmp_path / "u16.db",
                     "-b", tmp_path / "b.sqlite", expect=2)
    assert "u16.db: --format apery, but the file is a DB2016 text book (utf-16-le)" in \
        result.stderr
    result = run_cli("import", "--format", "db2016", apery_book,
                     "-b", tmp_path / "b.sqlite", expect=2)
    assert "book.bin: --format db2016, but the file is not text (it looks like an Apery " \
           "book)" in result.stderr
    assert not (tmp_path / "b.sqlite").exists()


def test_a_few_damaged_bytes_leave_a_text_book_text(tmp_path, expected):
    data = bytearray(TEXT.encode("utf-8"))
    lines = TEXT.split("\n")
    damaged = next(i for i, line in enumerate(lines) if i > 10 and not line.startswith("sfen"))
    offset = len("\n".join(lines[:damaged])) + 1
    data[offset:offset + 2] = b"\x81 "               # not UTF-8 nor CP932
    (tmp_path / "d.db").write_bytes(bytes(data))
    result = run_cli("import", tmp_path / "d.db", "-b", tmp_path / "b.sqlite")
    assert f"{tmp_path / 'd.db'}:{damaged + 1}: invalid move line" in result.stderr
    assert len(book_entries(tmp_path / "b.sqlite")) == len(expected) - 1
