"""bookgen's minimax against YaneuraOu's ``makebook peta_shock``, side by side.

On the same DB2016 book (generated once under benchmarks/out/peta/ by
benchmarks/generate_book.py, or given with ``--books``), each in a fresh
process:

- ``peta``: ``makebook peta_shock IN OUT`` of the binary given with ``--peta``,
  file to file, with ``Threads 1`` (each search thread adds about 110 MB to its
  peak). Build it outside the project from YaneuraOu's public source (never
  commit either): in ``source/``, ``make normal TARGET_CPU=AVX2
  YANEURAOU_EDITION=YANEURAOU_ENGINE_MATERIAL COMPILER=g++
  EXTRA_CPPFLAGS=-DHASH_KEY_BITS=128``;
- ``file``: ``bookgen refine minimax --in IN --out OUT``, file to file;
- ``import``: ``bookgen import IN`` into a new SQLite book;
- ``refine``: ``bookgen refine minimax`` on that imported book;
- ``export``: ``bookgen export --values minimax`` of the refined book;
- ``sqlite``: the three above together, the whole job through the SQLite book;
- ``base`` (with ``--baseline PYTHON``): the file to file refine of another
  checkout's bookgen (its venv's interpreter), to measure a change before and
  after in one run; its output must be the same bytes. With the SQLite runs,
  ``base-ref`` too: that bookgen's ``refine minimax`` on a copy of the same
  imported book, whose export must be the same bytes as well.

``--runs file`` leaves out the SQLite runs (``--runs sqlite`` the file run).

For each: wall seconds, CPU seconds and peak resident memory, worker
processes included (``os.wait4`` of the process: its own peak and that of
the largest process it waited for; CPU summed over them), and the ratio of the
wall time to peta_shock's. Then the values: ``file`` and ``sqlite`` must write
the same bytes, and the best value of every position must equal peta_shock's
wherever peta_shock's own output is self-consistent there (its best move's
value is minus the best value it wrote for the child, or the book's value of a
move out of the book). peta_shock writes CRLF, ``none`` ponders, no counts,
depth 9999 for lines ending in repetition and ties one lower, as bookgen does.
Without ``--peta`` bookgen's numbers are printed alone.

The machine may be shared: the load average is printed before and after, and
CPU seconds tell how much of the wall time was waiting.

    python benchmarks/bench_peta.py [--peta PATH] [--sizes 100000 1000000]
                                    [--books BOOK.db ...] [--runs file sqlite]
                                    [--baseline PYTHON]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import cshogi

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "peta"
sys.path.insert(0, str(HERE))

from generate_book import generate  # noqa: E402

GOALS = {"file": 0.5, "sqlite": 1.0, "refine": 0.3}   # wall time, times peta_shock's


@dataclass
class Run:
    name: str
    wall: float
    cpu: float
    peak_mb: float

    def plus(self, other: Run, name: str) -> Run:
        return Run(name, self.wall + other.wall, self.cpu + other.cpu,
                   max(self.peak_mb, other.peak_mb))


def measure(name: str, command: list[str]) -> Run:
    """Run ``command``; wall and CPU seconds and peak RSS of its process tree. Run from
    the temporary directory, so that ``python -m bookgen`` takes the bookgen of that
    interpreter's checkout (not the current directory's)."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors,
                                   cwd=tempfile.gettempdir())
        _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{name}: exit {process.returncode}: {' '.join(command)}\n"
                             f"{errors.read().decode(errors='replace')}")
    return Run(name, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def bookgen(*args: object, python: str = sys.executable) -> list[str]:
    return [python, "-m", "bookgen", *map(str, args)]


def peta_command(peta: Path, source: Path, out: Path) -> list[str]:
    commands = ["setoption name Threads value 1", "setoption name USI_Hash value 1",
                "setoption name BookFile value no_book",
                f"setoption name BookDir value {out.parent}",
                f"makebook peta_shock {source} {out}", "quit"]
    argv = [str(peta)]
    for command in commands:
        argv += [command, ","]
    return argv[:-1]


def remove_book(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-lock"):
        Path(str(path) + suffix).unlink(missing_ok=True)


# -- values ----------------------------------------------------------------------------


def read_blocks(path: Path) -> dict[str, list[list[str]]]:
    """sfen (no move number) -> its move lines' fields, best first."""
    blocks: dict[str, list[list[str]]] = {}
    current: list[list[str]] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("sfen "):
                current = blocks.setdefault(line[5:].rsplit(" ", 1)[0], [])
            elif line and not line.startswith("#"):
                current.append(line.split())
    return blocks


class _Values:
    """Best values of bookgen's output against peta_shock's, and why they differ."""

    def __init__(self, source: Path, ours: Path, peta: Path) -> None:
        self.mine, self.theirs, self.given = (read_blocks(ours), read_blocks(peta),
                                              read_blocks(source))
        self.board = cshogi.Board()
        self.children: dict[tuple[str, str], str] = {}
        self.why: dict[str, str] = {}

    def best(self, blocks: dict[str, list[list[str]]], sfen: str) -> int | None:
        moves = blocks.get(sfen)
        return int(moves[0][2]) if moves else None

    def child(self, sfen: str, move: str) -> str:
        key = (sfen, move)
        if key not in self.children:
            self.board.set_sfen(sfen + " 1")
            self.board.push_usi(move)
            self.children[key] = self.board.sfen().rsplit(" ", 1)[0]
        return self.children[key]

    def explain(self, start: str) -> str:
        """Why the best values at ``start`` differ: ``graph`` (a position below where
        peta_shock has other moves than bookgen: its keys take a position and its
        colour-flipped one for the same), ``peta`` (a position below where peta_shock's
        best value is not what its own moves give) or ``bookgen`` (neither)."""
        stack, seen = [start], set()
        while stack:
            sfen = stack.pop()
            if sfen in seen:
                continue
            seen.add(sfen)
            ours, theirs = self.mine[sfen], self.theirs.get(sfen, [])
            if {m[0] for m in ours} != {m[0] for m in theirs}:
                return "graph"
            below = []
            for move in theirs:
                child = self.child(sfen, move[0])
                if child in self.mine and self.best(self.mine, child) != \
                        self.best(self.theirs, child):
                    below.append(child)
            if below:
                stack.extend(below)
                continue
            if not self.consistent(sfen):
                return "peta"
        return "bookgen"

    def consistent(self, sfen: str) -> bool:
        """Whether peta_shock's best value at ``sfen`` is the best its moves give."""
        values = []
        stored = {m[0]: m for m in self.given.get(sfen, [])}
        for move in self.theirs[sfen]:
            child = self.child(sfen, move[0])
            if child in self.theirs:
                values.append(-int(self.theirs[child][0][2]) if move[3] != "9999" else 0)
            else:
                fields = stored.get(move[0], [])
                values.append(int(fields[2]) if len(fields) > 2 and fields[2] != "none"
                              else 0)
        return bool(values) and max(values) == int(self.theirs[sfen][0][2])

    def report(self) -> str:
        same, why = 0, {"graph": 0, "peta": 0, "bookgen": 0}
        examples = []
        for sfen in self.mine:
            if self.best(self.mine, sfen) == self.best(self.theirs, sfen):
                same += 1
                continue
            reason = self.explain(sfen)
            why[reason] += 1
            if reason == "bookgen" and len(examples) < 3:
                examples.append(f"{sfen}: bookgen {self.best(self.mine, sfen)}, peta_shock "
                                f"{self.best(self.theirs, sfen)}")
        text = (f"best values of {len(self.mine)} positions: {same} equal to peta_shock's; "
                f"differ: {why['graph']} where peta_shock's graph differs below (its keys "
                f"join colour-flipped positions), {why['peta']} where its own output is "
                f"not self-consistent below, {why['bookgen']} otherwise")
        return text + "".join(f"\n    {example}" for example in examples)


def compare_values(source: Path, ours: Path, peta: Path) -> str:
    """How the best values of ``ours`` compare with peta_shock's."""
    return _Values(source, ours, peta).report()


# -- the runs --------------------------------------------------------------------------


def book_of(size: int) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"book{size}.db"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        generate(path, size)
    return path


def bench(source: Path, peta: Path | None, parts: list[str], baseline: str | None) -> None:
    work = OUT / f"work-{source.stem}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    positions = sum(1 for line in open(source, "rb") if line.startswith(b"sfen "))
    print(f"\n== {source} ({positions} positions, {source.stat().st_size / 1e6:.0f} MB); "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    runs: dict[str, Run] = {}
    if peta is not None:
        runs["peta"] = measure("peta", peta_command(peta, source.resolve(),
                                                    (work / "peta.db").resolve()))
    if baseline is not None:
        runs["base"] = measure("base", bookgen("refine", "minimax", "--in", source, "--out",
                                               work / "base.db", python=baseline))
    if "file" in parts:
        runs["file"] = measure("file", bookgen("refine", "minimax", "--in", source,
                                               "--out", work / "file.db"))
    book = work / "book.sqlite"
    imported = work / "imported.sqlite"
    if "sqlite" in parts:
        runs["import"] = measure("import", bookgen("import", source, "-b", book))
        shutil.copyfile(book, imported)
        if baseline is not None:
            base_book = work / "base.sqlite"
            shutil.copyfile(book, base_book)
            runs["base-ref"] = measure("base-ref", bookgen("refine", "minimax", "-b",
                                                           base_book, python=baseline))
            measure("base-exp", bookgen("export", "--values", "minimax", "-b", base_book,
                                        "-o", work / "base-sqlite.db"))
            remove_book(base_book)
        runs["refine"] = measure("refine", bookgen("refine", "minimax", "-b", book))
        runs["export"] = measure("export", bookgen("export", "--values", "minimax", "-b",
                                                   book, "-o", work / "sqlite.db"))
        runs["sqlite"] = runs["import"].plus(runs["refine"], "sqlite").plus(runs["export"],
                                                                             "sqlite")
    anchor = runs.get("peta")
    print(f"{'run':<8} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'x peta':>7} {'goal':>6}")
    for name in ("peta", "base", "file", "sqlite", "import", "base-ref", "refine", "export"):
        if name not in runs:
            continue
        run = runs[name]
        ratio = f"{run.wall / anchor.wall:7.2f}" if anchor else f"{'-':>7}"
        goal = f"{GOALS[name]:6.1f}" if name in GOALS else f"{'':>6}"
        if name == "base-ref":
            goal = f"{GOALS['refine']:6.1f}"
        print(f"{name:<8} {run.wall:>8.1f} {run.cpu:>8.1f} {run.peak_mb:>8.0f} {ratio} {goal}",
              flush=True)
    ours = work / ("file.db" if "file" in parts else "sqlite.db")
    if "file" in parts and "sqlite" in parts:
        same = (work / "file.db").read_bytes() == (work / "sqlite.db").read_bytes()
        print(f"file to file and through the SQLite book write the same bytes: {same}")
    if baseline is not None:
        same = (work / "base.db").read_bytes() == ours.read_bytes()
        print(f"the baseline ({baseline}) writes the same bytes: {same}")
        if "sqlite" in parts:
            same = (work / "base-sqlite.db").read_bytes() == (work / "sqlite.db").read_bytes()
            print(f"the baseline's refine and export write the same bytes: {same}")
    if anchor:
        print(compare_values(source, ours, work / "peta.db"))
    print(f"load average after: {os.getloadavg()[0]:.2f} (a shared machine: compare CPU "
          "seconds too)")
    remove_book(book)
    remove_book(imported)
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peta", type=Path, help="the YaneuraOu binary with makebook peta_shock")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--books", type=Path, nargs="+", help="DB2016 books to use instead")
    parser.add_argument("--runs", nargs="+", choices=["file", "sqlite"],
                        default=["file", "sqlite"],
                        help="bookgen's runs: file to file, and/or import + refine + export")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also run the file to file refine (and, with the SQLite runs, "
                        "the refine of the same imported book) with this interpreter's "
                        "bookgen (another checkout's venv: before and after in one run)")
    args = parser.parse_args()
    if args.peta is not None and not os.access(args.peta, os.X_OK):
        raise SystemExit(f"{args.peta}: not an executable")
    for source in args.books or [book_of(size) for size in args.sizes]:
        bench(source.resolve(), args.peta, args.runs, args.baseline)


if __name__ == "__main__":
    main()
