"""The fault campaign of issue 11: kill -9 and Ctrl-C at random moments, two writers
at once, fuzzed hcp/hcpe/DB2016/Apery inputs and read-only and full disks, all
through the real command line, with every outcome checked.

    python benchmarks/fault_campaign.py [--runs 8] [--quick] [--seed 0]
                                        [--only kill,ctrl-c,writers,fuzz,media] [--keep DIR]

Scenarios (``--runs N`` sets how many runs of each case; the default gives
about 900 runs in about 25 minutes on a 2-core machine):

1. ``kill -9`` of bookgen at a random moment during ``grow --workers 2``
   (built-in evaluator, fairy-stockfish, a fake engine that crashes),
   ``refine search --workers 2`` (fairy-stockfish) and ``match --concurrency 2``
   (fairy-stockfish, built-in players, a fake engine that hangs), then the
   same command again, which must resume and finish with exit code 0.
2. The same with Ctrl-C: SIGINT to bookgen's process group, as a terminal
   sends it (exit code 130, or 0 when the run ended first; a silent death by
   SIGINT, which the shell also shows as 130, counts as interrupted too). A
   Ctrl-C in the interpreter's own first ~30 ms, before any bookgen code runs,
   is Python's (it may print its own start-up error, as for any Python
   program): such runs are counted apart, in a note.
3. Two writers on one book (``grow`` twice, ``grow`` and ``import``, ``grow``
   and ``refine minimax``), started a random moment apart: without
   ``--wait`` one of them refuses with one line naming the other's pid (or
   they did not overlap); with ``--wait`` both finish. Either way the book is
   what running the successful commands one after the other gives.
4. Fuzzed inputs: ``.hcp`` start files through ``selfplay --starts``,
   ``.hcpe`` files through ``train --data``, DB2016 and Apery books through
   ``import`` (random bytes, truncations, bit flips, UTF-16, CR and CRLF line
   ends). Exit code 0 or 2 (2 for random bytes), one error line, nothing
   written on error; UTF-16/CR/CRLF copies of a valid book import exactly what
   the original does.
5. Read-only books, read-only directories and read-only file systems (a
   read-only bind mount in a mount namespace, ``unshare -m``; file permissions
   are enforced with ``unshare -U``), and full disks (a small tmpfs, a random
   amount of room) for every writing command and the readers; after a full
   disk, the same command on a larger disk must succeed.

Counted, per scenario: runs (bookgen processes checked), tracebacks (any
``Traceback (most recent call last)`` in their output), signals (a process
that died of a signal other than the campaign's own ``kill -9`` or Ctrl-C),
orphans (processes that bookgen started, collected from /proc by parent pid
every 50 ms while it runs and, since this process is a child subreaper,
anything reparented to it, still alive 10 s after bookgen ended), corrupt
values (see ``bookcheck.py``: ``PRAGMA integrity_check``, each expanded
position worth its best move and each move worth minus its expanded child,
no position expanded or analysed twice, runs of killed processes marked
interrupted, match results complete after the rerun, the book unchanged when a
command fails, serial equivalence of two writers, identical imports of
re-encoded books), unclean exit codes (bad input must give 2, Ctrl-C 130, the
rerun 0, a refused writer 2 with one line) and leftovers (``-wal``, ``-shm``,
``-journal``, ``-lock`` or ``.tmp`` files after a command finished with exit
code 0, unless it said that the disk was too full to fold SQLite's log in;
``.tmp`` files after any).

Needs Linux, root (``unshare``, ``mount``) and /usr/games/fairy-stockfish.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bookcheck import (  # noqa: E402
    analysis_mismatches,
    expansion_mismatches,
    inconsistencies,
    repeated_analyses,
)
from conftest import PYTHON, ROOT, integrity_ok  # noqa: E402
from processes import (  # noqa: E402
    Proc,
    alive,
    descendants,
    fake_engine,
    interrupted_before_bookgen,
)

FAIRY = "/usr/games/fairy-stockfish"
SAMPLE = ROOT / "data" / "sample.db"
TRACEBACK = "Traceback (most recent call last)"
SAMPLE_EVERY = 0.05      # seconds between two walks of bookgen's process tree
ORPHAN_WAIT = 10.0       # bound on the wait for bookgen's processes after it ended
STOP_WAIT = 30.0         # Ctrl-C must stop a run within this
RUN_TIMEOUT = 300.0      # any other run
SIDE_SUFFIXES = ("-wal", "-shm", "-journal", "-lock")
ENV = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
COLUMNS = ("runs", "tracebacks", "signals", "orphans", "corrupt", "exits", "leftovers")


CONSOLE_SCRIPT = ROOT / ".venv" / "bin" / "bookgen"


def bookgen(*args: object) -> list[str]:
    """The ``bookgen`` command as a user runs it (the console script)."""
    entry = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [PYTHON, "-m", "bookgen"]
    return [*entry, *map(str, args)]


def become_subreaper() -> None:
    """Orphans of bookgen's process tree are reparented here instead of to init,
    so that none escapes the count."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_strays() -> None:
    """Collect the exit status of orphans reparented to this process (never of the
    processes the campaign itself waits for: those are reaped before this runs)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass


# --------------------------------------------------------------------------
# counting


@dataclass
class Tally:
    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    before_bookgen: int = 0   # Ctrl-Cs that reached the interpreter before bookgen ran

    def fail(self, column: str, where: str, detail: str, count: int = 1) -> None:
        self.counts[column] += count
        self.notes.append(f"[{self.name}] {column}: {where}: {detail}")


@dataclass
class Outcome:
    rc: int
    out: str
    err: str
    seconds: float
    signalled: float | None = None   # when the campaign's signal was sent (s after start)
    hung: bool = False                # did not end within its deadline (then killed)
    orphans: list[str] = field(default_factory=list)


class Watched:
    """A command in its own session (as a shell runs a job), output in files, its
    process tree walked every ``SAMPLE_EVERY`` seconds while it runs."""

    def __init__(self, argv: list[str], cwd: Path, tag: str) -> None:
        self.out_path, self.err_path = cwd / f".{tag}.out", cwd / f".{tag}.err"
        self.seen: dict[Proc, str] = {}
        self.start = time.monotonic()
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.popen = subprocess.Popen(
                argv, cwd=str(cwd), env=ENV, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                self.seen.update(descendants(self.popen.pid))
            except (OSError, ValueError, IndexError):
                pass
            self._done.wait(SAMPLE_EVERY)

    def signal(self, sig: int) -> None:
        try:
            if sig == signal.SIGINT:
                os.killpg(self.popen.pid, signal.SIGINT)  # the terminal's Ctrl-C
            else:
                os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> tuple[int, bool]:
        try:
            return self.popen.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            self.seen.update(descendants(self.popen.pid))
            self.popen.kill()
            return self.popen.wait(), True

    def finish(self) -> tuple[str, str]:
        self._done.set()
        self._thread.join()
        out, err = self.out_path.read_text(errors="replace"), self.err_path.read_text(
            errors="replace")
        self.out_path.unlink()
        self.err_path.unlink()
        return out, err


def left_alive(seen: dict[Proc, str]) -> list[str]:
    """The processes of ``seen`` and the orphans reparented here that are still
    alive after a bounded wait; they are killed (and counted by the caller)."""
    me = os.getpid()
    deadline = time.monotonic() + ORPHAN_WAIT
    while True:
        reap_strays()
        strays = {p: c for p, c in descendants(me).items() if p[0] != me}
        left = {p: c for p, c in {**seen, **strays}.items() if alive(p)}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(SAMPLE_EVERY)
    for proc in left:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(proc[0], sig)
            except OSError:
                pass
    if left:
        time.sleep(0.2)
        reap_strays()
    return [f"pid {p[0]}: {c[:160]}" for p, c in left.items()]


def run(argv: list[str], cwd: Path, *, signal_at: float | None = None,
        sig: int = signal.SIGKILL, timeout: float = RUN_TIMEOUT, tag: str = "run",
        partner: Callable[[], None] | None = None) -> Outcome:
    """Run ``argv`` to its end, or send ``sig`` at ``signal_at`` seconds (if it is
    still running) and wait for its end; then collect what it left running."""
    child = Watched(argv, cwd, tag)
    signalled = None
    if signal_at is not None:
        try:
            child.popen.wait(timeout=signal_at)
        except subprocess.TimeoutExpired:
            signalled = time.monotonic() - child.start
            child.signal(sig)
            if sig == signal.SIGINT:
                timeout = STOP_WAIT
    rc, hung = child.wait(timeout)
    seconds = time.monotonic() - child.start
    out, err = child.finish()
    return Outcome(rc, out, err, seconds, signalled, hung, left_alive(child.seen))


def tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])[-900:]


def judge(tally: Tally, where: str, outcome: Outcome, expect: Collection[int], *,
          killed: bool = False, wrapped: bool = False, ctrl_c: bool = False) -> bool:
    """Count what one process did wrong; True when its exit code is as expected.
    ``killed``: the campaign killed it (exit -9 expected). ``ctrl_c``: it got a
    Ctrl-C, so death by SIGINT without a word (the shell shows 130 for it, as
    for exit code 130) is an interruption too, and a Ctrl-C that reached the
    interpreter before bookgen's code ran is the interpreter's (counted apart).
    ``wrapped``: run by a shell, which reports death by signal N as 128 + N."""
    tally.counts["runs"] += 1
    text = outcome.out + outcome.err
    if outcome.orphans:
        tally.fail("orphans", where, "; ".join(outcome.orphans), len(outcome.orphans))
    if ctrl_c and interrupted_before_bookgen(outcome.err):
        tally.before_bookgen += 1
        return True
    if TRACEBACK in text:
        tally.fail("tracebacks", where, tail(text[text.index(TRACEBACK):], 12))
    rc = outcome.rc
    if (killed and rc == -signal.SIGKILL) or (ctrl_c and rc == -signal.SIGINT):
        return TRACEBACK not in text
    if outcome.hung:
        tally.fail("exits", where, f"still running after its deadline: {tail(text)}")
        return False
    if rc < 0 or (wrapped and rc > 128 and rc != 130):
        tally.fail("signals", where, f"exit {rc}: {tail(text)}")
        return False
    if rc not in expect:
        tally.fail("exits", where, f"exit {rc}, expected {sorted(expect)}: {tail(text)}")
        return False
    return True


def side_files(directory: Path, clean: bool) -> list[str]:
    """Files a finished command should not have left: ``.tmp`` files always, the
    SQLite and lock side files after a clean finish."""
    found = []
    for path in directory.rglob("*"):
        if path.name.endswith(".tmp") or (clean and path.name.endswith(SIDE_SUFFIXES)):
            found.append(str(path.relative_to(directory)))
    return sorted(found)


def check_leftovers(tally: Tally, where: str, directory: Path, clean: bool) -> None:
    found = side_files(directory, clean)
    if found:
        tally.fail("leftovers", where, ", ".join(found), len(found))


def corrupt(tally: Tally, where: str, problems: Iterable[str]) -> None:
    for problem in problems:
        tally.fail("corrupt", where, problem)


def query(path: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def book_content(path: Path) -> dict[str, list[tuple]]:
    """What a book says, without run ids and times: positions and moves with every
    value, the analyses. (Opened read-write so that closing leaves one file.)"""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True)
    conn.execute("PRAGMA query_only = ON")
    try:
        return {
            "positions": conn.execute(
                "SELECT sfen, ply, turn, visits, value, win_rate, minimax_value, "
                "minimax_depth, expanded_run IS NOT NULL FROM positions ORDER BY sfen"
            ).fetchall(),
            "moves": conn.execute(
                "SELECT p.sfen, m.move, m.ponder, m.value, m.depth, m.count, m.visits, "
                "m.prior, m.win_rate, c.sfen, m.eval_value, m.minimax_value, m.minimax_depth "
                "FROM moves m JOIN positions p ON p.id = m.position_id "
                "LEFT JOIN positions c ON c.id = m.child_id ORDER BY p.sfen, m.move"
            ).fetchall(),
            "analyses": conn.execute(
                "SELECT p.sfen, a.engine, a.score, a.bestmove FROM analyses a "
                "JOIN positions p ON p.id = a.position_id ORDER BY 1, 2").fetchall(),
        }
    finally:
        conn.close()


def describe_difference(a: dict[str, list], b: dict[str, list]) -> str:
    parts = []
    for key in a:
        left, right = set(a[key]), set(b[key])
        if left != right:
            parts.append(f"{key}: {len(left - right)} rows only in the book, "
                         f"{len(right - left)} only in the serial replay "
                         f"(e.g. {sorted(left - right, key=str)[:1]} / "
                         f"{sorted(right - left, key=str)[:1]})")
    return "; ".join(parts)


# --------------------------------------------------------------------------
# the campaign


@dataclass
class Variant:
    """A long command that the kill and Ctrl-C scenarios interrupt."""
    name: str
    kind: str                                 # grow, search or match
    args: Callable[[Path], list[object]]      # the command line, given the run directory
    games: int = 0                            # match: games the command asks for
    duration: float = 5.0                     # seconds a whole run takes (calibrated)


class Campaign:
    def __init__(self, work: Path, runs: int, seed: int, quick: bool) -> None:
        self.work = work
        self.runs = runs
        self.seed = seed
        self.quick = quick
        self.tallies: list[Tally] = []
        self.serial = 0
        self.failures_at: dict[Path, int] = {}
        self.references: dict[str, dict[str, list[tuple]]] = {}
        self.wal_kept = 0
        self.data = work / "data"
        self.data.mkdir()

    def rng(self, *key: object) -> random.Random:
        return random.Random(f"{self.seed}/" + "/".join(map(str, key)))

    def fresh_dir(self, name: str) -> Path:
        self.serial += 1
        path = self.work / f"{self.serial:04d}-{name.replace(' ', '-').replace('/', '-')}"
        path.mkdir()
        self.failures_at[path] = self.failures()
        return path

    def failures(self) -> int:
        return sum(t.counts[c] for t in self.tallies for c in COLUMNS if c != "runs")

    def setup_command(self, *args: object, cwd: Path | None = None) -> None:
        done = subprocess.run(bookgen(*args), cwd=str(cwd or self.data), env=ENV,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"set-up failed: bookgen {' '.join(map(str, args))}\n{done.stderr}")

    # -- fixtures ---------------------------------------------------------------

    def prepare(self) -> None:
        d = self.data
        self.setup_command("grow", "-b", d / "grown.sqlite", "--playouts", "30", "--positions",
                           "40", "--seed", "0")
        shutil.copyfile(d / "grown.sqlite", d / "searched.sqlite")
        (d / "openings.txt").write_text("startpos\nstartpos moves 7g7f 3c3d\n"
                                        "startpos moves 2g2f 8c8d\nstartpos moves 7g7f 8c8d\n"
                                        "startpos moves 5g5f 5c5d\nstartpos moves 2g2f 3c3d\n")
        self.setup_command("import", SAMPLE, "-b", d / "sample.sqlite")
        self.setup_command("starts", "-b", d / "grown.sqlite", "-o", d / "valid.hcp",
                           "--format", "hcp")
        self.setup_command("starts", "-b", d / "grown.sqlite", "-o", d / "starts.txt")
        self.setup_command("selfplay", "--starts", d / "valid.hcp", "--games", "4", "-o",
                           d / "valid.hcpe", "--playouts", "10", "--max-ply", "40")
        self.setup_command("export", "-b", d / "grown.sqlite", "-o", d / "valid.db")
        self.setup_command("export", "-b", d / "grown.sqlite", "-o", d / "valid.bin",
                           "--format", "apery")
        self.setup_command("match", "--builtin", "a", "--builtin", "b", "--option",
                           "a:depth=1", "--option", "b:depth=2", "--nodes", "1", "--games", "12",
                           "--openings", d / "openings.txt", "--max-ply", "160", "-o",
                           d / "results.sqlite", "--quiet")
        # The book of scenario 5: grown and analysed (refine mistakes needs analyses).
        shutil.copyfile(d / "grown.sqlite", d / "media.sqlite")
        self.setup_command("refine", "search", "-b", d / "media.sqlite", "--nodes", "200")

    def variants(self) -> list[Variant]:
        d = self.data
        openings = d / "openings.txt"
        crashing = fake_engine("--multipv", "--crash-on-go", "3")
        hanging = fake_engine("--hang-on-go", "9")
        return [
            Variant("grow builtin", "grow", lambda r: [
                "grow", "-b", r / "book.sqlite", "--playouts", "40", "--positions", "100",
                "--workers", "2"]),
            Variant("grow fairy-stockfish", "grow", lambda r: [
                "grow", "-b", r / "book.sqlite", "--evaluator", f"usi:{FAIRY}", "--nodes",
                "4000", "--multipv", "3", "--positions", "40", "--workers", "2"]),
            Variant("grow crashing engine", "grow", lambda r: [
                "grow", "-b", r / "book.sqlite", "--evaluator", f"usi:{crashing}", "--nodes",
                "100", "--multipv", "40", "--positions", "30", "--workers", "2"]),
            Variant("refine search fairy-stockfish", "search", lambda r: [
                "refine", "search", "-b", r / "book.sqlite", "--engine", f"usi:{FAIRY}",
                "--nodes", "4000", "--workers", "2"]),
            Variant("match fairy-stockfish", "match", lambda r: [
                "match", "--engine", f"a=usi:{FAIRY}", "--engine", f"b=usi:{FAIRY}",
                "--option", "a:USI_Hash=16", "--option", "b:USI_Hash=16", "--nodes", "400",
                "--games", "12", "--concurrency", "2", "--openings", openings, "--max-ply",
                "100", "-o", r / "results.sqlite", "--pgn", r / "games.pgn", "--quiet"],
                games=12),
            Variant("match builtin", "match", lambda r: [
                "match", "--builtin", "a", "--builtin", "b", "--option", "a:depth=1",
                "--option", "b:depth=2", "--nodes", "1", "--games", "8", "--concurrency", "2",
                "--openings", openings, "--max-ply", "80", "-o", r / "results.sqlite",
                "--csa", r / "csa", "--quiet"], games=8),
            Variant("match hanging engine", "match", lambda r: [
                "match", "--engine", f"a=usi:{hanging}", "--engine", f"b=usi:{FAIRY}",
                "--nodes", "300", "--engine-timeout", "1", "--games", "6", "--concurrency",
                "2", "--openings", openings, "--max-ply", "60", "-o", r / "results.sqlite",
                "--quiet"], games=6),
        ]

    def copy_base(self, variant: Variant, run_dir: Path) -> int:
        """Put the variant's starting files in ``run_dir``; the last run id so far."""
        if variant.kind == "match":
            return 0
        base = self.data / ("searched.sqlite" if variant.kind == "search" else "grown.sqlite")
        shutil.copyfile(base, run_dir / "book.sqlite")
        return query(base, "SELECT max(id) FROM runs")[0][0]

    def check_state(self, variant: Variant, run_dir: Path, base_run: int, final: bool,
                    interrupted: bool) -> list[str]:
        """What is wrong with the files of ``variant`` in ``run_dir``: right after the
        interruption (``final`` False) or after the rerun."""
        problems: list[str] = []
        if variant.kind == "match":
            results = run_dir / "results.sqlite"
            if not results.exists():
                return ["no results file after the rerun"] if final else []
            if not integrity_ok(results):
                return ["results file: integrity_check failed"]
            games, keys = query(results, "SELECT count(*), count(DISTINCT game_key) FROM games")[0]
            if games != keys:
                problems.append(f"{games} games but {keys} game keys")
            if final:
                statuses = [r[0] for r in query(results, "SELECT status FROM matches")]
                if statuses != ["done"]:
                    problems.append(f"match status {statuses} after the rerun")
                if games != variant.games:
                    problems.append(f"{games} games after the rerun, {variant.games} asked for")
            return problems
        book = run_dir / "book.sqlite"
        if not integrity_ok(book):
            return ["book: integrity_check failed"]
        if variant.kind == "grow":
            bad = inconsistencies(book)
            problems += [f"position value is not its best move's: {row}"
                         for row in bad["positions"][:3]]
            problems += [f"move value is not minus its child's: {row}" for row in bad["moves"][:3]]
            problems += [f"grow run {r} counted {c} expansions but expanded {e} positions"
                         for r, c, e in expansion_mismatches(book)]
        else:
            problems += [f"position {p} analysed {n} times with one key"
                         for p, _key, n in repeated_analyses(book)]
            problems += [f"refine search run {r} counted {c} analyses but holds {h}"
                         for r, c, h in analysis_mismatches(book)]
        runs = query(book, "SELECT id, command, status FROM runs WHERE id > ? ORDER BY id",
                     (base_run,))
        statuses = [status for _id, _command, status in runs]
        if final:
            if not statuses or statuses[-1] != "done":
                problems.append(f"the rerun's run is not done: {statuses}")
            if any(s not in ("interrupted", "done") for s in statuses[:-1]):
                problems.append(f"the interrupted run is not marked interrupted: {statuses}")
            if interrupted and len(statuses) == 2 and statuses[0] != "interrupted":
                problems.append(f"the Ctrl-C'd run is marked {statuses[0]}")
            if variant.kind == "search":
                wanted = query(book, "SELECT count(DISTINCT position_id) FROM moves")[0][0]
                got = query(book, "SELECT count(DISTINCT position_id) FROM analyses a JOIN "
                                  "runs r ON r.id = a.run_id WHERE r.id > ?", (base_run,))[0][0]
                if got != wanted:
                    problems.append(f"{got} of {wanted} positions analysed after the rerun")
        elif interrupted and statuses and statuses[-1] != "interrupted":
            problems.append(f"the Ctrl-C'd run is marked {statuses[-1]}")
        return problems

    # -- scenarios 1 and 2 -------------------------------------------------------

    def calibrate(self, variants: list[Variant]) -> None:
        """One whole run of each variant: how long it takes, and that it works."""
        tally = self.tally("clean runs (calibration)")
        for variant in variants:
            run_dir = self.fresh_dir("calibrate " + variant.name)
            base_run = self.copy_base(variant, run_dir)
            outcome = run(bookgen(*variant.args(run_dir)), run_dir)
            variant.duration = outcome.seconds
            where = variant.name
            if judge(tally, where, outcome, {0}):
                check_leftovers(tally, where, run_dir, clean=True)
            corrupt(tally, where, self.check_state(variant, run_dir, base_run, True, False))
            self.cleanup(run_dir, tally)
        tally.notes.append("durations: " + ", ".join(
            f"{v.name} {v.duration:.1f} s" for v in variants))

    def interrupt_scenario(self, title: str, sig: int, variants: list[Variant]) -> None:
        tally = self.tally(title)
        late = 0
        for variant in variants:
            for index in range(self.runs):
                rng = self.rng(title, variant.name, index)
                at = rng.uniform(0.0, variant.duration * 1.05)
                run_dir = self.fresh_dir(f"{title[:6]} {variant.name} {index}")
                base_run = self.copy_base(variant, run_dir)
                argv = bookgen(*variant.args(run_dir))
                where = f"{variant.name} #{index} (signal at {at:.2f} s)"
                first = run(argv, run_dir, signal_at=at, sig=sig)
                if first.signalled is None:
                    late += 1
                expect = {0, 130} if sig == signal.SIGINT else {0}
                judge(tally, where, first, expect, killed=sig == signal.SIGKILL,
                      ctrl_c=sig == signal.SIGINT)
                interrupted = sig == signal.SIGINT and first.rc == 130
                if interrupted and "interrupted" not in first.out + first.err:
                    tally.fail("exits", where, f"exit 130 without saying so: {tail(first.err)}")
                if sig == signal.SIGINT:  # (kill -9 may leave .tmp files: the rerun removes them)
                    check_leftovers(tally, where, run_dir, clean=first.rc == 0)
                corrupt(tally, where + " after the signal",
                        self.check_state(variant, run_dir, base_run, False, interrupted))
                rerun = run(argv, run_dir)
                if judge(tally, where + ", rerun", rerun, {0}):
                    check_leftovers(tally, where + ", rerun", run_dir, clean=True)
                corrupt(tally, where + ", rerun",
                        self.check_state(variant, run_dir, base_run, True, interrupted))
                self.cleanup(run_dir, tally)
        tally.notes.append(f"{late} of {len(variants) * self.runs} runs ended before their "
                           "signal")
        if tally.before_bookgen:
            tally.notes.append(
                f"{tally.before_bookgen} Ctrl-Cs reached the interpreter before any bookgen "
                "code ran (its first ~30 ms: Python's own start-up); not counted above")

    # -- scenario 3 --------------------------------------------------------------

    def writers(self) -> None:
        tally = self.tally("3. two writers")
        grow_a = ["grow", "--playouts", "40", "--positions", "80", "--seed", "1"]
        grow_b = ["grow", "--playouts", "40", "--positions", "20", "--seed", "2"]
        pairs = {
            "grow + grow": (grow_a, grow_b),
            "grow + import": (grow_a, ["import", SAMPLE]),
            "grow + refine minimax": (grow_a, ["refine", "minimax"]),
        }
        rounds = max(1, self.runs // 2)
        self.pair_outcomes: dict[str, int] = {}
        for wait in (False, True):
            for name, (one, two) in pairs.items():
                for index in range(rounds):
                    rng = self.rng("writers", wait, name, index)
                    first, second = (one, two) if rng.random() < 0.5 else (two, one)
                    delay = rng.uniform(0.0, 1.0)
                    label = f"{name}{' --wait' if wait else ''} #{index}"
                    where = f"{label} ({first[0]} first, the other {delay:.2f} s later)"
                    self.writer_pair(tally, where, first, second, delay, wait)
        tally.notes.append("pairs: " + ", ".join(f"{k} {v}" for k, v in
                                                 sorted(self.pair_outcomes.items())))

    def writer_pair(self, tally: Tally, where: str, first: list[str], second: list[str],
                    delay: float, wait: bool) -> None:
        run_dir = self.fresh_dir("writers")
        book = run_dir / "book.sqlite"
        shutil.copyfile(self.data / "grown.sqlite", book)
        base_run = query(book, "SELECT max(id) FROM runs")[0][0]
        extra = ["--wait"] if wait else []
        commands = [[*first, "-b", book, *extra], [*second, "-b", book, *extra]]
        procs = [Watched(bookgen(*commands[0]), run_dir, "first")]
        time.sleep(delay)
        procs.append(Watched(bookgen(*commands[1]), run_dir, "second"))
        outcomes = []
        for proc in procs:
            rc, hung = proc.wait(RUN_TIMEOUT)
            out, err = proc.finish()
            outcomes.append(Outcome(rc, out, err, time.monotonic() - proc.start, hung=hung))
        seen = {**procs[0].seen, **procs[1].seen}
        orphans = left_alive(seen)
        outcomes[0].orphans = orphans
        refused = [i for i, o in enumerate(outcomes) if o.rc == 2]
        waited = any("waiting for it" in o.err for o in outcomes)
        kind = ("one refused" if refused else "one waited for the other" if waited
                else "no overlap")
        self.pair_outcomes[kind] = self.pair_outcomes.get(kind, 0) + 1
        for i, outcome in enumerate(outcomes):
            expect = {0} if wait else {0, 2}
            judge(tally, f"{where}: {commands[i][0]}", outcome, expect)
        if not wait and len(refused) == 2:
            tally.fail("exits", where, "both writers refused")
        for i in refused:
            other = procs[1 - i].popen.pid
            lines = outcomes[i].err.strip().splitlines()
            if len(lines) != 1 or f"is being written by pid {other} " not in lines[0]:
                tally.fail("exits", where, f"refusal is not one line naming pid {other}: "
                           f"{tail(outcomes[i].err)}")
        done = [commands[i] for i, o in enumerate(outcomes) if o.rc == 0]
        check_leftovers(tally, where, run_dir, clean=all(o.rc in (0, 2) for o in outcomes))
        if not integrity_ok(book):
            corrupt(tally, where, ["book: integrity_check failed"])
            return
        if all(c[0] == "grow" or c[:2] == ["refine", "minimax"] for c in done):
            bad = inconsistencies(book)
            corrupt(tally, where, [f"inconsistent values: {bad['positions'][:2]} "
                                   f"{bad['moves'][:2]}"] if bad["positions"] or bad["moves"]
                    else [])
        corrupt(tally, where, [f"grow run {r} counted {c} expansions but expanded {e}"
                               for r, c, e in expansion_mismatches(book)])
        # The book is what the successful commands give when run one after the other,
        # in the order in which they took the book.
        order = [row[0] for row in query(book, "SELECT command, params FROM runs WHERE id > ? "
                                               "ORDER BY id", (base_run,))]
        if sorted(order) != sorted(" ".join(c[:2]) if c[0] == "refine" else c[0]
                                   for c in done):
            corrupt(tally, where, [f"runs {order} for the commands that succeeded "
                                   f"{[c[0] for c in done]}"])
            return
        if len(done) == 2:
            starts = query(book, "SELECT command, params FROM runs WHERE id > ? ORDER BY id",
                           (base_run,))
            done = sorted(done, key=lambda c: _run_index(starts, c))
        replay_dir = self.fresh_dir("writers-replay")
        replay = replay_dir / "book.sqlite"
        shutil.copyfile(self.data / "grown.sqlite", replay)
        for command in done:
            args = [replay if a == book else a for a in command if a != "--wait"]
            self.setup_command(*args, cwd=replay_dir)
        if book_content(book) != book_content(replay):
            corrupt(tally, where, ["not what the two commands give one after the other: "
                                   + describe_difference(book_content(book),
                                                         book_content(replay))])
        self.cleanup(replay_dir, tally)
        self.cleanup(run_dir, tally)

    # -- scenario 4 --------------------------------------------------------------

    def fuzz(self) -> None:
        tally = self.tally("4. fuzzed inputs")
        d = self.data
        run_dir = self.fresh_dir("fuzz")
        valid = {"hcp": (d / "valid.hcp").read_bytes(), "hcpe": (d / "valid.hcpe").read_bytes(),
                 "db": (d / "valid.db").read_bytes(), "bin": (d / "valid.bin").read_bytes()}
        reference = {kind: self.imported(d / f"valid.{kind}", run_dir) for kind in ("db", "bin")}
        scale = 1 if self.quick else self.runs
        plan = ([("hcp", i) for i in range(12 * scale)] + [("hcpe", i) for i in range(6 * scale)]
                + [("db", i) for i in range(20 * scale)] + [("bin", i) for i in range(12 * scale)])
        counts: dict[str, int] = {}
        for kind, index in plan:
            rng = self.rng("fuzz", kind, index)
            how, data, expect = mutate(kind, valid[kind], rng)
            counts[how] = counts.get(how, 0) + 1
            source = run_dir / f"fuzz-{index}-{how}.{kind}"
            source.write_bytes(data)
            where = f"{source.name} ({len(data)} bytes)"
            if kind == "hcp":
                output = run_dir / "games.hcpe"
                argv = bookgen("selfplay", "--starts", source, "--games", "1", "-o", output,
                               "--playouts", "1", "--max-ply", "4")
            elif kind == "hcpe":
                output = run_dir / "model.pt"
                argv = bookgen("train", "--data", source, "-o", output, "--blocks", "1",
                               "--channels", "8", "--batch-size", "64", "--threads", "1")
            else:
                output = run_dir / "book.sqlite"
                existing = expect != "same" and rng.random() < 0.3
                if existing:
                    shutil.copyfile(d / "sample.sqlite", output)
                    before = book_content(output)
                argv = bookgen("import", source, "-b", output)
            outcome = run(argv, run_dir, timeout=300)
            codes = {2} if expect == "reject" else {0} if expect == "same" else {0, 2}
            if judge(tally, where, outcome, codes):
                lines = outcome.err.strip().splitlines()
                errors = [line for line in lines if line.startswith("bookgen: error:")]
                if outcome.rc == 2:
                    if len(errors) != 1 or lines[-1] != errors[0]:
                        tally.fail("exits", where, f"not one error line: {tail(outcome.err)}")
                    if kind in ("db", "bin") and existing:
                        if book_content(output) != before:
                            corrupt(tally, where, ["the book changed although import failed"])
                    elif output.exists():
                        corrupt(tally, where, [f"{output.name} written although it failed"])
                elif kind in ("db", "bin"):
                    if not integrity_ok(output):
                        corrupt(tally, where, ["book: integrity_check failed"])
                    elif not existing and not query(output, "SELECT count(*) FROM positions")[0][0]:
                        corrupt(tally, where, ["exit 0 with nothing imported"])
                    elif expect == "same" and set(book_content(output)["moves"]) != reference[kind]:
                        corrupt(tally, where, ["not what the original file imports"])
                elif not output.exists():
                    corrupt(tally, where, [f"exit 0 but no {output.name}"])
            check_leftovers(tally, where, run_dir, clean=outcome.rc == 0)
            for path in (source, output):
                path.unlink(missing_ok=True)
        tally.notes.append("files: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        self.cleanup(run_dir, tally)

    def imported(self, source: Path, run_dir: Path) -> set[tuple]:
        book = run_dir / "reference.sqlite"
        self.setup_command("import", source, "-b", book, cwd=run_dir)
        moves = set(book_content(book)["moves"])
        book.unlink()
        return moves

    # -- scenario 5 --------------------------------------------------------------

    def media_jobs(self, d: Path, out: Path) -> dict[str, tuple[str, list[object]]]:
        """name -> (what it writes: book, new or none, command) with the data in ``d``
        and a writable ``out``."""
        book, results = d / "book.sqlite", d / "results.sqlite"
        match = ["match", "--builtin", "a", "--builtin", "b", "--option", "a:depth=1",
                 "--option", "b:depth=2", "--nodes", "1", "--openings", d / "openings.txt",
                 "--max-ply", "40", "--quiet"]
        return {
            "grow": ("book", ["grow", "-b", book, "--positions", "6", "--playouts", "20"]),
            "import": ("book", ["import", SAMPLE, "-b", book]),
            "merge": ("book", ["merge", "-o", book, d / "sample.sqlite"]),
            "refine minimax": ("book", ["refine", "minimax", "-b", book]),
            "refine search": ("book", ["refine", "search", "-b", book, "--nodes", "300",
                                       "--limit", "3"]),
            "refine mistakes": ("book", ["refine", "mistakes", "-b", book]),
            "match": ("book", [*match, "--games", "8", "-o", results]),
            "import new": ("new", ["import", SAMPLE, "-b", d / "new.sqlite"]),
            "export": ("new", ["export", "-b", book, "-o", d / "book.db"]),
            "export apery": ("new", ["export", "-b", book, "-o", d / "book.bin", "--format",
                                     "apery"]),
            "starts": ("new", ["starts", "-b", book, "-o", d / "roots.hcp", "--format", "hcp"]),
            "suite": ("new", ["suite", "-b", book, "-o", d / "suite.txt", "--max-value",
                              "300"]),
            "selfplay": ("new", ["selfplay", "--starts", d / "valid.hcp", "--games", "2", "-o",
                                 d / "games.hcpe", "--playouts", "5", "--max-ply", "30",
                                 "--force"]),
            "train": ("new", ["train", "--data", d / "valid.hcpe", "-o", d / "model.pt",
                              "--blocks", "1", "--channels", "8", "--batch-size", "64",
                              "--threads", "1", "--force"]),
            "model init": ("new", ["model", "init", "-o", d / "init.pt", "--blocks", "1",
                                   "--channels", "8", "--force"]),
            "match new": ("new", [*match, "--games", "2", "-o", d / "new-results.sqlite",
                                  "--pgn", d / "games.pgn"]),
            "report": ("new", ["report", results, "-b", book, "-o", d / "report.html"]),
            "stats": ("none", ["stats", "-b", book]),
            "show": ("none", ["show", "-b", book, "startpos", "moves", "7g7f"]),
            "export out": ("none", ["export", "-b", book, "-o", out / "book.db"]),
            "starts out": ("none", ["starts", "-b", book, "-o", out / "starts.txt"]),
            "suite out": ("none", ["suite", "-b", book, "-o", out / "suite.txt",
                                   "--max-value", "300"]),
            "rate": ("none", ["rate", results]),
            "sprt": ("none", ["sprt", results, "--engine", "b", "--vs", "a", "--elo0", "0",
                              "--elo1", "50"]),
            "outcomes": ("none", ["outcomes", results]),
            "report out": ("none", ["report", results, "-b", book, "-o", out / "report.html"]),
        }

    MEDIA_FILES = ("book.sqlite", "results.sqlite", "sample.sqlite", "openings.txt",
                   "valid.hcp", "valid.hcpe")

    def media_data(self, target: Path) -> None:
        target.mkdir(exist_ok=True)
        for name in self.MEDIA_FILES:
            source = self.data / ("media.sqlite" if name == "book.sqlite" else name)
            shutil.copyfile(source, target / name)

    def read_only(self) -> None:
        tally = self.tally("5. read-only and full disks")
        for medium in ("file", "directory", "file system"):
            run_dir = self.fresh_dir("read-only " + medium)
            run_dir.chmod(0o755)
            d, out, logs = run_dir / "d", run_dir / "out", run_dir / "logs"
            self.media_data(d)
            out.mkdir()
            logs.mkdir()
            out.chmod(0o777)
            logs.chmod(0o777)
            for path in d.iterdir():
                path.chmod(0o444 if medium == "file" else 0o666)
            d.chmod(0o777 if medium == "file" else 0o555)
            before = {p.name: digest(p) for p in d.iterdir()}
            jobs = self.media_jobs(d, out)
            lines = []
            if medium == "file system":
                lines += [f"mount --bind {d} {d}", f"mount -o remount,bind,ro {d}"]
                wrapper = ["unshare", "-m"]
            else:
                wrapper = ["unshare", "-U"]  # an unprivileged user: permissions count
            lines += [shell_line(name, args, logs) for name, (_w, args) in jobs.items()]
            whole = run([*wrapper, "sh", "-c", "\n".join(lines)], run_dir, tag="script")
            d.chmod(0o755)
            self.judge_script(tally, f"read-only {medium}", whole)
            for name, (writes, _args) in jobs.items():
                where = f"read-only {medium}: {name}"
                refused = writes == "book" or (writes == "new" and medium != "file")
                outcome = script_outcome(logs, name)
                if judge(tally, where, outcome, {2} if refused else {0}, wrapped=True):
                    if refused and len(outcome.err.strip().splitlines()) != 1:
                        tally.fail("exits", where, f"not one line: {tail(outcome.err)}")
                    if refused and not any(w in outcome.err for w in ("read-only", "cannot write")):
                        tally.fail("exits", where, f"does not say read-only: {tail(outcome.err)}")
            after = {p.name: digest(p) for p in d.iterdir() if p.name in before}
            if after != before:
                corrupt(tally, f"read-only {medium}", [f"files changed: "
                        f"{sorted(k for k in before if before[k] != after.get(k))}"])
            extra = sorted(set(p.name for p in d.iterdir()) - set(before)
                           - ({"new.sqlite", "book.db", "book.bin", "roots.hcp", "suite.txt",
                               "games.hcpe", "model.pt", "init.pt", "new-results.sqlite",
                               "games.pgn", "report.html"} if medium == "file" else set()))
            if extra:
                tally.fail("leftovers", f"read-only {medium}", ", ".join(extra), len(extra))
            check_leftovers(tally, f"read-only {medium}", run_dir, clean=True)
            self.cleanup(run_dir, tally)

    def full_disks(self) -> None:
        tally = self.tally("5. read-only and full disks")
        # The room left on the disk, in KiB: up to about what each command needs.
        room = {"grow": 600, "import": 500, "merge": 500, "refine minimax": 200,
                "refine search": 120, "refine mistakes": 200, "match": 200, "import new": 500,
                "export": 60, "export apery": 40, "starts": 16, "suite": 16, "selfplay": 40,
                "train": 2600, "model init": 2600, "match new": 200, "report": 1200}
        rounds = 1 if self.quick else max(1, (self.runs + 1) // 2)
        for name, most in room.items():
            for index in range(rounds):
                rng = self.rng("full", name, index)
                kib = rng.randrange(0, most + 1)
                self.full_disk(tally, name, kib, index)
        self.full_disk(tally, None, 0, 0)
        tally.notes.append(f"{self.wal_kept} commands on a full disk committed but had no room "
                           "to fold SQLite's log into the file, and said so")

    def full_disk(self, tally: Tally, name: str | None, kib: int, index: int) -> None:
        """``name`` on a tmpfs with ``kib`` KiB of room, then on a larger one (None:
        the readers, with no room)."""
        run_dir = self.fresh_dir(f"full {name or 'readers'} {index}")
        d, out, logs, after = (run_dir / n for n in ("d", "out", "logs", "after"))
        for path in (d, out, logs, after):
            path.mkdir()
        staging = run_dir / "staging"
        self.media_data(staging)
        jobs = self.media_jobs(d, out)
        size = sum(p.stat().st_size for p in staging.iterdir()) // 1024 + kib + 16
        names = [name] if name else [n for n, (w, _a) in jobs.items() if w == "none"]
        lines = [f"mount -t tmpfs -o size={size}k tmpfs {d}", f"cp {staging}/* {d}/"]
        for job in names:
            lines.append(shell_line(job, jobs[job][1], logs))
        lines += [f"ls -a {d} > {logs}/listing-full", f"cp -r {d}/. {after}/"]
        if name:
            lines += [f"mount -o remount,size={size + 8192}k {d}",
                      shell_line(name + " again", jobs[name][1], logs),
                      f"ls -a {d} > {logs}/listing-again", f"mkdir {run_dir}/again",
                      f"cp -r {d}/. {run_dir}/again/"]
        whole = run(["unshare", "-m", "sh", "-c", "\n".join(lines)], run_dir, tag="script")
        where = f"full disk, {kib} KiB of room: " if name else "full disk: readers: "
        self.judge_script(tally, where.rstrip(": "), whole)
        if not name:
            for job in names:
                judge(tally, where + job, script_outcome(logs, job), {0}, wrapped=True)
            return self.cleanup(run_dir, tally)
        writes = jobs[name][0]
        first = script_outcome(logs, name)
        if judge(tally, where + name, first, {0, 2}, wrapped=True) and first.rc == 2:
            lines = first.err.strip().splitlines()
            if [line for line in lines if line.startswith("bookgen: error:")] != lines[-1:]:
                tally.fail("exits", where + name, f"not one error line: {tail(first.err)}")
        listing = (logs / "listing-full").read_text().split()
        temporary = [n for n in listing if n.endswith(".tmp")]
        if first.rc == 0 and "keep the files together" in first.err:
            self.wal_kept += 1  # no room to fold the log in, and it said so
        elif first.rc == 0:
            temporary += [n for n in listing if n.endswith(SIDE_SUFFIXES)]
        if temporary:
            tally.fail("leftovers", where + name, ", ".join(temporary), len(temporary))
        corrupt(tally, where + name,
                self.media_state(name, writes, staging, after, first.rc, final=False))
        again = script_outcome(logs, name + " again")
        if judge(tally, where + name + ", again on a larger disk", again, {0}, wrapped=True):
            listing = (logs / "listing-again").read_text().split()
            left = [n for n in listing if n.endswith((".tmp", *SIDE_SUFFIXES))]
            if left:
                tally.fail("leftovers", where + name + ", again", ", ".join(left), len(left))
        corrupt(tally, where + name + ", again",
                self.media_state(name, writes, staging, run_dir / "again", 0, final=True))
        self.cleanup(run_dir, tally)

    # Commands that write the book in one transaction (all or nothing), and the
    # files the other writers create.
    ONE_TRANSACTION = ("import", "merge", "refine minimax", "refine mistakes")
    OUTPUTS = {"import new": "new.sqlite", "export": "book.db", "export apery": "book.bin",
               "starts": "roots.hcp", "suite": "suite.txt", "train": "model.pt",
               "model init": "init.pt", "report": "report.html", "selfplay": "games.hcpe"}

    def media_reference(self, name: str) -> dict[str, list[tuple]]:
        """The book after ``name`` ran on an ordinary disk."""
        if name not in self.references:
            ref = self.fresh_dir("reference " + name)
            d, out = ref / "d", ref / "out"
            self.media_data(d)
            out.mkdir()
            self.setup_command(*self.media_jobs(d, out)[name][1], cwd=ref)
            self.references[name] = book_content(d / "book.sqlite")
            self.failures_at.pop(ref, None)
            shutil.rmtree(ref)
        return self.references[name]

    def media_state(self, name: str, writes: str, staging: Path, after: Path, rc: int,
                    final: bool) -> list[str]:
        """What is wrong with the files ``name`` left (copied to ``after``); ``final``:
        after the run on the larger disk, which marks a run the full disk stopped."""
        problems = []
        for file in ("book.sqlite", "results.sqlite", "new.sqlite", "new-results.sqlite"):
            if (after / file).exists() and not integrity_ok(after / file):
                problems.append(f"{file}: integrity_check failed")
        if problems:
            return problems
        book = after / "book.sqlite"
        if name in self.ONE_TRANSACTION:
            # All or nothing: the book as it was, or as an ordinary run leaves it.
            if rc == 2 and book_content(book) != book_content(staging / "book.sqlite"):
                problems.append("the book changed although the command failed")
            if rc == 0 and book_content(book) != self.media_reference(name):
                problems.append("the book differs from what the command gives on an ordinary "
                                "disk")
        else:
            bad = inconsistencies(book)
            if bad["positions"] or bad["moves"]:
                problems.append(f"inconsistent values: {bad['positions'][:2]} "
                                f"{bad['moves'][:2]}")
            problems += [f"grow run {r} counted {c} expansions but expanded {e}"
                         for r, c, e in expansion_mismatches(book)]
            problems += [f"refine search run {r} counted {c} analyses but holds {h}"
                         for r, c, h in analysis_mismatches(book)]
        output = after / self.OUTPUTS.get(name, "-")
        if rc == 2 and output.exists():
            if name != "selfplay":
                problems.append(f"{output.name} left although the command failed")
            elif output.stat().st_size % 38:
                problems.append(f"{output.name} holds a partial hcpe record")
        statuses = [r[0] for r in query(book, "SELECT status FROM runs")]
        if final and "running" in statuses:
            problems.append(f"a run is left running: {statuses}")
        return problems

    def judge_script(self, tally: Tally, where: str, whole: Outcome) -> None:
        """The wrapper script itself: it always exits 0; what bookgen left running."""
        if whole.orphans:
            tally.fail("orphans", where, "; ".join(whole.orphans), len(whole.orphans))
        if whole.rc != 0 or whole.hung:
            tally.fail("exits", where, f"the script failed ({whole.rc}): {tail(whole.err)}")

    # -- driving -----------------------------------------------------------------

    def tally(self, name: str) -> Tally:
        for tally in self.tallies:
            if tally.name == name:
                return tally
        tally = Tally(name)
        self.tallies.append(tally)
        return tally

    def cleanup(self, run_dir: Path, tally: Tally) -> None:
        """Remove a run's files unless something went wrong in it (then say where)."""
        if self.failures() == self.failures_at.pop(run_dir, 0):
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            tally.notes.append(f"[{tally.name}] files of the run above: {run_dir}")


def _run_index(runs: list[tuple], command: list) -> int:
    """Position of ``command``'s row among ``runs`` (command, params)."""
    for index, (name, params) in enumerate(runs):
        if name == "grow" and command[0] == "grow":
            if json.loads(params).get("seed") == int(command[command.index("--seed") + 1]):
                return index
        elif name == (" ".join(command[:2]) if command[0] == "refine" else command[0]):
            return index
    return len(runs)


def shell_line(name: str, args: list[object], logs: Path) -> str:
    base = shlex.quote(str(logs / name.replace(" ", "_")))
    command = " ".join(shlex.quote(str(a)) for a in bookgen(*args))
    return f"{command} >{base}.out 2>{base}.err </dev/null; echo $? >{base}.rc"


def script_outcome(logs: Path, name: str) -> Outcome:
    base = logs / name.replace(" ", "_")
    try:
        rc = int((base.with_suffix(".rc")).read_text())
    except (OSError, ValueError):
        return Outcome(-1000, "", "(did not run)", 0.0)
    return Outcome(rc, Path(str(base) + ".out").read_text(errors="replace"),
                   Path(str(base) + ".err").read_text(errors="replace"), 0.0)


# --------------------------------------------------------------------------
# mutations


def flip_bits(data: bytes, rng: random.Random, count: int) -> bytes:
    out = bytearray(data)
    for _ in range(count):
        bit = rng.randrange(len(out) * 8)
        out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def mutate(kind: str, valid: bytes, rng: random.Random) -> tuple[str, bytes, str]:
    """(how, the bytes, what bookgen must do: reject, same (as the valid file) or any)."""
    record = {"hcp": 32, "hcpe": 38, "bin": 16}.get(kind)
    hows = ["random", "truncated", "bits", "bytes"]
    if kind == "db":
        hows += ["utf-16", "utf-16-mutated", "cr", "crlf", "lines", "text-garbage"]
    if record:
        hows += ["records"]
    how = rng.choice(hows)
    if how == "random":
        size = rng.randrange(1, 64) * (record or 16) if rng.random() < 0.7 else \
            rng.randrange(1, 4000)
        return how, rng.randbytes(size), "reject"
    if how == "truncated":
        cut = rng.randrange(0, len(valid))
        whole = record is not None and cut % record == 0 and cut > 0
        return how, valid[:cut], "any" if whole or kind in ("db", "bin") else "reject"
    if how == "bits":
        return how, flip_bits(valid, rng, rng.choice([1, 1, 2, 3, 8, 32])), "any"
    if how == "bytes":
        out = bytearray(valid)
        at = rng.randrange(len(out))
        fill = rng.choice([b"\x00", b"\xff", bytes([rng.randrange(256)])])
        for i in range(at, min(len(out), at + rng.randrange(1, 40))):
            out[i] = fill[0]
        return how, bytes(out), "any"
    if how == "records":  # whole records dropped, repeated and shuffled
        records = [valid[i:i + record] for i in range(0, len(valid), record)]
        chosen = [rng.choice(records) for _ in range(rng.randrange(1, len(records) + 1))]
        return how, b"".join(chosen), "any"
    text = valid.decode()
    if how == "utf-16":
        encoding = rng.choice(["utf-16", "utf-16-le", "utf-16-be"])
        body = text if encoding == "utf-16" else "\ufeff" + text
        return how, body.encode(encoding), "same"
    if how == "utf-16-mutated":
        return how, flip_bits(text.encode("utf-16"), rng, rng.choice([1, 2, 4])), "any"
    if how == "cr":
        return how, text.replace("\n", "\r").encode(), "same"
    if how == "crlf":
        return how, text.replace("\n", "\r\n").encode(), "same"
    if how == "lines":
        lines = text.split("\n")
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(lines))
            action = rng.choice(["drop", "repeat", "swap", "cut"])
            if action == "drop":
                del lines[i]
            elif action == "repeat":
                lines.insert(i, lines[i])
            elif action == "swap":
                j = rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]
        return how, "\n".join(lines).encode(), "any"
    # text-garbage: printable lines that are no book
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 /+*-#\n"
    size = rng.randrange(1, 3000)
    return how, "".join(rng.choice(alphabet) for _ in range(size)).encode(), "reject"


# --------------------------------------------------------------------------
# the table


def print_table(tallies: list[Tally], seconds: float) -> None:
    width = max(len(t.name) for t in tallies) + 2
    header = f"{'scenario':<{width}}" + "".join(f"{c:>11}" for c in COLUMNS) + f"{'minutes':>9}"
    print(header)
    print("-" * len(header))
    total = dict.fromkeys(COLUMNS, 0)
    for tally in tallies:
        for column in COLUMNS:
            total[column] += tally.counts[column]
        print(f"{tally.name:<{width}}" + "".join(f"{tally.counts[c]:>11}" for c in COLUMNS)
              + f"{tally.seconds / 60:>9.1f}")
    print("-" * len(header))
    print(f"{'total':<{width}}" + "".join(f"{total[c]:>11}" for c in COLUMNS)
          + f"{seconds / 60:>9.1f}")


SCENARIOS = ("kill", "ctrl-c", "writers", "fuzz", "media")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8,
                        help="runs of each case (kill and Ctrl-C: per command; the default, "
                             "8, takes about 25 minutes on 2 cores)")
    parser.add_argument("--quick", action="store_true",
                        help="one run of each case, fewer fuzzed files (a few minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help=f"comma-separated scenarios among {', '.join(SCENARIOS)}")
    parser.add_argument("--keep", type=Path,
                        help="work in this directory and keep the files of failed runs")
    parser.add_argument("--json", type=Path, help="also write the counts to this file")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(SCENARIOS):
        parser.error(f"unknown scenarios: {', '.join(sorted(only - set(SCENARIOS)))}")
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        raise SystemExit("the campaign needs Linux and root (unshare, mount)")
    if not os.access(FAIRY, os.X_OK):
        raise SystemExit(f"{FAIRY} is missing (apt-get install fairy-stockfish)")
    runs = 1 if args.quick else args.runs
    become_subreaper()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bookgen-campaign-",
                                 dir=str(args.keep) if args.keep else None))
    work.chmod(0o755)
    campaign = Campaign(work, runs, args.seed, args.quick)
    start = time.monotonic()
    print(f"fault campaign: seed {args.seed}, {runs} runs per case, work in {work}", flush=True)
    try:
        campaign.prepare()
        steps: list[tuple[str, Callable[[], None]]] = []
        variants = campaign.variants()
        if only & {"kill", "ctrl-c"}:
            steps.append(("clean runs (calibration)", lambda: campaign.calibrate(variants)))
        if "kill" in only:
            steps.append(("1. kill -9", lambda: campaign.interrupt_scenario(
                "1. kill -9", signal.SIGKILL, variants)))
        if "ctrl-c" in only:
            steps.append(("2. Ctrl-C", lambda: campaign.interrupt_scenario(
                "2. Ctrl-C", signal.SIGINT, variants)))
        if "writers" in only:
            steps.append(("3. two writers", campaign.writers))
        if "fuzz" in only:
            steps.append(("4. fuzzed inputs", campaign.fuzz))
        if "media" in only:
            steps.append(("5. read-only and full disks", lambda: (campaign.read_only(),
                                                                  campaign.full_disks())))
        for title, step in steps:
            began = time.monotonic()
            print(f"{title} ...", flush=True)
            step()
            tally = campaign.tally(title)
            tally.seconds += time.monotonic() - began
            print(f"{title}: " + ", ".join(f"{c} {tally.counts[c]}" for c in COLUMNS)
                  + f" ({tally.seconds / 60:.1f} min)", flush=True)
    finally:
        seconds = time.monotonic() - start
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print_table(campaign.tallies, seconds)
    print()
    for tally in campaign.tallies:
        for note in tally.notes:
            print(note)
    if args.json:
        args.json.write_text(json.dumps({
            "seed": args.seed, "runs": runs, "seconds": round(seconds, 1),
            "scenarios": {t.name: t.counts for t in campaign.tallies}}, indent=2) + "\n")
    failures = sum(t.counts[c] for t in campaign.tallies for c in COLUMNS if c != "runs")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
