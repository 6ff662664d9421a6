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

With ``--network BLOCKSxCHANNELS`` it measures cross-search batching instead: a
dlshogi-shaped network of that size (random weights, made here) grows a fresh
book with ``--parallel-searches`` 1, 4, 16 (``--searches``) at one evaluator
batch size, next to one search at ``--batch-size 16``, and prints positions/s,
the mean network batch, the share of time outside the evaluator and the speed
against one search at the same batch size. Every row runs in one process, one
after another, on the device given (``--device``, printed)::

    python benchmarks/bench_grow.py --network 5x64 [--runtime onnx] [--device cpu]
        [--network-positions 32] [--network-playouts 800] [--batch 64]
        [--searches 1,4,16] [--threads N]
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


def run_network(args: argparse.Namespace) -> None:
    from bookgen.engines.network.dlshogi_models import (
        DlshogiArchitecture,
        build_network,
        state_to_npz,
    )
    from bookgen.engines.network.model import export_onnx
    from bookgen.grow.settings import BookMoveRule

    blocks, channels = (int(part) for part in args.network.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        import numpy as np
        import torch

        torch.manual_seed(0)
        model = build_network(DlshogiArchitecture("resnet", blocks, channels, 256, 57))
        path = Path(tmp) / f"resnet{blocks}x{channels}.npz"
        np.savez(path, **state_to_npz(model.state_dict()))
        if args.runtime == "onnx":
            export_onnx(path, path.with_suffix(".onnx"))
            path = path.with_suffix(".onnx")
        spec = f"{args.runtime}:{path}"
        rows = [(1, 16)] + [(searches, args.batch) for searches in
                            (int(text) for text in args.searches.split(","))]
        base: float | None = None
        for searches, batch in rows:
            options: dict = {"batch_size": batch, "device": args.device}
            if args.threads:
                options["threads"] = args.threads
            settings = GrowSettings(
                evaluator=EvaluatorSettings(spec, options),
                budget=GrowBudget(positions=args.network_positions),
                mcts=MctsSettings(playouts=args.network_playouts, batch_size=batch),
                book_moves=BookMoveRule(), seed=1, parallel_searches=searches)
            with tempfile.TemporaryDirectory() as books:
                summary = grow(Path(books) / "book.sqlite", settings, progress=False)
            if searches == 1 and batch == args.batch:
                base = summary.positions_per_second
            ratio = (f"x{summary.positions_per_second / base:.2f}" if base else "")
            print(f"{args.runtime} {args.network} {args.device:<5} "
                  f"--parallel-searches {searches:>3} --batch-size {batch:>3}  "
                  f"{summary.expansions:>4} positions {summary.seconds:>7.1f} s  "
                  f"{summary.positions_per_second:>6.2f} pos/s  "
                  f"{summary.evaluations / summary.seconds:>6.0f} evals/s  "
                  f"mean batch {summary.mean_batch:>5.1f}  "
                  f"outside evaluator {100 * summary.outside_evaluator_share:5.1f}%  {ratio}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", help="BLOCKSxCHANNELS: measure cross-search batching")
    parser.add_argument("--runtime", choices=["onnx", "torch"], default="onnx")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--network-positions", type=int, default=32)
    parser.add_argument("--network-playouts", type=int, default=800)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0,
                        help="the network's CPU threads (0: the evaluator's default)")
    parser.add_argument("--searches", default="1,4,16")
    parser.add_argument("--positions", type=int, default=400,
                        help="positions to expand with the built-in evaluator")
    parser.add_argument("--engine-positions", type=int, default=80,
                        help="positions to expand with Fairy-Stockfish")
    parser.add_argument("--playouts", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=20000)
    args = parser.parse_args()
    if args.network:
        run_network(args)
        return
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
