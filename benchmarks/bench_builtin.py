"""Speed of the built-in evaluator: evaluate() at the default depth, best_move() at playing depth.

Two position sets of 50: from uniformly random games (wild, pieces hanging
everywhere) and from games sampled from the evaluator's own priors (closer to
what a book grows into). Run: ``.venv/bin/python benchmarks/bench_builtin.py``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import cshogi

from bookgen.engines.builtin.analyser import BuiltinEvaluator
from bookgen.engines.network.bench import random_boards


def random_game_positions(n: int, seed: int) -> list[cshogi.Board]:
    """bookgen's random positions (``random_boards``), without their games' history."""
    return [cshogi.Board(board.sfen()) for board in random_boards(n, seed)]


def prior_game_positions(n: int, seed: int, ev: BuiltinEvaluator) -> list[cshogi.Board]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        b = cshogi.Board()
        for _ in range(rng.randint(0, 80)):
            e = ev.evaluate([b])[0]
            if not e.moves:
                break
            b.push_usi(rng.choices(e.moves, weights=e.priors)[0])
        if list(b.legal_moves):
            out.append(cshogi.Board(b.sfen()))
    return out


def bench_evaluate(name: str, ev: BuiltinEvaluator, boards: list[cshogi.Board]) -> None:
    times, nodes = [], 0
    for b in boards:
        t = time.perf_counter()
        e = ev.evaluate([b])[0]
        times.append(time.perf_counter() - t)
        nodes += e.nodes
    total = sum(times)
    times.sort()
    print(f"evaluate depth={ev.depth} {name:14s} {len(boards) / total:8.0f} evals/s   "
          f"mean {1000 * total / len(boards):6.2f} ms  "
          f"median {1000 * statistics.median(times):5.2f}"
          f"  p90 {1000 * times[int(0.9 * len(times))]:6.2f}  max {1000 * times[-1]:7.2f} ms"
          f"   {nodes / total:8.0f} nodes/s")


def bench_best_move(name: str, ev: BuiltinEvaluator, boards: list[cshogi.Board]) -> None:
    times, nodes = [], 0
    for b in boards:
        t = time.perf_counter()
        r = ev._searcher.search_root(b, ev.play_depth, ev.play_nodes, margin=0)
        times.append(time.perf_counter() - t)
        nodes += r.nodes
    total = sum(times)
    times.sort()
    print(f"best_move depth={ev.play_depth} nodes<={ev.play_nodes} {name:14s} "
          f"mean {1000 * total / len(boards):6.1f} ms  "
          f"median {1000 * statistics.median(times):6.1f}"
          f"  max {1000 * times[-1]:7.1f} ms   {nodes / total:8.0f} nodes/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=50, help="positions per set")
    parser.add_argument("--depth", type=int, default=None,
                        help="evaluate depth (default: the default)")
    args = parser.parse_args()
    ev = BuiltinEvaluator() if args.depth is None else BuiltinEvaluator(depth=args.depth)
    sets = {
        "startpos": [cshogi.Board()] * 20,
        "random games": random_game_positions(args.n, seed=1),
        "prior games": prior_game_positions(args.n, seed=2, ev=BuiltinEvaluator()),
    }
    for name, boards in sets.items():
        bench_evaluate(name, ev, boards)
    for name, boards in sets.items():
        bench_best_move(name, ev, boards[:20])


if __name__ == "__main__":
    main()
