"""Start-position export rate on a large book.

Uses the 1 M-position book that bench_formats.py imports (or imports it
first) and times ``make_starts`` for each output format, printing positions
written per second and peak memory.

    python benchmarks/bench_starts.py [--size 1000000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

from generate_book import generate  # noqa: E402

from bookgen.importer import import_books  # noqa: E402
from selfplay.starts import make_starts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    book = OUT / f"book{args.size}.sqlite"
    if not book.exists():
        source = OUT / f"book{args.size}.db"
        if not source.exists():
            generate(source, args.size)
        import_books([source], book, progress=False)
    for fmt in ("hcp", "sfen", "usi"):
        start = time.perf_counter()
        summary = make_starts(OUT / f"starts{args.size}.{fmt}", book, fmt=fmt)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"starts --format {fmt:<5} {summary['written']:>9} positions {seconds:7.1f} s "
              f"{summary['written'] / seconds:>9.0f} positions/s  peak {peak:.0f} MB",
              flush=True)


if __name__ == "__main__":
    main()
