"""Ctrl-C and kill -9 of the long commands, with engines that hang.

Every long command (grow, refine search, refine mistakes --iterate, selfplay,
match), with one worker and with two, stops within a few seconds of a real
SIGINT to its process group even while its engines hang: the engines are
killed, the work in flight dropped (and the output says so), the exit code is
130, the run is marked interrupted and a rerun continues. ``kill -9`` of
bookgen leaves no worker, resource tracker or engine behind. The signals are
sent when the fake engines report (with a file) that they hang, or when real
engines appear in the process tree: never after a guessed delay.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bookgen.grow import grow
from conftest import PYTHON, ROOT, integrity_ok, small_grow
from processes import (
    DEADLINE,
    Bookgen,
    assert_all_gone,
    descendants,
    fake_engine,
    interrupted_before_bookgen,
    marks,
    stop_all,
    wait_for,
)

FAIRY = "/usr/games/fairy-stockfish"
STARTS = ["startpos", "startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d"]


def query(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def statuses(book: Path, command: str) -> list[str]:
    return [r[0] for r in query(book, f"SELECT status FROM runs WHERE command = '{command}' "
                                      "ORDER BY id")]


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> Path:
    """A book with several leaves, so that two workers have work at once."""
    book = tmp_path_factory.mktemp("book") / "book.sqlite"
    grow(book, small_grow(20, 4, seed=0), progress=False)
    return book


class Hanging:
    """A fake engine that hangs on ``go`` while a switch file exists, and reports it."""

    def __init__(self, tmp_path: Path, *args: object) -> None:
        self.marks = tmp_path / "marks"
        self.marks.mkdir()
        self.switch = tmp_path / "hang"
        self.switch.touch()
        self.command = fake_engine("--multipv", "--hang-if-exists", self.switch,
                                   "--mark-dir", self.marks, *args)

    def wait_hung(self, process: Bookgen, count: int) -> None:
        wait_for(lambda: len(marks(self.marks, "hung")) >= count, process,
                 f"{count} hanging engines")

    def heal(self) -> None:
        self.switch.unlink()


def ctrl_c_when_marked(process: Bookgen, marks_dir: Path, count: int, what: str,
                       engines: int = 0) -> tuple[int, str, str]:
    """Ctrl-C once ``count`` fake engines have left a "hung" mark in ``marks_dir``
    (and at least ``engines`` of them run); the exit code and output, after
    checking that bookgen and every process it started are gone."""
    procs = {}
    try:
        wait_for(lambda: len(marks(marks_dir, "hung")) >= count, process, what)
        procs = descendants(process.pid)
        running = [p for p, cmd in procs.items() if "fake_engine.py" in cmd and
                   "bookgen.cli" not in cmd]
        assert len(running) >= engines, procs
        process.ctrl_c()
        code, out, err = process.finish()
        assert_all_gone(procs)
    finally:
        stop_all(process, procs)
    assert "Traceback" not in err, err
    return code, out, err


def interrupt_when_hung(process: Bookgen, engine: Hanging, count: int
                        ) -> tuple[int, str, str]:
    """Ctrl-C once ``count`` engines hang on ``go`` (see :func:`ctrl_c_when_marked`)."""
    return ctrl_c_when_marked(process, engine.marks, count, f"{count} hanging engines",
                              engines=count)


# --------------------------------------------------------------------------
# Ctrl-C


@pytest.mark.parametrize("workers", [1, 2])
def test_grow_ctrl_c_with_hung_engines(small_book, tmp_path, workers):
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    engine = Hanging(tmp_path)
    args = ["grow", "-b", book, "--evaluator", f"usi:{engine.command}", "--nodes", "100",
            "--positions", "3", "--workers", workers]
    code, out, err = interrupt_when_hung(Bookgen(tmp_path, *args), engine, workers)
    assert code == 130, out + err
    assert f"interrupted (Ctrl-C; {workers} expansion" in out and "in flight dropped" in out
    assert "rerun the same command" in err
    assert statuses(book, "grow") == ["done", "interrupted"]
    assert integrity_ok(book)
    # The rerun continues.
    engine.heal()
    code, out, err = Bookgen(tmp_path, *args).finish(deadline=120)
    assert code == 0, out + err
    assert statuses(book, "grow") == ["done", "interrupted", "done"]


@pytest.mark.parametrize("workers", [1, 2])
def test_refine_search_ctrl_c_with_hung_engines(small_book, tmp_path, workers):
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    engine = Hanging(tmp_path)
    args = ["refine", "search", "-b", book, "--engine", f"usi:{engine.command}", "--nodes",
            "100", "--workers", workers]
    code, out, err = interrupt_when_hung(Bookgen(tmp_path, *args), engine, workers)
    assert code == 130, out + err
    assert "interrupted (Ctrl-C; " in out and "in flight dropped" in out
    assert statuses(book, "refine search") == ["interrupted"]
    engine.heal()
    code, out, err = Bookgen(tmp_path, *args).finish(deadline=120)
    assert code == 0, out + err
    assert statuses(book, "refine search") == ["interrupted", "done"]
    with_moves = query(book, "SELECT count(DISTINCT position_id) FROM moves")[0][0]
    assert query(book, "SELECT count(*) FROM analyses")[0][0] == with_moves


@pytest.mark.parametrize("workers", [1, 2])
def test_selfplay_ctrl_c_with_hung_engines(tmp_path, workers):
    starts = tmp_path / "starts.txt"
    starts.write_text("\n".join(STARTS) + "\n")
    out_file = tmp_path / "games.hcpe"
    engine = Hanging(tmp_path)
    args = ["selfplay", "--starts", starts, "--games", "4", "-o", out_file, "--player",
            f"usi:{engine.command}", "--nodes", "100", "--max-ply", "30", "--workers", workers]
    code, out, err = interrupt_when_hung(Bookgen(tmp_path, *args), engine, workers)
    assert code == 130, out + err
    assert f"interrupted, {workers} game" in out and "in flight dropped" in out
    assert "--append" in err
    assert out_file.exists() and out_file.stat().st_size == 0  # no game finished
    engine.heal()
    code, out, err = Bookgen(tmp_path, *args, "--append").finish(deadline=120)
    assert code == 0, out + err
    assert out.startswith(f"{out_file}: 4 games")


@pytest.mark.parametrize("concurrency", [1, 2])
def test_match_ctrl_c_with_hung_engines(tmp_path, concurrency):
    openings = tmp_path / "openings.txt"
    openings.write_text("\n".join(STARTS) + "\n")
    results = tmp_path / "r.sqlite"
    engine = Hanging(tmp_path)
    args = ["match", "--quiet", "--engine", f"hang=usi:{engine.command}", "--builtin", "b",
            "--option", "b:nodes=100", "--openings", openings, "--nodes", "100", "--games", "4",
            "--max-ply", "30", "--concurrency", concurrency, "-o", results]
    code, out, err = interrupt_when_hung(Bookgen(tmp_path, *args), engine, concurrency)
    assert code == 130, out + err
    assert f"interrupted: {concurrency} game" in out and "in flight dropped" in out
    assert query(results, "SELECT status FROM matches") == [("interrupted",)]
    assert query(results, "SELECT count(*) FROM games") == [(0,)]
    engine.heal()
    code, out, err = Bookgen(tmp_path, *args, "--json").finish(deadline=120)
    assert code == 0, out + err
    summary = json.loads(out)
    assert (summary["previously_played"], summary["played"]) == (0, 4)
    assert query(results, "SELECT status FROM matches") == [("done",)]


def test_mistakes_iterate_ctrl_c_with_hung_engine(tmp_path):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(20, 4, seed=0), progress=False)
    # Analyses by an engine that disagrees with every value of the book: mistakes.
    searched = Bookgen(tmp_path, "refine", "search", "-b", book, "--engine",
                       f"usi:{fake_engine('--score', '3000')}", "--nodes", "100")
    assert searched.finish(deadline=120)[0] == 0
    engine = Hanging(tmp_path)
    args = ["refine", "mistakes", "-b", book, "--iterate", "--evaluator",
            f"usi:{engine.command}", "--expand", "1", "--max-iterations", "1",
            "-o", tmp_path / "mistakes.txt"]
    code, out, err = interrupt_when_hung(Bookgen(tmp_path, *args), engine, 1)
    assert code == 130, out + err
    assert statuses(book, "refine mistakes") == ["interrupted"]
    assert statuses(book, "grow")[-1] == "interrupted"
    assert integrity_ok(book)
    engine.heal()
    code, out, err = Bookgen(tmp_path, *args).finish(deadline=300)
    assert code == 0, out + err
    assert statuses(book, "refine mistakes") == ["interrupted", "done"]


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_while_recording_stops_at_the_next_wait(tmp_path, workers):
    """A Ctrl-C that comes while a result is being recorded (not while waiting)
    lets the results already collected land, then drops what is still in flight."""
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(10, 8, seed=0), progress=False)  # more than 2 x 2 in flight
    process = Bookgen(tmp_path, "refine", "search", "-b", book, "--workers", workers,
                      env={"BOOKGEN_FAULT": "refine-search-recorded:SIGINT"})
    try:
        code, out, err = process.finish(deadline=120)
    finally:
        stop_all(process, {})
    assert code == 130, out + err
    assert statuses(book, "refine search") == ["interrupted"]
    analysed = query(book, "SELECT count(*) FROM analyses")[0][0]
    # Those collected with the first one: one worker hands results over one by one;
    # two hand over what they have finished (up to the 2 x 2 in flight) together.
    assert analysed == 1 if workers == 1 else 1 <= analysed <= workers * 2
    assert f"{analysed} positions analysed" in out
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["refine minimax", "import"])
def test_one_transaction_commands_exit_130_and_change_nothing(small_book, tmp_path, command):
    """Commands that write in one transaction: Ctrl-C (at a fault point inside it)
    exits 130 like the long runs, and the book is as it was (no run row)."""
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    before = query(book, "SELECT * FROM runs")
    if command == "import":
        args, fault = ["import", ROOT / "data" / "sample.db", "-b", book], "import-before-commit"
    else:
        args, fault = ["refine", "minimax", "-b", book], "refine-minimax-propagated"
    process = Bookgen(tmp_path, *args, env={"BOOKGEN_FAULT": f"{fault}:SIGINT"})
    try:
        code, out, err = process.finish(deadline=120)
    finally:
        stop_all(process, {})
    assert code == 130, out + err
    assert err.strip() == "bookgen: interrupted" and "Traceback" not in err
    assert query(book, "SELECT * FROM runs") == before
    assert integrity_ok(book)


# --------------------------------------------------------------------------
# kill -9: nothing survives bookgen


def kill_and_check(process: Bookgen, ready: object) -> None:
    """``kill -9`` bookgen once ``ready()`` is true; every process it started must end."""
    procs = {}
    try:
        wait_for(ready, process, "the processes to kill")
        procs = descendants(process.pid)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
        assert_all_gone(procs)
    finally:
        stop_all(process, procs)
    err = process.err_path.read_text()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_of_grow_leaves_no_process(small_book, tmp_path, workers):
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    engine = Hanging(tmp_path)
    process = Bookgen(tmp_path, "grow", "-b", book, "--evaluator", f"usi:{engine.command}",
                      "--nodes", "100", "--positions", "3", "--workers", workers)
    kill_and_check(process, lambda: len(marks(engine.marks, "hung")) >= workers)
    assert statuses(book, "grow") == ["done", "running"]  # marked interrupted by the next run


def test_kill_9_of_a_match_with_real_engines_leaves_no_process(tmp_path):
    openings = tmp_path / "openings.txt"
    openings.write_text("\n".join(STARTS) + "\n")
    process = Bookgen(tmp_path, "match", "--quiet", "--engine", f"a=usi:{FAIRY}", "--engine",
                      f"b=usi:{FAIRY}", "--option", "a:Threads=1", "--option", "b:Threads=1",
                      "--openings", openings, "--byoyomi", "2000", "--games", "4",
                      "--concurrency", "2", "-o", tmp_path / "r.sqlite")

    def engines_in_workers() -> bool:
        tree = descendants(process.pid)
        workers = {pid for (pid, _t), cmd in tree.items() if "spawn_main" in cmd}
        engines = [pid for (pid, _t), cmd in tree.items()
                   if cmd.startswith(FAIRY) and _parent(pid) in workers]
        return len(engines) >= 4  # both players of both games

    kill_and_check(process, engines_in_workers)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def test_the_helpers_find_engines_in_their_own_sessions(tmp_path):
    """The checks above would pass vacuously if engines were not found: they are."""
    engine = Hanging(tmp_path)
    process = Bookgen(tmp_path, "grow", "-b", tmp_path / "book.sqlite", "--evaluator",
                      f"usi:{engine.command}", "--nodes", "100")
    procs = {}
    try:
        engine.wait_hung(process, 1)
        procs = descendants(process.pid)
        hung_pid = int(marks(engine.marks, "hung")[0].read_text())
        assert hung_pid in {pid for pid, _t in procs}
        assert str(ROOT / "tests" / "fake_engines") in " ".join(procs.values())
    finally:
        stop_all(process, procs)


# --------------------------------------------------------------------------
# Ctrl-C while processes start up (found by benchmarks/fault_campaign.py)

STARTING_WORKER_SCRIPT = """
import os, signal, sys, time
from pathlib import Path

