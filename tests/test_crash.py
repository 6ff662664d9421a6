"""An import killed halfway leaves the book exactly as it was (or fully imported)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bookgen.store import Book
from conftest import (PYTHON, ROOT, dump_book, generate_blocks, integrity_ok,
                      run_bookgen_process, write_db2016)

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


# ---------------------------------------------------------------- timed kills


@pytest.fixture(scope="module")
def big_data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bigcrash")
    blocks = generate_blocks(seed=777, positions=20_000)
    write_db2016(tmp / "big.db", blocks)
    write_db2016(tmp / "seed.db", [(s, [(m, p, v, 0, 1) for m, p, v, _d, _c in moves])
                                   for s, moves in blocks[:2000:2]])
    old_book = tmp / "old.sqlite"
    assert run_bookgen_process("import", tmp / "seed.db", "-b", old_book).returncode == 0
    full_book = copy_book(old_book, tmp / "full.sqlite")
    started = time.monotonic()
    assert run_bookgen_process("import", tmp / "big.db", "-b", full_book).returncode == 0
    duration = time.monotonic() - started
    old, full = content(old_book), content(full_book)
    assert len(full["positions"]) == 20_000 > len(old["positions"])
    return tmp, old_book, duration, old, full


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


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.85, 1.0])
def test_sigkill_after_a_delay(big_data, tmp_path, fraction):
    tmp, old_book, duration, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    proc = start_import(tmp, book)
    time.sleep(duration * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    check_old_or_new(book, old, full, f"after {duration * fraction:.2f}s")


@pytest.mark.parametrize("wal_bytes", [32, 200_000, 1_000_000, 2_500_000])
def test_sigkill_while_the_transaction_writes(big_data, tmp_path, wal_bytes):
    """Kill as soon as the write-ahead log has grown to ``wal_bytes``: inside the
    import's write transaction or its commit."""
    tmp, old_book, _duration, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    wal = Path(str(book) + "-wal")
    proc = start_import(tmp, book)
    if wait_for_wal(proc, wal, wal_bytes):
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL)
    check_old_or_new(book, old, full, f"at WAL size {wal_bytes}")


# ---------------------------------------------------------------- Ctrl-C


def interrupt_import(big_data, tmp_path, wal_bytes):
    tmp, old_book, _duration, old, full = big_data
    book = copy_book(old_book, tmp_path / "book.sqlite")
    env = dict(os.environ)
    env.pop("BOOKGEN_FAULT", None)
    proc = subprocess.Popen([PYTHON, "-m", "bookgen.cli", "import", str(tmp / "big.db"),
                             "-b", str(book)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(ROOT),
                            # A parent that ignores SIGINT (background job) would pass
                            # SIG_IGN on, and Python would then never see Ctrl-C.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if wait_for_wal(proc, Path(str(book) + "-wal"), wal_bytes):
        proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert integrity_ok(book)
    state = comparable(content(book))
    assert state in (comparable(old), comparable(full))
    return proc.returncode, err, ("old" if state == comparable(old) else "new"), book, old


def test_ctrl_c_while_reading_exits_130_and_keeps_old_book(big_data, tmp_path):
    """SIGINT once the book is open (its WAL file exists) and the input is being read."""
    code, err, state, book, old = interrupt_import(big_data, tmp_path, 0)
    if code == 0:                 # finished before the signal landed
        assert state == "new"
        return
    assert code == 130, (code, err)
    assert "Traceback" not in err
    assert "interrupted" in err
    assert state == "old"
    assert content(book)["runs"] == old["runs"]


def test_ctrl_c_during_commit_reports_what_happened(big_data, tmp_path):
    """SIGINT once the write-ahead log is being written (the COMMIT of the import).

    The CLI promises 'an interrupted or failed import leaves [the book] exactly as
    it was', and Ctrl-C means exit 130. So exit 130 must go with the old content;
    if the import did commit, it must not be reported as interrupted (exit 0)."""
    code, err, state, _book, _old = interrupt_import(big_data, tmp_path, 32)
    assert "Traceback" not in err
    assert (code, state) in ((130, "old"), (0, "new")), (
        f"exit {code} ({err.strip()!r}) but the book holds the {state} content")


@pytest.mark.slow
def test_ctrl_c_during_parallel_read(large_db2016, tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group, the parallel
    reader's worker processes included: still exit 130, one line on stderr, no
    traceback, and no new book left behind."""
    path, _blocks, _bad_position, _bad_move = large_db2016
    book = tmp_path / "book.sqlite"
    proc = subprocess.Popen([PYTHON, "-m", "bookgen.cli", "import", str(path), "-b", str(book)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(ROOT), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Wait until the book exists (the reader is running), then a little longer.
    assert wait_for_wal(proc, Path(str(book) + "-wal"), 0)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.fail("the import finished before the signal; make the input larger")
    assert proc.returncode == 130, (proc.returncode, err)
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
