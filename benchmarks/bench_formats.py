"""Import/export throughput and peak memory for large DB2016 and Apery books.

(Run with ``make bench``.)

Generates realistic books (benchmarks/generate_book.py) of 100 k and 1 M
positions once under benchmarks/out/, then times each operation in a fresh
process through the real CLI and prints positions/s, moves/s, the CPU seconds
of the process and its workers (on a busy machine they tell how much of the
wall time was waiting) and the peak resident memory of the process and of its
largest worker.

``--apery FILE.bin ...`` times only ``bookgen import`` of given Apery books
into fresh books. ``--anchor CHECKOUT`` runs every operation with another
checkout of bookgen too (its own ``.venv``, e.g. the main branch), right after
this one's, and prints its row and the ratios (this / anchor) below.

    python benchmarks/bench_formats.py [--sizes 100000 1000000]
                                       [--apery FILE.bin ...] [--anchor CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

from generate_book import generate  # noqa: E402

_WRAPPER = """
import resource, sys
from bookgen.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
    print(f"PEAK {own.ru_maxrss} {workers.ru_maxrss} {cpu}", file=sys.stderr)
"""


def run(args: list[str], python: str = sys.executable) -> dict:
    """Wall and CPU seconds, peak RSS in MB (main process, largest worker) and the
    standard output of one command."""
    start = time.perf_counter()
    done = subprocess.run([python, "-c", _WRAPPER, *args], check=True,
                          capture_output=True, text=True, cwd=OUT)
    elapsed = time.perf_counter() - start
    line = [x for x in done.stderr.splitlines() if x.startswith("PEAK ")][-1]
    own, workers, cpu = line.split()[1:]
    return {"seconds": elapsed, "cpu": float(cpu), "peak": int(own) / 1024,
            "worker": int(workers) / 1024, "stdout": done.stdout}


def remove_book(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def row(name: str, side: str, positions: int, moves: int, r: dict) -> str:
    seconds = r["seconds"]
    return (f"{name:<28} {side:<6} {positions:>10} {moves:>10} {seconds:>8.1f} "
            f"{positions / seconds:>9.0f} {moves / seconds:>9.0f} {r['cpu']:>7.1f} "
            f"{r['peak']:>8.0f} {r['worker']:>9.0f}")


def ratios(this: dict, anchor: dict) -> str:
    def ratio(key: str) -> str:
        return f"{this[key] / anchor[key]:.2f}x" if anchor[key] else "-"
    return (f"{'':<28} {'ratio':<6} {'':>10} {'':>10} {ratio('seconds'):>8} {'':>9} {'':>9} "
            f"{ratio('cpu'):>7} {ratio('peak'):>8} {ratio('worker'):>9}")


def measure(name: str, command: list[str], books: list[Path], anchor: str | None,
            counts: tuple[int, int] | None = None) -> None:
    """Run ``command`` (with this checkout, then the anchor's), removing ``books``
    before each; ``counts``: (positions, moves), else read from its --json output."""
    for side, python in (("this", sys.executable), ("anchor", anchor)):
        if python is None:
            continue
        for book in books:
            remove_book(book)
        result = run(command, python)
        if counts is None:
            summary = json.loads(result["stdout"])
            counts = summary["positions_read"], summary["moves_read"]
        print(row(name, side, *counts, result), flush=True)
        if side == "this":
            this = result
        else:
            print(ratios(this, result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--apery", type=Path, nargs="+",
                        help="Apery books to time the import of (instead of --sizes)")
    parser.add_argument("--anchor", type=Path,
                        help="another bookgen checkout (with its .venv) to compare with")
    args = parser.parse_args()
    anchor = None
    if args.anchor:
        anchor = str(args.anchor.resolve() / ".venv" / "bin" / "python")
        if not Path(anchor).exists():
            parser.error(f"{anchor}: no such file")
    OUT.mkdir(exist_ok=True)
    print(f"{'operation':<28} {'side':<6} {'positions':>10} {'moves':>10} {'seconds':>8} "
          f"{'pos/s':>9} {'moves/s':>9} {'cpu s':>7} {'peak MB':>8} {'worker MB':>9}")
    if args.apery:
        for source in args.apery:
            book = OUT / f"apery-{source.stem}.sqlite"
            measure(f"import apery {source.name}"[:28],
                    ["import", "--json", str(source.resolve()), "-b", str(book)], [book],
                    anchor)
            remove_book(book)
        return
    for size in args.sizes:
        source = OUT / f"book{size}.db"
        if not source.exists():
            generate(source, size)
        moves = sum(1 for line in open(source) if line and line[0] not in "s#")
        book = OUT / f"book{size}.sqlite"
        apery_book = OUT / f"apery{size}.sqlite"
        steps = [
            ("import db2016 (new book)", ["import", str(source), "-b", str(book)], [book]),
            ("export db2016", ["export", "-b", str(book), "-o", str(OUT / f"exp{size}.db")],
             []),
            ("export apery", ["export", "-b", str(book), "--format", "apery",
                              "-o", str(OUT / f"exp{size}.bin")], []),
            ("import db2016 (merge, same)", ["import", str(source), "-b", str(book)], []),
            ("import apery (walk)", ["import", str(OUT / f"exp{size}.bin"),
                                     "-b", str(apery_book)], [apery_book]),
        ]
        for name, command, books in steps:
            # the merge imports into the book of the first step, as it is after it
            measure(name, command, books,
                    anchor if name != "import db2016 (merge, same)" else None,
                    (size, moves))


if __name__ == "__main__":
    main()