marks = Path(sys.argv[1])
if __name__ == "__mp_main__":  # a spawned worker imports this while it starts up
    (marks / f"worker-starting-{os.getpid()}").touch()
    while not (marks / "go-on").exists():
        time.sleep(0.01)


def square(x):
    return x * x


def nothing():
    pass


if __name__ == "__main__":
    from bookgen.workers.pool import PoolRunner

    signal.signal(signal.SIGINT, lambda *_: (marks / "parent-got-ctrl-c").touch())
    runner = PoolRunner(1, square, nothing, ())
    runner.submit(7)
    print(runner.collect(), flush=True)
    runner.close()
"""


def test_ctrl_c_while_a_worker_starts_up_prints_no_traceback(tmp_path):
    """The terminal's Ctrl-C reaches a worker that is still starting (importing
    the main module, before it could ignore SIGINT): it neither dies nor prints
    a KeyboardInterrupt traceback, and does its work."""
    script = tmp_path / "pool.py"
    script.write_text(STARTING_WORKER_SCRIPT)
    marks_dir = tmp_path / "marks"
    marks_dir.mkdir()
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen([PYTHON, str(script), str(marks_dir)], cwd=str(ROOT),
                                   stdout=stdout, stderr=stderr, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                    signal.SIG_DFL))
    procs = {}
    try:
        wait_for(lambda: list(marks_dir.glob("worker-starting-*")), process,
                 "a starting worker")
        procs = descendants(process.pid)
        os.killpg(process.pid, signal.SIGINT)  # the whole group, as the terminal does
        wait_for(lambda: (marks_dir / "parent-got-ctrl-c").exists(), process,
                 "the Ctrl-C in the parent")
        (marks_dir / "go-on").touch()
        code = process.wait(timeout=DEADLINE)
    finally:
        stop_all(process, procs)
    assert "Traceback" not in err.read_text(), err.read_text()
    assert (code, out.read_text()) == (0, "[49]\n"), err.read_text()


ENTRY_POINTS = {"python -m bookgen.cli": [PYTHON, "-m", "bookgen.cli"],
                "bookgen": [str(ROOT / ".venv" / "bin" / "bookgen")],
                "python -m bookgen": [PYTHON, "-m", "bookgen"]}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_ctrl_c_while_the_command_line_starts_exits_130_quietly(small_book, tmp_path, entry):
    """Ctrl-C at every moment of a short command, start-up included (importing
    numpy and cshogi, parsing the options): exit code 130 and one line, or 0
    when the command was done; never a traceback, an ImportError or "Aborted!".
    Python may also end by SIGINT itself (its start-up before any bookgen code
    runs, its shutdown after the command is done), silently or with its own
    start-up message, as any Python program: the shell shows exit code 130 for
    that too."""
    if not os.access(ENTRY_POINTS[entry][0], os.X_OK):
        pytest.fail(f"{ENTRY_POINTS[entry][0]} is missing: run 'make .venv/.installed'")
    codes = []
    for step in range(30):
        out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        with open(out, "w") as stdout, open(err, "w") as stderr:
            process = subprocess.Popen(
                [*ENTRY_POINTS[entry], "stats", "-b", small_book], cwd=str(tmp_path),
                stdout=stdout, stderr=stderr, start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            process.wait(timeout=step * 0.02)  # the moment of this Ctrl-C
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=DEADLINE)
        text = err.read_text()
        if interrupted_before_bookgen(text):
            continue  # the interpreter's start-up
        assert code in (0, 130, -signal.SIGINT) and "Traceback" not in text, (step, code, text)
        assert text in ("", "bookgen: interrupted\n"), (step, code, text)
        codes.append(code)
    assert 130 in codes  # (not vacuous: Ctrl-Cs came while bookgen ran)


def test_ctrl_c_while_grow_starts_its_engine_marks_the_run_interrupted(small_book, tmp_path):
    """Ctrl-C after grow wrote its run row but before the run took Ctrl-C over
    (its engine starting): exit code 130, the run marked interrupted (not left
    running), the engine gone."""
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    marks_dir = tmp_path / "marks"
    marks_dir.mkdir()
    # The engine answers bookgen's check before the book is opened, then hangs
    # when grow starts it for the run.
    engine = fake_engine("--multipv", "--first-start-only", tmp_path / "started-once",
                         "--mark-dir", marks_dir)
    process = Bookgen(tmp_path, "grow", "-b", book, "--evaluator", f"usi:{engine}",
                      "--nodes", "100", "--positions", "3")
    code, out, err = ctrl_c_when_marked(process, marks_dir, 1, "the engine's start")
    assert code == 130, out + err
    assert statuses(book, "grow") == ["done", "interrupted"]


def test_ctrl_c_while_refine_search_closes_its_first_engine_marks_the_run_interrupted(
        small_book, tmp_path):
    """refine search --workers 2 checks its engine, opens the book, writes its run
    row and closes the engine before the workers start theirs: a Ctrl-C while
    that engine quits gives exit code 130 and an interrupted run (not failed)."""
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    marks_dir = tmp_path / "marks"
    marks_dir.mkdir()
    engine = fake_engine("--multipv", "--hang-on-quit", "--mark-dir", marks_dir)
    process = Bookgen(tmp_path, "refine", "search", "-b", book, "--engine", f"usi:{engine}",
                      "--nodes", "100", "--workers", "2")
    code, out, err = ctrl_c_when_marked(process, marks_dir, 1, "the engine's quit")
    assert code == 130, out + err
    assert statuses(book, "refine search") == ["interrupted"]


@pytest.mark.parametrize("command", ["grow", "refine search"])
def test_ctrl_c_while_the_engine_shuts_down_leaves_the_run_finished(small_book, tmp_path,
                                                                   command):
    """A Ctrl-C once the work is done, while the run closes its engine (one that
    ignores quit: killed after its grace), waits for that: the run's row is
    written (done), not left running (found by the fault campaign with refine
    search --workers 2, whose workers shut down then)."""
    book = tmp_path / "book.sqlite"
    shutil.copy(small_book, book)
    marks_dir = tmp_path / "marks"
    marks_dir.mkdir()
    engine = fake_engine("--multipv", "--hang-on-quit", "--mark-dir", marks_dir)
    if command == "grow":  # grow checks its engine first (it quits), then runs with another
        args, quits = ["grow", "-b", book, "--evaluator", f"usi:{engine}", "--positions",
                       "2"], 2
    else:
        args, quits = ["refine", "search", "-b", book, "--engine", f"usi:{engine}",
                       "--limit", "2"], 1
    process = Bookgen(tmp_path, *args, "--nodes", "100")
    code, out, err = ctrl_c_when_marked(process, marks_dir, quits,
                                        "the run's engine ignoring quit")
    assert code == 0, out + err
    assert statuses(book, command) == (["done", "done"] if command == "grow" else ["done"])


_IMPORT_ERROR_AFTER_CTRL_C = """
import os, signal, sys
# as started from a terminal, even when the test run itself ignores SIGINT
# (a background job of a non-interactive shell inherits SIG_IGN)
signal.signal(signal.SIGINT, signal.default_int_handler)
from bookgen.startup import quit_on_ctrl_c
quit_on_ctrl_c()
import click
from bookgen.cli.support import reports_errors

@click.command()
@click.option("--ctrl-c", is_flag=True)
@reports_errors
def command(ctrl_c):
    if ctrl_c:  # what a Ctrl-C inside an extension module's import looks like
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            pass
    raise ImportError('PyCapsule_Import could not import module "pandas"')

command()
"""


@pytest.mark.parametrize("ctrl_c", [True, False])
def test_an_import_error_after_ctrl_c_is_an_interrupt(tmp_path, ctrl_c):
    """A Ctrl-C that lands inside the import of an extension module (pandas,
    loaded by a command) surfaces as an ImportError: after a Ctrl-C it exits
    130 with one line; the same error without a Ctrl-C stays a traceback (a
    real bug to report)."""
    script = tmp_path / "command.py"
    script.write_text(_IMPORT_ERROR_AFTER_CTRL_C)
    done = subprocess.run([PYTHON, str(script), *(["--ctrl-c"] if ctrl_c else [])],
                          capture_output=True, text=True, timeout=DEADLINE)
    if ctrl_c:
        assert (done.returncode, done.stderr) == (130, "bookgen: interrupted\n")
    else:
        assert done.returncode == 1 and "Traceback" in done.stderr and "ImportError" in done.stderr
