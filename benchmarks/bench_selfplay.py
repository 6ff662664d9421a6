"""Self-play and training throughput on this machine.

Self-play: training positions written per second with the built-in
evaluator (MCTS, 64 playouts per move) and with Fairy-Stockfish playing
itself (``go nodes 5000``), with 1 and 2 worker processes, from a few
opening start positions (max 160 plies, 4 random opening moves).
Training: samples per second of the dlshogi-shaped network on the CPU
(5 blocks x 64 channels with 1 and 2 torch threads, and 1 x 8; batch 256)
on the records just played. As for inference (bookgen.engines.network.analyser),
two torch threads collapse when another process keeps a core busy.

    python benchmarks/bench_selfplay.py [--games 4] [--engine-games 8]
                                        [--playouts 64] [--nodes 5000] [--epochs 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bookgen.engines.player_settings import PlayerSettings
from bookgen.engines.restart import SearchLimits
from bookgen.play.loop import GameRules
from bookgen.selfplay.games import (
    SelfplayOutput,
    SelfplayPlayers,
    SelfplaySettings,
    selfplay,
    selfplay_player,
)
from bookgen.selfplay.train import TrainSettings, train

FAIRY = "/usr/games/fairy-stockfish"
STARTS = ["startpos", "startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d",
          "startpos moves 7g7f 8c8d", "startpos moves 2g2f 3c3d 7g7f"]


def play(label: str, tmp: Path, games: int, workers: int, player: PlayerSettings) -> Path:
    starts = tmp / "starts.txt"
    starts.write_text("\n".join(STARTS) + "\n")
    output = tmp / f"{label.split()[0]}-{workers}.hcpe"
    settings = SelfplaySettings(games, players=SelfplayPlayers.both(player),
                                rules=GameRules(max_ply=160),
                                output=SelfplayOutput(replace=True), workers=workers, seed=1)
    summary = selfplay(starts, output, settings, progress=False)
    print(f"{label:<36} workers={workers}  {summary.games:>3} games "
          f"{summary.positions:>5} positions {summary.seconds:>7.1f} s  "
          f"{summary.positions_per_second:>7.1f} positions/s  "
          f"({summary.mean_plies:.0f} plies/game; B {summary.black_wins} W "
          f"{summary.white_wins} D {summary.draws})", flush=True)
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=4, help="games with the builtin player")
    parser.add_argument("--engine-games", type=int, default=8,
                        help="games of Fairy-Stockfish against itself")
    parser.add_argument("--playouts", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        data = []
        for workers in (1, 2):
            data.append(play(f"builtin, {args.playouts} playouts", tmp, args.games, workers,
                             selfplay_player("mcts:builtin", playouts=args.playouts)))
        if Path(FAIRY).exists():
            for workers in (1, 2):
                fairy = selfplay_player(f"usi:{FAIRY}", options=(("Threads", "1"),),
                                        limits=SearchLimits(nodes=args.nodes))
                data.append(play(f"fairy-stockfish, {args.nodes} nodes", tmp,
                                 args.engine_games, workers, fairy))
        else:
            print(f"{FAIRY} missing: skipped", file=sys.stderr)
        for blocks, channels, threads in ((5, 64, 1), (5, 64, 2), (1, 8, 1)):
            settings = TrainSettings(epochs=args.epochs, batch_size=256, blocks=blocks,
                                     channels=channels, threads=threads, replace_output=True)
            summary = train(data, tmp / "model.pt", settings, progress=False)
            label = f"train {blocks}x{channels}, batch 256, {threads} thread(s)"
            print(f"{label:<45} {summary.train_records:>5} "
                  f"records x {len(summary.epochs)} epochs  "
                  f"{summary.samples_per_second:>7.0f} samples/s  (train loss "
                  f"{summary.initial_train.loss:.3f} -> {summary.final_train.loss:.3f})",
                  flush=True)


if __name__ == "__main__":
    main()
