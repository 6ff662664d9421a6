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

With ``--network BLOCKSxCHANNELS`` it measures games played together
(``selfplay --parallel-games K``) instead: a dlshogi-shaped network of that
size (random weights, made here) plays ``--network-games`` games against
itself in one worker with ``--parallel-games`` 1, 4, 16 (``--games-together``)
at one evaluator batch size (``--batch``), next to one game at a time at
``--batch-size 16``, and prints positions/s, the mean network batch, the
share of time outside the evaluator and the speed against one game at a
time at the same batch size. Every row runs in one process, one after
another, on the device given (``--device``, printed; the same code path on
``cpu`` and ``cuda``)::

    python benchmarks/bench_selfplay.py --network 5x64 [--runtime onnx] [--device cpu]
        [--network-games 16] [--network-playouts 800] [--batch 64]
        [--games-together 1,4,16] [--threads N] [--max-ply 160]
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


def run_network(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from bookgen.engines.network.dlshogi_models import (
        DlshogiArchitecture,
        build_network,
        state_to_npz,
    )
    from bookgen.engines.network.model import export_onnx

    blocks, channels = (int(part) for part in args.network.split("x"))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        torch.manual_seed(0)
        model = build_network(DlshogiArchitecture("resnet", blocks, channels, 256, 57))
        path = tmp / f"resnet{blocks}x{channels}.npz"
        np.savez(path, **state_to_npz(model.state_dict()))
        if args.runtime == "onnx":
            export_onnx(path, path.with_suffix(".onnx"))
            path = path.with_suffix(".onnx")
        starts = tmp / "starts.txt"
        starts.write_text("\n".join(STARTS) + "\n")
        rows = [(1, 16)] + [(together, args.batch) for together in
                            (int(text) for text in args.games_together.split(","))]
        base: float | None = None
        for together, batch in rows:
            options: dict = {"batch_size": batch, "device": args.device}
            if args.threads:
                options["threads"] = args.threads
            player = selfplay_player(f"mcts:{args.runtime}:{path}",
                                     playouts=args.network_playouts, batch_size=batch,
                                     evaluator_options=options)
            settings = SelfplaySettings(args.network_games,
                                        players=SelfplayPlayers.both(player),
                                        rules=GameRules(max_ply=args.max_ply),
                                        output=SelfplayOutput(replace=True), seed=1,
                                        parallel_games=together)
            summary = selfplay(starts, tmp / "games.hcpe", settings, progress=False)
            rate = summary.positions_per_second
            if together == 1 and batch == args.batch:
                base = rate
            ratio = f"x{rate / base:.2f}" if base else ""
            batches = (f"mean batch {summary.network.mean_batch:>5.1f}  outside evaluator "
                       f"{100 * summary.outside_evaluator_share:5.1f}%"
                       if summary.network.calls else
                       f"(one game at a time: search batch {batch}, not measured)")
            print(f"{args.runtime} {args.network} {args.device:<5} "
                  f"--parallel-games {together:>3} --batch-size {batch:>3}  "
                  f"{summary.games:>3} games {summary.positions:>5} positions "
                  f"{summary.seconds:>7.1f} s  {rate:>6.2f} pos/s  {batches}  {ratio}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", help="BLOCKSxCHANNELS: measure games played together")
    parser.add_argument("--runtime", choices=["onnx", "torch"], default="onnx")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--network-games", type=int, default=16)
    parser.add_argument("--network-playouts", type=int, default=800)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--games-together", default="1,4,16")
    parser.add_argument("--threads", type=int, default=0,
                        help="the network's CPU threads (0: the evaluator's default)")
    parser.add_argument("--max-ply", type=int, default=160)
    parser.add_argument("--games", type=int, default=4, help="games with the builtin player")
    parser.add_argument("--engine-games", type=int, default=8,
                        help="games of Fairy-Stockfish against itself")
    parser.add_argument("--playouts", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if args.network:
        run_network(args)
        return
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
