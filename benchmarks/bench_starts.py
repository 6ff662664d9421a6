"""Start-position export rate on a large book.

Uses the book that bench_formats.py imports (benchmarks/out/bookSIZE.sqlite;
generated and imported first when missing) or ``--book``, and times
``make_starts`` for each output format in a fresh process, printing the
positions written per second and the peak resident memory of that process
(and of its largest forked worker, which shares the pages it did not write).

    python benchmarks/bench_starts.py [--size 1000000] [--book FILE]
        [--formats hcp sfen usi psfen] [--from all] [--profile DIR]

``--profile DIR`` also writes a cProfile dump per format into DIR.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

_WRAPPER = """
import cProfile, json, resource, sys, time
from bookgen.selfplay.starts import StartsSettings, make_starts
out, book, fmt, source, profile = sys.argv[1:6]
profiler = cProfile.Profile() if profile else None
start = time.perf_counter()
if profiler:
    profiler.enable()
summary = make_starts(book, out, StartsSettings(format=fmt, source=source))
if profiler:
    profiler.disable()
    profiler.dump_stats(profile)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"written": summary.written, "seconds": seconds, "peak": peak,
                  "workers": workers}))
"""


def run(out: Path, book: Path, fmt: str, source: str, profile: str) -> dict:
    """Seconds inside make_starts and peak RSS (MB) of a fresh process and of its
    largest worker process (forked: it shares the pages it did not write)."""
    done = subprocess.run([sys.executable, "-c", _WRAPPER, str(out), str(book), fmt, source,
                           profile], check=True, stdout=subprocess.PIPE, text=True,
                          cwd=HERE.parent)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--book", type=Path, help="time this book instead")
    parser.add_argument("--formats", nargs="+", default=["hcp", "sfen", "usi", "psfen"])
    parser.add_argument("--from", dest="source", default="all")
    parser.add_argument("--profile", type=Path, help="write cProfile dumps here")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    book = args.book
    if book is None:
        book = OUT / f"book{args.size}.sqlite"
        if not book.exists():
            from bookgen.bookfiles.importer import import_books
            from generate_book import generate

            source = OUT / f"book{args.size}.db"
            if not source.exists():
                generate(source, args.size)
            import_books(book, [source], progress=False)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    for fmt in args.formats:
        profile = str(args.profile / f"starts.{fmt}.prof") if args.profile else ""
        result = run(OUT / f"starts{args.size}.{fmt}", book, fmt, args.source, profile)
        print(f"starts --format {fmt:<5} --from {args.source:<9} {result['written']:>9} "
              f"positions {result['seconds']:7.1f} s "
              f"{result['written'] / result['seconds']:>9.0f} positions/s  "
              f"peak {result['peak']:.0f} MB (workers {result['workers']:.0f} MB)", flush=True)


if __name__ == "__main__":
    main()
