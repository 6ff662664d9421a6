"""One writer per book (issue 11, item 1).

Two real ``bookgen grow`` processes on one book: the second fails at once with
a one-line error naming the first, or runs after it with ``--wait``, and the
book stays consistent. Readers are never blocked. A writer killed with
``kill -9`` leaves a lock that the next writer takes over, also when children
it started (forked workers, engines) live on.

The first writer is held at a known point with the ``grow-expanded:stop``
fault point (it stops itself with SIGSTOP after its first expansion, holding
the lock and its in-memory graph); the test waits for that stop with
``waitpid(WUNTRACED)`` and lets it go on with SIGCONT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from bookcheck import inconsistencies
from bookgen.errors import BookgenError
from bookgen.store import Book
from conftest import PYTHON, ROOT, integrity_ok, run_bookgen_process

GROW = ("grow", "--playouts", "40", "--positions", "20")
SIDE_FILES = ("-wal", "-shm", "-journal", "-lock")


def start_bookgen(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env.pop("BOOKGEN_FAULT", None)
    full_env.update(env or {})
    return subprocess.Popen([PYTHON, "-m", "bookgen.cli", *map(str, args)], cwd=str(ROOT),
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_until_stopped(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Block until ``proc`` stops itself at its fault point (fails if it exits)."""
    outcome: list[int] = []

    def wait() -> None:
        outcome.append(os.waitpid(proc.pid, os.WUNTRACED)[1])

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout)
    if not outcome:
        proc.kill()
        waiter.join(10)
        pytest.fail(f"the first writer did not reach its fault point in {timeout} s")
    if not os.WIFSTOPPED(outcome[0]):
        proc.returncode = os.waitstatus_to_exitcode(outcome[0])
        pytest.fail(f"the first writer ended (exit {proc.returncode}) before its fault "
                    f"point: {proc.stderr.read()}")


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    out, err = proc.communicate(timeout=timeout)
    return out, err


