"""Match runner overhead and scaling with --concurrency on this machine.

Overhead: the time per game the runner spends outside the players' searches
(rules, legality checks, results rows, PGN/CSA writing, position commands)
in Fairy-Stockfish self-matches at ``go nodes N``, and with the built-in
player. Scaling: games per minute with ``--concurrency`` 1 and 2.

    python benchmarks/bench_match.py [--games 12] [--nodes 2000] [--builtin-nodes 500]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bookgen.analysis.match import MatchSettings, match_player, run_match
from bookgen.engines.player_settings import PlayerSettings
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules

FAIRY = "usi:/usr/games/fairy-stockfish"
OPENINGS = ["startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d",
            "startpos moves 7g7f 8c8d", "startpos moves 2g2f 3c3d 7g7f",
            "startpos moves 5g5f 5c5d", "startpos moves 7g7f 3c3d 2g2f 4c4d"]


def run(label: str, tmp: Path, players: list[PlayerSettings], games: int, concurrency: int,
        control: TimeControl) -> float:
    openings = tmp / "openings.txt"
    openings.write_text("\n".join(OPENINGS) + "\n")
    results = tmp / f"{label.replace(' ', '-')}-{concurrency}.sqlite"
    settings = MatchSettings(control=control, rules=GameRules(max_ply=200), games=games,
                             concurrency=concurrency, pgn=tmp / "games.pgn", csa_dir=tmp / "csa")
    summary = run_match(players, openings, results, settings, progress=False)
    rate = summary.played / summary.seconds * 60
    print(f"{label:<34} concurrency={concurrency}  {summary.played:>3} games "
          f"{summary.seconds:>6.1f} s  {rate:>6.1f} games/min  overhead "
          f"{summary.overhead_per_game * 1000:>6.1f} ms/game "
          f"({100 * (summary.game_seconds - summary.engine_seconds) / summary.game_seconds:.1f}"
          f" % of game time)", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--builtin-nodes", type=int, default=500)
    args = parser.parse_args()
    cases = [
        (f"fairy-stockfish x2, {args.nodes} nodes",
         [match_player("a", FAIRY, (("USI_Hash", "16"),)),
          match_player("b", FAIRY, (("USI_Hash", "16"),))], TimeControl(nodes=args.nodes)),
        (f"builtin x2, {args.builtin_nodes} nodes",
         [match_player("a", "builtin", (("nodes", str(args.builtin_nodes)),)),
          match_player("b", "builtin", (("nodes", str(args.builtin_nodes)),))],
         TimeControl(nodes=1)),
    ]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for label, players, control in cases:
            rates = [run(label, tmp, players, args.games, c, control) for c in (1, 2)]
            print(f"{'':<34} 2 vs 1: x{rates[1] / rates[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
