"""Helpers for tests that run ``bookgen`` as a real process tree and signal it.

Processes are found in /proc (Linux): a process is identified by its pid and
its start time, so that a reused pid is never mistaken for a survivor, and a
zombie (killed, not yet reaped by init) counts as gone. Everything here waits
for events (a file, a process appearing) with a deadline, never for a guessed
time.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PYTHON, ROOT

FAKES = ROOT / "tests" / "fake_engines"
DEADLINE = 60.0        # generous bound for events the test waits for
STOP_DEADLINE = 30.0   # "stops within a few seconds", as a deadline, not a measurement

Proc = tuple[int, int]  # (pid, start time in clock ticks)


def fake_engine(*args: object, script: str = "fake_engine.py") -> str:
    """A fake engine's command line (see tests/fake_engines/_fakeusi.py)."""
    return " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / script, *args))


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a process, None if it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> dict[Proc, str]:
    """Every live descendant of ``pid`` (the process itself included), with its
    command line. Engines run in their own sessions: parents are followed, not
    process groups."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
    found: dict[Proc, str] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        stat = _stat(current)
        if stat is None or stat[1] == "Z":
            continue
        found[(current, stat[2])] = _cmdline(current)
        todo += children.get(current, [])
    return found


# What runs before bookgen can take over Ctrl-C (bookgen.startup): the
# interpreter's own start-up, then the entry points' first imports.
_ENTRY_FILES = ("bookgen/__init__.py", "bookgen/__main__.py", "bookgen/startup.py")
_ENTRY_LINES = ("from bookgen.startup import quit_on_ctrl_c", "quit_on_ctrl_c()")
_FRAME = re.compile(r'^  File "([^"]+)", line \d+, in .*\n(?:    (.*)\n)?', re.MULTILINE)


def interrupted_before_bookgen(stderr: str) -> bool:
    """True when ``stderr`` is that of a Ctrl-C that reached the interpreter
    before bookgen's code ran (a few tens of milliseconds after exec): Python's
    own "Fatal Python error: init_...", or a ``KeyboardInterrupt`` traceback (or
    "Exception ignored" report) in which no project file but the entry points'
    first imports appears. No program can take over Ctrl-C before it runs; the
    tests and the fault campaign tell this apart from bookgen's own tracebacks."""
    if not stderr.rstrip().rstrip(":").endswith("KeyboardInterrupt"):
        return False
    if "Fatal Python error: init_" in stderr:
        return True
    for path, line in _FRAME.findall(stderr):
        try:
            relative = Path(path).relative_to(ROOT).as_posix()
        except ValueError:
            continue  # the standard library, site-packages, <frozen ...>
        if relative.startswith(".venv/"):
            continue  # the console script
        if relative not in _ENTRY_FILES and line.strip() not in _ENTRY_LINES:
            return False
    return True


def alive(proc: Proc) -> bool:
    stat = _stat(proc[0])
    return stat is not None and stat[2] == proc[1] and stat[1] != "Z"


def stopped(pid: int) -> bool:
    """The process is stopped (by SIGSTOP: a ``NAME:stop`` fault point)."""
    stat = _stat(pid)
    return stat is not None and stat[1] == "T"


def wait_for(condition: Callable[[], object], process: subprocess.Popen | None = None,
             what: str = "the event", deadline: float = DEADLINE) -> object:
    """Poll ``condition`` until it is true; fail if ``process`` ends first or at the deadline."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"bookgen ended (exit {process.returncode}) before {what}:\n"
                                 f"{output(process)}")
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {deadline} s")


def marks(directory: Path, event: str) -> list[Path]:
    """The files fake engines started with ``--mark-dir`` wrote for ``event``."""
    return sorted(p for p in directory.glob(f"{event}-*") if not p.name.endswith(".tmp"))


class Bookgen(subprocess.Popen):
    """``python -m bookgen.cli ARGS`` in its own session (as a shell runs a job: the
    terminal's Ctrl-C reaches its whole process group), output into files."""

    def __init__(self, tmp_path: Path, *args: object, env: dict[str, str] | None = None
                 ) -> None:
        self.out_path, self.err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        full_env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
        full_env.update(env or {})
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            super().__init__([PYTHON, "-m", "bookgen.cli", *map(str, args)], stdout=out,
                             stderr=err, cwd=str(ROOT), env=full_env, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def ctrl_c(self) -> None:
        """SIGINT to the process group, as the terminal sends it."""
        os.killpg(self.pid, signal.SIGINT)

    def finish(self, deadline: float = STOP_DEADLINE) -> tuple[int, str, str]:
        try:
            code = self.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"bookgen did not stop within {deadline} s") from None
        return code, self.out_path.read_text(), self.err_path.read_text()


def output(process: subprocess.Popen) -> str:
    if isinstance(process, Bookgen):
        return f"stdout:\n{process.out_path.read_text()}\nstderr:\n{process.err_path.read_text()}"
    return ""


def assert_all_gone(procs: dict[Proc, str], deadline: float = STOP_DEADLINE) -> None:
    """Every process of ``procs`` ends (or is a zombie) within the deadline."""
    end = time.monotonic() + deadline
    left = [p for p in procs if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    assert not left, "still running: " + "; ".join(f"{p[0]} {procs[p][:150]}" for p in left)


def kill_all(procs: dict[Proc, str]) -> None:
    """Clean up after a failed test: kill what is left of the processes it started."""
    for proc in procs:
        if alive(proc):
            try:
                os.kill(proc[0], signal.SIGKILL)
            except OSError:
                pass


def stop_all(process: subprocess.Popen, procs: dict[Proc, str]) -> None:
    """Clean up after a test, failed or not: bookgen and everything it started (now
    or earlier) is killed."""
    if process.poll() is None:
        procs = {**procs, **descendants(process.pid)}
        process.kill()
    process.wait()
    kill_all(procs)