@pytest.fixture
def processes():
    """Processes a test started; whatever is left is killed at the end."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            os.kill(proc.pid, signal.SIGCONT)
            proc.communicate(timeout=30)


def hold_the_lock(book: Path, processes: list) -> subprocess.Popen:
    """A ``grow`` on ``book``, stopped after its first expansion."""
    first = start_bookgen(*GROW, "-b", book, env={"BOOKGEN_FAULT": "grow-expanded:stop"})
    processes.append(first)
    wait_until_stopped(first)
    return first


def runs(book: Path) -> list[tuple]:
    conn = sqlite3.connect(book)
    try:
        return conn.execute(
            "SELECT id, command, status, started_at, ended_at, "
            "json_extract(counts, '$.expansions'), "
            "(SELECT count(*) FROM positions WHERE expanded_run = runs.id) FROM runs "
            "ORDER BY id").fetchall()
    finally:
        conn.close()


def leftovers(book: Path) -> list[str]:
    return [book.name + s for s in SIDE_FILES if Path(str(book) + s).exists()]


def test_second_writer_fails_at_once_naming_the_first(tmp_path, processes):
    book = tmp_path / "book.sqlite"
    other = tmp_path / "other.sqlite"
    assert run_bookgen_process("import", ROOT / "data" / "sample.db", "-b", other
                               ).returncode == 0
    first = hold_the_lock(book, processes)

    second = run_bookgen_process(*GROW, "--seed", "7", "-b", book, timeout=120)
    assert second.returncode == 2, (second.returncode, second.stdout, second.stderr)
    message = second.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert re.fullmatch(
        rf"bookgen: error: {re.escape(str(book))} is being written by pid {first.pid} "
        rf"\(bookgen grow .*-b {re.escape(str(book))}.*\); wait for it or pass --wait",
        message), message
    for writer in (("import", ROOT / "data" / "sample.db", "-b", book),
                   ("merge", "-o", book, other),
                   ("refine", "minimax", "-b", book),
                   ("refine", "search", "-b", book, "--nodes", "100", "--limit", "1"),
                   ("refine", "mistakes", "-b", book)):
        refused = run_bookgen_process(*writer, timeout=120)
        assert refused.returncode == 2, (writer, refused.stderr)
        assert f"being written by pid {first.pid}" in refused.stderr, refused.stderr
    assert [r[1] for r in runs(book)] == ["grow"]  # the refused writers wrote nothing

    # Readers are not blocked by the writer.
    for reader in (("stats", "-b", book), ("show", "-b", book),
                   ("export", "-b", book, "-o", tmp_path / "book.db"),
                   ("starts", "-b", book, "-o", tmp_path / "starts.txt"),
                   ("suite", "-b", book, "-o", tmp_path / "suite.txt", "--max-value", "2000")):
        done = run_bookgen_process(*reader, timeout=120)
        assert done.returncode == 0, (reader, done.stderr)

    os.kill(first.pid, signal.SIGCONT)
    out, err = finish(first)
    assert first.returncode == 0, err
    assert inconsistencies(book) == {"positions": [], "moves": []}
    assert leftovers(book) == []


def test_a_second_writer_is_refused_before_its_engine_starts(tmp_path, processes):
    """grow and refine search take the lock before they start an engine: a slow
    engine start does not delay the refusal, and no engine runs for nothing."""
    book = tmp_path / "book.sqlite"
    marks = tmp_path / "marks"
    marks.mkdir()
    engine = (f"usi:{PYTHON} {ROOT / 'tests' / 'fake_engines' / 'fake_engine.py'} "
              f"--multipv --mark-dir {marks}")
    hold_the_lock(book, processes)
    for writer in (("grow", "--evaluator", engine, "--positions", "1", "--nodes", "10"),
                   ("refine", "search", "--engine", engine, "--nodes", "10")):
        refused = run_bookgen_process(*writer, "-b", book, timeout=120)
        assert refused.returncode == 2, (writer, refused.stderr)
        assert "is being written by pid" in refused.stderr, refused.stderr
        assert list(marks.iterdir()) == [], (writer, "the engine was started")


def test_wait_runs_after_the_first_and_keeps_the_book_consistent(tmp_path, processes):
    book = tmp_path / "book.sqlite"
    first = hold_the_lock(book, processes)
    second = start_bookgen(*GROW, "--seed", "7", "--wait", "-b", book)
    processes.append(second)
    line = second.stderr.readline()  # said before it blocks
    assert line == (f"bookgen: {book} is being written by pid {first.pid} "
                    f"({' '.join(['bookgen', *GROW, '-b', str(book)])}); waiting for it\n")
    assert second.poll() is None

    os.kill(first.pid, signal.SIGCONT)
    _, err = finish(first)
    assert first.returncode == 0, err
    _, err = finish(second)
    assert second.returncode == 0, err

    (one, command1, status1, _start1, end1, expansions1, expanded1), \
        (two, command2, status2, start2, _end2, expansions2, expanded2) = runs(book)
    assert (command1, status1, command2, status2) == ("grow", "done", "grow", "done")
    assert start2 >= end1  # the second run started after the first ended
    # No expansion of the first run was redone (and overwritten) by the second.
    assert (expanded1, expanded2) == (expansions1, expansions2) == (20, 20)
    assert integrity_ok(book)
    assert inconsistencies(book) == {"positions": [], "moves": []}
    assert leftovers(book) == []

    # The checker does find a value that disagrees with its child.
    broken = tmp_path / "broken.sqlite"
    shutil.copyfile(book, broken)
    conn = sqlite3.connect(broken)
    position_id, move = conn.execute(
        "SELECT m.position_id, m.move FROM moves m JOIN positions c ON c.id = m.child_id "
        "WHERE c.expanded_run IS NOT NULL").fetchone()
    conn.execute("UPDATE moves SET value = value + 1 WHERE position_id = ? AND move = ?",
                 (position_id, move))
    conn.commit()
    conn.close()
    assert inconsistencies(broken)["moves"]


def test_a_killed_writers_lock_is_taken_over(tmp_path, processes):
    book = tmp_path / "book.sqlite"
    first = hold_the_lock(book, processes)
    refused = run_bookgen_process(*GROW, "-b", book, timeout=120)
    assert refused.returncode == 2 and "being written by" in refused.stderr, refused.stderr

    first.kill()  # SIGKILL also ends a stopped process
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    lock = Path(str(book) + "-lock")
    assert json.loads(lock.read_text())["pid"] == first.pid  # left behind, stale

    second = run_bookgen_process(*GROW, "--seed", "3", "-b", book, timeout=120)
    assert second.returncode == 0, second.stderr
    assert [(r[1], r[2]) for r in runs(book)] == [("grow", "interrupted"), ("grow", "done")]
    assert inconsistencies(book) == {"positions": [], "moves": []}
    assert leftovers(book) == []


CHILDREN_SCRIPT = """
import os, signal, subprocess, sys
from bookgen.store import Book

