"""Import/export throughput and peak memory for large DB2016 and Apery books.

(Run with ``make bench``.)

Generates realistic books (benchmarks/generate_book.py) of 100 k and 1 M
positions once under benchmarks/out/, then times each operation in a fresh
process through the real CLI and prints positions/s, moves/s and the peak
resident memory of that process.

    python benchmarks/bench_formats.py [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
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
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"PEAK {own} {workers}", file=sys.stderr)
"""


def run(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds and peak RSS in MB (main process, largest worker) of one command."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *args], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    line = [x for x in done.stderr.splitlines() if x.startswith("PEAK ")][-1]
    own, workers = (int(x) / 1024 for x in line.split()[1:])
    return elapsed, own, workers


def remove_book(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    print(f"{'operation':<28} {'positions':>10} {'moves':>10} {'seconds':>8} "
          f"{'pos/s':>9} {'moves/s':>9} {'peak MB':>8} {'worker MB':>9}")
    for size in args.sizes:
        source = OUT / f"book{size}.db"
        if not source.exists():
            generate(source, size)
        moves = sum(1 for line in open(source) if line and line[0] not in "s#")
        book = OUT / f"book{size}.sqlite"
        remove_book(book)
        steps = [
            ("import db2016 (new book)", ["import", str(source), "-b", str(book)]),
            ("export db2016", ["export", "-b", str(book), "-o", str(OUT / f"exp{size}.db")]),
            ("export apery", ["export", "-b", str(book), "--format", "apery",
                              "-o", str(OUT / f"exp{size}.bin")]),
            ("import db2016 (merge, same)", ["import", str(source), "-b", str(book)]),
        ]
        apery_book = OUT / f"apery{size}.sqlite"
        remove_book(apery_book)
        steps.append(("import apery (walk)", ["import", str(OUT / f"exp{size}.bin"),
                                              "-b", str(apery_book)]))
        for name, command in steps:
            seconds, peak, worker = run(command)
            print(f"{name:<28} {size:>10} {moves:>10} {seconds:>8.1f} {size / seconds:>9.0f} "
                  f"{moves / seconds:>9.0f} {peak:>8.0f} {worker:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
