"""Re-search throughput: ``refine search`` with Fairy-Stockfish at a fixed node budget.

Grows a book with the built-in evaluator once, then re-searches all of its
positions with 1 and 2 workers (each run on a fresh copy of the book) and
prints positions/s, the time per position and the 2-worker speed-up. The
engine's own share is estimated from the nodes searched and its speed.

    python benchmarks/bench_refine_search.py [--positions 120] [--nodes 20000]
                                             [--workers 1 2]

With 2 workers the wall time includes spawning the worker processes and
starting one engine each.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from bookgen.engines.mcts import MctsSettings
from bookgen.engines.settings import engine_settings
from bookgen.grow import GrowBudget, GrowSettings, grow
from bookgen.refine.book_search import search
from bookgen.refine.settings import SearchSettings

FAIRY = "/usr/games/fairy-stockfish"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=120,
                        help="positions grown (and then re-searched)")
    parser.add_argument("--nodes", type=int, default=20000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if not Path(FAIRY).exists():
        print(f"{FAIRY} missing: nothing to measure", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "grown.sqlite"
        start = time.perf_counter()
        grow(source, GrowSettings(mcts=MctsSettings(playouts=30),
                                  budget=GrowBudget(positions=args.positions), seed=1),
             progress=False)
        print(f"grown {args.positions} positions with the built-in evaluator in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        rates: dict[int, float] = {}
        for workers in args.workers:
            book = Path(tmp) / f"book{workers}.sqlite"
            shutil.copy(source, book)
            settings = SearchSettings(engine_settings(f"usi:{FAIRY}", nodes=args.nodes),
                                      workers=workers)
            summary = search(book, settings, progress=False)
            conn = sqlite3.connect(book)
            nodes = conn.execute("SELECT sum(nodes) FROM analyses").fetchone()[0] or 0
            conn.close()
            rates[workers] = summary.positions_per_second
            print(f"fairy-stockfish, {args.nodes} nodes, workers={workers}: "
                  f"{summary.analysed:>4} positions in {summary.seconds:6.1f} s  "
                  f"{summary.positions_per_second:7.2f} pos/s  "
                  f"{1000 * summary.seconds / max(1, summary.analysed):6.1f} ms/pos  "
                  f"{nodes / summary.seconds / 1000:6.0f} knodes/s overall", flush=True)
        if 1 in rates and len(rates) > 1:
            for workers, rate in rates.items():
                if workers != 1 and rates[1]:
                    print(f"speed-up with {workers} workers: {rate / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