book = Book(sys.argv[1])                       # holds the writer lock
forked = os.fork()                             # a forked worker
if forked == 0:
    signal.pause()
    os._exit(0)
engine = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"],
                          close_fds=False)     # an engine, even one given our descriptors
print(forked, engine.pid, flush=True)
sys.stdin.readline()
"""


def test_children_of_a_killed_writer_do_not_keep_the_lock(tmp_path):
    book = tmp_path / "book.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(CHILDREN_SCRIPT)
    writer = subprocess.Popen([PYTHON, str(script), str(book)], cwd=str(ROOT),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    children: list[int] = []
    try:
        children = [int(pid) for pid in writer.stdout.readline().split()]
        assert len(children) == 2
        with pytest.raises(BookgenError, match=f"is being written by pid {writer.pid} "):
            Book(book)
        writer.kill()
        writer.wait(timeout=30)  # (its children keep its stdout open)
        for pid in children:
            os.kill(pid, 0)  # both still alive
        with Book(book) as store:  # the lock is free although they live on
            assert store.count_positions() == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=30)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        writer.stdin.close()
        writer.stdout.close()


def test_writers_within_one_process_share_the_lock(tmp_path):
    """The Python API: a Book opened for writing holds the lock until closed;
    several writers of one process share it (refine mistakes --iterate opens the
    book again for its grow runs); read-only books never take it."""
    book = tmp_path / "book.sqlite"
    lock = Path(str(book) + "-lock")
    first = Book(book)
    second = Book(book)
    reader = Book(book, readonly=True)
    try:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        first.close()
        refused = run_bookgen_process("import", ROOT / "data" / "sample.db", "-b", book)
        assert refused.returncode == 2, refused.stderr
        assert f"being written by pid {os.getpid()}" in refused.stderr
    finally:
        second.close()
    assert not lock.exists()
    done = run_bookgen_process("import", ROOT / "data" / "sample.db", "-b", book)
    assert done.returncode == 0, done.stderr
    assert reader.count_positions() == 300
    reader.close()
    # A reader never locks: another process writes while it is open.
    with Book(book, readonly=True):
        done = run_bookgen_process("refine", "minimax", "-b", book)
        assert done.returncode == 0, done.stderr
    assert leftovers(book) == []


def test_a_running_run_of_another_process_is_dead_even_if_its_pid_lives(tmp_path):
    """The lock holder is the only writer: a run left 'running' by another pid
    belongs to a writer that died, even when that pid now names a live process
    (reuse). The next writer marks it interrupted."""
    book = tmp_path / "book.sqlite"
    with Book(book) as store:
        with store.transaction():
            run_id = store.begin_run("grow", {})
            store.end_run(run_id, status="running", counts={"pid": 1})  # init: alive
    done = run_bookgen_process(*GROW, "-b", book, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [r[2] for r in runs(book)] == ["interrupted", "done"]
