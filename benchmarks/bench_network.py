"""Positions per second of the network evaluators (torch and ONNX) by batch size.

Creates the default 5 x 64 model (``bookgen model init``) and its ONNX export
in a temporary directory, then times, on random legal positions:

- ``network``: the forward pass alone on precomputed features;
- ``evaluate``: ``Evaluator.evaluate`` end to end (features, legal-move
  labels, softmax over legal moves, Evaluation objects).

Each figure is the best of ``--repeats`` runs of ``--seconds`` each.

    python benchmarks/bench_network.py [--threads N] [--seconds 2] [--repeats 3]
        [--batches 1,64]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cshogi

from bookgen.engines.network.analyser import (
    OnnxEvaluator,
    TorchEvaluator,
    available_cpus,
    default_threads,
)
from bookgen.engines.network.features import features
from bookgen.engines.network.model import export_onnx, init_model, load_model, parameter_count


def random_boards(count: int, seed: int = 1) -> list[cshogi.Board]:
    """Positions from random games of 0-100 plies that still have legal moves."""
    rng = random.Random(seed)
    boards: list[cshogi.Board] = []
    while len(boards) < count:
        board = cshogi.Board()
        for _ in range(rng.randint(0, 100)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if list(board.legal_moves):
            boards.append(board)
    return boards


def rate(step: Callable[[], object], per_call: int, seconds: float, repeats: int) -> float:
    """Best positions/s over ``repeats`` timed runs of ``step``."""
    for _ in range(3):
        step()
    best = 0.0
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            step()
            calls += 1
        best = max(best, calls * per_call / elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads (default: 1 at batch 1, else "
                             f"{available_cpus()})")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--batches", default="1,64",
                        help="comma-separated batch sizes (default 1,64)")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    boards = random_boards(max(256, *batches))
    with tempfile.TemporaryDirectory() as directory:
        model_path = Path(directory) / "model.pt"
        onnx_path = Path(directory) / "model.onnx"
        init_model(model_path, blocks=args.blocks, channels=args.channels)
        export_onnx(model_path, onnx_path)
        print(f"model: {args.blocks} blocks x {args.channels} channels, "
              f"{parameter_count(load_model(model_path)):,} parameters")
        print(f"{'runtime':<8}{'batch':>6}{'threads':>8}{'network pos/s':>16}"
              f"{'evaluate pos/s':>17}")
        for name, make in (("torch", TorchEvaluator), ("onnx", OnnxEvaluator)):
            path = model_path if name == "torch" else onnx_path
            for batch in batches:
                with make(path, batch_size=batch, threads=args.threads) as evaluator:
                    f1, f2 = features(boards[:batch])
                    network = rate(partial(evaluator._run, f1, f2), batch,
                                   args.seconds, args.repeats)
                    chunk = boards[:batch]
                    full = rate(partial(evaluator.evaluate, chunk), batch,
                                args.seconds, args.repeats)
                threads = args.threads or default_threads(batch)
                print(f"{name:<8}{batch:>6}{threads:>8}{network:>16,.0f}{full:>17,.0f}")


if __name__ == "__main__":
    main()
