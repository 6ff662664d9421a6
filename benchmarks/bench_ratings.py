"""Speed of ``bookgen rate``: Ordo fit with simulations, and the BayesElo fit.

Generates a synthetic pool (default 20 players, 100 k games with random
pairings and colours, results drawn from Ordo's model with a 30-point sente
advantage and about 8 % draws) and prints the wall time of

- the Ordo fit with 1000 simulations, plain and with -W -D;
- the BayesElo fit (fixed advantage/drawElo, and both fitted).

    python benchmarks/bench_ratings.py [--players 20] [--games 100000]
                                       [--simulations 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bookgen.analysis.bayeselo import BayesEloSettings, fit_bayeselo  # noqa: E402
from bookgen.analysis.ratings import RatingSettings, beta_for, fit_ratings  # noqa: E402
from bookgen.store.results import GameResult  # noqa: E402


def make_games(players: int, games: int, seed: int) -> list[GameResult]:
    rng = np.random.default_rng(seed)
    names = [f"engine-{i:02d}" for i in range(players)]
    strength = rng.normal(0.0, 150.0, players)
    black = rng.integers(0, players, games)
    white = (black + rng.integers(1, players, games)) % players
    p = 1.0 / (1.0 + np.exp(-beta_for() * (strength[black] - strength[white] + 30.0)))
    draw = 0.08
    roll = rng.random(games)
    result = np.where(roll < p - draw / 2, "black",
                      np.where(roll < p + draw / 2, "draw", "white"))
    return [GameResult(names[b], names[w], str(r)) for b, w, r in zip(black, white, result)]


def timed(label: str, function, *args, **kwargs):
    start = time.perf_counter()
    cpu = time.process_time()
    value = function(*args, **kwargs)
    print(f"{label:<48} {time.perf_counter() - start:8.3f} s wall "
          f"{time.process_time() - cpu:8.3f} s cpu")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", type=int, default=20)
    parser.add_argument("--games", type=int, default=100_000)
    parser.add_argument("--simulations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    games = make_games(args.players, args.games, args.seed)
    print(f"{args.players} players, {len(games)} games, {args.simulations} simulations")
    timed("ordo, no simulations", fit_ratings, games)
    timed(f"ordo, -s {args.simulations}", fit_ratings, games,
          RatingSettings(simulations=args.simulations))
    table = timed(f"ordo, -W -D -s {args.simulations}", fit_ratings, games,
                  RatingSettings(fit_white_advantage=True, fit_draw_rate=True,
                                 simulations=args.simulations))
    print(f"  (white advantage {table.white_advantage:.2f} +/- {table.white_advantage_sd:.2f}, "
          f"draw rate {100 * table.draw_rate:.2f} % +/- {100 * table.draw_rate_sd:.2f}, "
          f"{table.skipped_simulations} simulations skipped)")
    timed("bayeselo (advantage 32.8, drawElo 97.3)", fit_bayeselo, games)
    timed("bayeselo (advantage and drawElo fitted)", fit_bayeselo, games,
          BayesEloSettings(advantage_elo=None, draw_elo=None))


if __name__ == "__main__":
    main()
