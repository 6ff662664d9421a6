"""An import killed halfway leaves the book exactly as it was (or fully imported)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bookgen.store import Book, BulkWriter
from conftest import (
    PYTHON,
    ROOT,
    dump_book,
    generate_blocks,
    integrity_ok,
    run_bookgen_process,
    write_db2016,
)
from processes import Bookgen, assert_all_gone, descendants, stop_all, stopped, wait_for

FAULT_POINTS = ["import-positions-written", "import-moves-written", "import-before-commit"]


def content(book: Path):
    """Everything a user can see of a book, runs included."""
    return dump_book(book)


def book_files(book: Path) -> list[Path]:
    return [Path(str(book) + s) for s in ("", "-wal", "-shm", "-journal")]


def copy_book(source: Path, target: Path) -> Path:
    for suffix in ("-wal", "-shm", "-journal"):
        assert not Path(str(source) + suffix).exists(), "source book not checkpointed"
    for path in book_files(target):
        path.unlink(missing_ok=True)
    shutil.copyfile(source, target)
    return target


@pytest.fixture(scope="module")
def crash_data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crash")
    blocks = generate_blocks(seed=20240611, positions=3000)
    # The old book: a third of the positions, with shallower entries, plus one
    # position that the new file does not have.
    old_blocks = [(sfen, [(m, p, v - 1, 0, c) for m, p, v, _d, c in moves])
                  for sfen, moves in blocks[::3]]
    write_db2016(tmp / "old.db", old_blocks)
    write_db2016(tmp / "new.db", blocks)
    old_book = tmp / "old.sqlite"
    proc = run_bookgen_process("import", tmp / "old.db", "-b", old_book)
    assert proc.returncode == 0, proc.stderr
    full_book = copy_book(old_book, tmp / "full.sqlite")
    proc = run_bookgen_process("import", tmp / "new.db", "-b", full_book)
    assert proc.returncode == 0, proc.stderr
    return tmp, old_book, full_book


@pytest.mark.parametrize("fault", FAULT_POINTS)
def test_fault_inside_import_transaction_keeps_old_book(crash_data, tmp_path, fault):
    tmp, old_book, full_book = crash_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    before = content(book)
    proc = run_bookgen_process("import", tmp / "new.db", "-b", book,
                               env={"BOOKGEN_FAULT": fault})
    assert proc.returncode == -signal.SIGKILL, (
        f"the import was not killed at {fault!r} (exit {proc.returncode}): {proc.stderr}")
    assert integrity_ok(book)
    with Book(book, create=False, readonly=True) as store:   # bookgen opens it
        assert store.count_positions() == len(before["positions"])
    assert content(book) == before
    # And the book is usable: importing again gives the full result.
    proc = run_bookgen_process("import", tmp / "new.db", "-b", book)
    assert proc.returncode == 0, proc.stderr
    after, full = content(book), content(full_book)
    assert after["positions"] == full["positions"]
    assert after["moves"] == full["moves"]


@pytest.mark.parametrize("fault", FAULT_POINTS)
def test_fault_while_creating_a_new_book(crash_data, tmp_path, fault):
    tmp, _old, _full = crash_data
    book = tmp_path / "fresh.sqlite"
    proc = run_bookgen_process("import", tmp / "new.db", "-b", book,
                               env={"BOOKGEN_FAULT": fault})
    assert proc.returncode == -signal.SIGKILL
    if book.exists():
        # Whatever is left must be a valid, empty book that bookgen accepts.
        assert integrity_ok(book)
        left = content(book)
        assert left["positions"] == [] and left["moves"] == [] and left["runs"] == []
        proc = run_bookgen_process("stats", "-b", book)
        assert proc.returncode == 0, proc.stderr


def test_cli_script_entry_point_fault(crash_data, tmp_path):
    """The installed ``bookgen`` script honours BOOKGEN_FAULT as well."""
    script = ROOT / ".venv" / "bin" / "bookgen"
    if not script.exists():
        script = Path(shutil.which("bookgen") or "")
    assert script.is_file(), "no bookgen console script installed"
    tmp, old_book, _full = crash_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    before = content(book)
    env = dict(os.environ, BOOKGEN_FAULT="import-moves-written")
    proc = subprocess.run([str(script), "import", str(tmp / "new.db"), "-b", str(book)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert integrity_ok(book)
    assert content(book) == before


# ---------------------------------------------------------------- a large import, stage by stage


@pytest.fixture(scope="module")
def big_data(tmp_path_factory):
    """An old book and a file of 30,000 positions (about 60,000 moves, more than a
    BulkWriter batch: one batch is written while the file is read, the rest at the end)."""
    tmp = tmp_path_factory.mktemp("bigcrash")
    blocks = generate_blocks(seed=777, positions=30_000)
    assert sum(len(moves) for _sfen, moves in blocks) > BulkWriter.BATCH
    write_db2016(tmp / "big.db", blocks)
    write_db2016(tmp / "seed.db", [(s, [(m, p, v, 0, 1) for m, p, v, _d, _c in moves])
                                   for s, moves in blocks[:2000:2]])
    old_book = tmp / "old.sqlite"
    assert run_bookgen_process("import", tmp / "seed.db", "-b", old_book).returncode == 0
    full_book = copy_book(old_book, tmp / "full.sqlite")
    assert run_bookgen_process("import", tmp / "big.db", "-b", full_book).returncode == 0
    old, full = content(old_book), content(full_book)
    assert len(full["positions"]) == 30_000 > len(old["positions"])
    return tmp, old_book, old, full


def comparable(book_content):
    return book_content["positions"], book_content["moves"]


def start_import(tmp: Path, book: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("BOOKGEN_FAULT", None)
    return subprocess.Popen([PYTHON, "-m", "bookgen.cli", "import", str(tmp / "big.db"),
                             "-b", str(book)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=str(ROOT))


def wait_for_wal(proc: subprocess.Popen, wal: Path, size: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if wal.stat().st_size >= size:
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.0002)
    return False


def check_old_or_new(book: Path, old, full, when: str) -> str:
    assert integrity_ok(book), when
    now = content(book)
    state = comparable(now)
    assert state in (comparable(old), comparable(full)), (
        f"killed {when}: book is neither the old nor the new content "
        f"({len(state[0])} positions, {len(state[1])} moves)")
    if state == comparable(old):
        assert now["runs"] == old["runs"]
        return "old"
    assert len(now["runs"]) == len(old["runs"]) + 1
    assert now["runs"][-1][6] == "done"     # status column
    return "new"


# Where a large import can be killed, in order, and what the book then holds.
IMPORT_STAGES = [
    ("import-positions-written@1", "old"),  # the first batch, while the file is read
    ("import-moves-written@1", "old"),
    ("import-positions-written@2", "old"),  # the rest, once the file is read
    ("import-moves-written@2", "old"),
    ("import-before-commit", "old"),        # the run recorded as done
    ("book-commit", "old"),                 # at the COMMIT
    ("book-committed", "new"),              # right after it, the WAL not yet checkpointed
]


@pytest.mark.parametrize("fault, state", IMPORT_STAGES)
def test_sigkill_at_each_stage_of_a_large_import(big_data, tmp_path, fault, state):
    tmp, old_book, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    proc = run_bookgen_process("import", tmp / "big.db", "-b", book,
                               env={"BOOKGEN_FAULT": fault})
    assert proc.returncode == -signal.SIGKILL, (
        f"the import was not killed at {fault!r} (exit {proc.returncode}): {proc.stderr}")
    assert check_old_or_new(book, old, full, f"at {fault}") == state


@pytest.mark.parametrize("wal_bytes", [32, 200_000, 1_000_000, 2_500_000])
def test_sigkill_while_the_transaction_writes(big_data, tmp_path, wal_bytes):
    """Kill as soon as the write-ahead log has grown to ``wal_bytes``: inside one of
    SQLite's own writes, where no fault point reaches. Where that lands varies from
    run to run; every outcome must be the old or the new book."""
    tmp, old_book, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    wal = Path(str(book) + "-wal")
    proc = start_import(tmp, book)
    if wait_for_wal(proc, wal, wal_bytes):
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL)
    check_old_or_new(book, old, full, f"at WAL size {wal_bytes}")


# ---------------------------------------------------------------- Ctrl-C


def interrupt_import(big_data, tmp_path, fault):
    """The large import with a Ctrl-C at ``fault``: (exit code, stderr, "old" or
    "new", book, old content)."""
    tmp, old_book, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    process = Bookgen(tmp_path, "import", tmp / "big.db", "-b", book,
                      env={"BOOKGEN_FAULT": f"{fault}:SIGINT"})
    try:
        code, _out, err = process.finish(deadline=120)
    finally:
        stop_all(process, {})
    return code, err, check_old_or_new(book, old, full, f"Ctrl-C at {fault}"), book, old


def test_ctrl_c_while_reading_exits_130_and_keeps_old_book(big_data, tmp_path):
    """Ctrl-C once the first batch is written, while the input is still being read."""
    code, err, state, book, old = interrupt_import(big_data, tmp_path,
                                                   "import-moves-written@1")
    assert code == 130, (code, err)
    assert "Traceback" not in err
    assert "interrupted" in err
    assert state == "old"
    assert content(book)["runs"] == old["runs"]


def test_ctrl_c_during_commit_reports_what_happened(big_data, tmp_path):
    """Ctrl-C during the COMMIT of the import.

    The CLI promises 'an interrupted or failed import leaves [the book] exactly as
    it was', and Ctrl-C means exit 130. The COMMIT holds the Ctrl-C back until it
    is done: the import did commit, so it must not be reported as interrupted
    (exit 0, with a line saying what happened)."""
    code, err, state, _book, _old = interrupt_import(big_data, tmp_path, "book-commit")
    assert "Traceback" not in err
    assert (code, state) == (0, "new"), err
    assert "Ctrl-C came during the final commit; the import completed" in err


@pytest.mark.slow
def test_ctrl_c_during_parallel_read(large_db2016, tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group, the parallel
    reader's worker processes included: still exit 130, one line on stderr, no
    traceback, and no new book left behind. The import stops itself once its first
    batch is written (the readers still at work), and the Ctrl-C reaches the group then."""
    path, _blocks, _bad_position, _bad_move = large_db2016
    book = tmp_path / "book.sqlite"
    process = Bookgen(tmp_path, "import", path, "-b", book,
                      env={"BOOKGEN_FAULT": "import-positions-written:stop"})
    procs = {}
    try:
        wait_for(lambda: stopped(process.pid), process, "the stop after the first batch")
        procs = descendants(process.pid)
        assert len(procs) > 1, procs  # the reader processes (forked) are there
        process.ctrl_c()
        os.kill(process.pid, signal.SIGCONT)
        code, _out, err = process.finish(deadline=120)
        assert_all_gone(procs)
    finally:
        stop_all(process, procs)
    assert code == 130, (code, err)
    assert "Traceback" not in err, f"Ctrl-C printed tracebacks:\n{err[-3000:]}"
    assert [line for line in err.splitlines() if line.strip()] == ["bookgen: interrupted"]
    assert not book.exists()


@pytest.mark.slow
def test_fault_during_parallel_read_keeps_old_book(large_db2016, tmp_path):
    """The first batch of a large (parallel) import is written while the file is still
    being read; a kill there must leave the book as it was."""
    path, blocks, _bad_position, _bad_move = large_db2016
    write_db2016(tmp_path / "seed.db", blocks[:300])
    book = tmp_path / "book.sqlite"
    assert run_bookgen_process("import", tmp_path / "seed.db", "-b", book).returncode == 0
    before = content(book)
    proc = run_bookgen_process("import", path, "-b", book,
                               env={"BOOKGEN_FAULT": "import-positions-written"}, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    # The reader processes die with it, quietly (not of a broken pipe, with a traceback).
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert integrity_ok(book)
    assert content(book) == before
