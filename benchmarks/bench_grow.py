"""Growth throughput: positions expanded per second and where the time goes.

For the built-in evaluator (MCTS leaf search) and Fairy-Stockfish (MultiPV
analysis at a fixed node budget), with 1 and 2 workers, grows a fresh book
for a fixed number of positions and prints positions/s, the share of wall
time spent outside the evaluator (single worker: everything that is not
``evaluate()``), and the 2-worker speed-up.

    python benchmarks/bench_grow.py [--positions 400] [--engine-positions 80]
                                    [--playouts 100] [--nodes 20000]

A count of 0 skips that evaluator. With 2 workers the time outside the evaluator
includes starting the worker processes (spawned, each loading its own evaluator).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bookgen.engines.mcts import MctsSettings
from bookgen.grow import EvaluatorSettings, GrowBudget, GrowSettings, grow

FAIRY = "/usr/games/fairy-stockfish"


def run(label: str, positions: int, workers: int, evaluator: EvaluatorSettings,
        mcts: MctsSettings) -> float:
    settings = GrowSettings(evaluator=evaluator, budget=GrowBudget(positions=positions),
                            mcts=mcts, workers=workers, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        summary = grow(Path(tmp) / "book.sqlite", settings, progress=False)
    rate = summary.positions_per_second
    outside = 1 - summary.eval_seconds * 1.0 / (summary.seconds * workers)
    print(f"{label:<34} workers={workers}  {summary.expansions:>4} positions "
          f"{summary.seconds:>7.1f} s  {rate:>7.2f} pos/s  "
          f"{summary.evaluations / summary.seconds:>8.0f} evals/s  "
          f"outside evaluator {100 * outside:5.1f}%", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=400,
                        help="positions to expand with the built-in evaluator")
    parser.add_argument("--engine-positions", type=int, default=80,
                        help="positions to expand with Fairy-Stockfish")
    parser.add_argument("--playouts", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=20000)
    args = parser.parse_args()
    for label, positions, evaluator, mcts in (
        (f"builtin, {args.playouts} playouts", args.positions, EvaluatorSettings("builtin"),
         MctsSettings(playouts=args.playouts)),
        (f"fairy-stockfish, {args.nodes} nodes", args.engine_positions,
         EvaluatorSettings(f"usi:{FAIRY}", {"nodes": args.nodes}), MctsSettings()),
    ):
        if positions <= 0:  # e.g. --engine-positions 0: only the built-in rows
            continue
        if evaluator.spec.startswith("usi:") and not Path(FAIRY).exists():
            print(f"{FAIRY} missing: skipped", file=sys.stderr)
            continue
        one = run(label, positions, 1, evaluator, mcts)
        two = run(label, positions, 2, evaluator, mcts)
        print(f"{'':<34} scaling 1 -> 2 workers: x{two / one:.2f}")


if __name__ == "__main__":
    main()
