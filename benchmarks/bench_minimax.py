"""Speed and peak memory of ``bookgen refine minimax`` on large books.

Generates realistic books (benchmarks/generate_book.py: DB2016 text, then
``bookgen import``) of 10 k, 100 k and 1 M positions once under
benchmarks/out/minimax/, then refines a fresh copy of each in a new process
and prints the time to build the graph (legal moves of every position, child
keys), to propagate the values, to write them, the total, and the peak
resident memory of the process and of its graph workers
(``resource.getrusage``). CPU seconds are printed too: on a busy machine they
tell how much of the wall time was waiting. ``--again`` refines each copy a
second time (nothing changed: the write only reads what the first one stored).

``--books`` refines copies of given imported books instead (the originals are
never written). ``--anchor CHECKOUT`` refines the same copies with another
checkout of bookgen too (its own ``.venv``, e.g. the main branch), one after
the other in the same run, and prints its rows and the ratios (this / anchor)
below each.

    python benchmarks/bench_minimax.py [--sizes 10000 100000 1000000]
                                       [--methods retrograde negascout]
                                       [--books BOOK.sqlite ...] [--anchor CHECKOUT]
                                       [--again]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "minimax"
sys.path.insert(0, str(HERE))

from generate_book import generate  # noqa: E402

_WRAPPER = """
import json, resource, sys
from bookgen.refine.minimax import MinimaxSettings, refine_minimax
summary = refine_minimax(sys.argv[1], MinimaxSettings(method=sys.argv[2])).as_dict()
own = resource.getrusage(resource.RUSAGE_SELF)
workers = resource.getrusage(resource.RUSAGE_CHILDREN)
summary["peak_mb"] = own.ru_maxrss / 1024
summary["worker_peak_mb"] = workers.ru_maxrss / 1024
summary["cpu_seconds"] = own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
print(json.dumps(summary))
"""


def remove_book(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def prepare(size: int) -> Path:
    """The imported book of ``size`` positions (generated and imported once)."""
    OUT.mkdir(parents=True, exist_ok=True)
    source = OUT / f"book{size}.db"
    book = OUT / f"book{size}.sqlite"
    if not source.exists():
        generate(source, size)
    if not book.exists():
        subprocess.run([sys.executable, "-m", "bookgen.cli", "import", str(source), "-b",
                        str(book)], check=True, stdout=subprocess.DEVNULL)
    return book


def measure(book: Path, method: str, python: str = sys.executable, runs: int = 1
            ) -> list[dict]:
    """Summaries of ``runs`` refines, one after the other, of a fresh copy of ``book``
    with ``python`` (its bookgen), each in a new process."""
    OUT.mkdir(parents=True, exist_ok=True)
    work = OUT / f"work-{book.name}"
    remove_book(work)
    shutil.copyfile(book, work)
    summaries = []
    try:
        for _ in range(runs):
            done = subprocess.run([python, "-c", _WRAPPER, str(work), method], check=True,
                                  capture_output=True, text=True, cwd=OUT)
            summaries.append(json.loads(done.stdout.splitlines()[-1]))
    finally:
        remove_book(work)
    return summaries


def row(label: str, method: str, s: dict) -> str:
    t = s["seconds"]
    return (f"{label:<7} {method:<11} {s['positions']:>9} {s['edges']:>9} "
            f"{s['transposition_edges']:>8} {s['positions_in_cycles']:>9} "
            f"{t['graph']:>8.1f} {t['propagate']:>9.1f} {t['write']:>8.1f} "
            f"{t['total']:>8.1f} {s['cpu_seconds']:>7.1f} {s['peak_mb']:>8.0f} "
            f"{s['worker_peak_mb']:>9.0f}")


def ratios(this: dict, anchor: dict) -> str:
    def r(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"
    t, a = this["seconds"], anchor["seconds"]
    return (f"{'ratio':<7} {'':<11} {'':>9} {'':>9} {'':>8} {'':>9} "
            f"{r(t['graph'], a['graph']):>8} {r(t['propagate'], a['propagate']):>9} "
            f"{r(t['write'], a['write']):>8} {r(t['total'], a['total']):>8} "
            f"{r(this['cpu_seconds'], anchor['cpu_seconds']):>7} "
            f"{r(this['peak_mb'], anchor['peak_mb']):>8} "
            f"{r(this['worker_peak_mb'], anchor['worker_peak_mb']):>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--methods", nargs="+", default=["retrograde"],
                        choices=["retrograde", "negascout"])
    parser.add_argument("--books", type=Path, nargs="+",
                        help="imported books to refine copies of (instead of --sizes)")
    parser.add_argument("--anchor", type=Path,
                        help="another bookgen checkout (with its .venv) to compare with")
    parser.add_argument("--again", action="store_true",
                        help="refine each copy a second time (an unchanged book)")
    args = parser.parse_args()
    anchor = None
    if args.anchor:
        anchor = str(args.anchor.resolve() / ".venv" / "bin" / "python")
        if not Path(anchor).exists():
            parser.error(f"{anchor}: no such file")
    print(f"{'side':<7} {'method':<11} {'positions':>9} {'edges':>9} {'transp.':>8} "
          f"{'in cycles':>9} {'graph s':>8} {'propag. s':>9} {'write s':>8} {'total s':>8} "
          f"{'cpu s':>7} {'peak MB':>8} {'worker MB':>9}")
    for book in args.books or [prepare(size) for size in args.sizes]:
        for method in args.methods:
            runs = 2 if args.again else 1
            these = measure(book, method, runs=runs)
            others = measure(book, method, anchor, runs) if anchor else [None] * runs
            for run, (this, other) in enumerate(zip(these, others)):
                label = "again" if run else method
                print(row("this", label, this), flush=True)
                if other is not None:
                    print(row("anchor", label, other), flush=True)
                    print(ratios(this, other), flush=True)


if __name__ == "__main__":
    main()
