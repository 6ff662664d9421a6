"""Match runner overhead and scaling with --concurrency on this machine.

Overhead: the time per game the runner spends outside the players' searches
(rules, legality checks, results rows, PGN/CSA writing, position commands)
in Fairy-Stockfish self-matches at ``go nodes N``, and with the built-in
player. Scaling: games per minute with ``--concurrency`` 1 and 2.

Recording: the runner's overhead per move with per-move recording
(``MatchSettings.record_moves``, ``--record-moves``) on and off, side by
side: the same games played with each, alternating, ``--repeats`` times; the
overhead is the match's wall time outside the players' ``choose`` calls per
move (the game loop, rules, the results file's rows, PGN), plus, with
recording on, what building each move's record costs inside ``choose``
(timed apart on searches the engine really answered).

    python benchmarks/bench_match.py [--games 12] [--nodes 2000] [--builtin-nodes 500]
    python benchmarks/bench_match.py --recording-only [--repeats 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from bookgen.analysis.match import MatchSettings, match_player, run_match
from bookgen.engines.player_settings import PlayerSettings
from bookgen.engines.players import open_player
from bookgen.engines.usi.player import UsiPlayer, move_record
from bookgen.engines.usi.protocol import UsiSearch
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


def overhead_per_move(tmp: Path, players: list[PlayerSettings], control: TimeControl,
                      games: int, record: bool, run_index: int) -> tuple[float, int]:
    """(ms per move outside the players' choices, moves) of one match."""
    openings = tmp / "openings.txt"
    openings.write_text("\n".join(OPENINGS) + "\n")
    results = tmp / f"record-{int(record)}-{run_index}.sqlite"
    settings = MatchSettings(control=control, rules=GameRules(max_ply=200), games=games,
                             pgn=tmp / f"record-{int(record)}-{run_index}.pgn",
                             record_moves=record)
    summary = run_match(players, openings, results, settings, progress=False)
    db = sqlite3.connect(results)
    moves = db.execute("SELECT sum(plies) FROM games").fetchone()[0]
    db.close()
    return (summary.seconds - summary.engine_seconds) * 1000 / moves, moves


def record_cost_us(spec: PlayerSettings, nodes: int, positions: int = 40) -> float:
    """Microseconds :func:`move_record` takes on the engine's real answers (``go nodes``
    along a game of itself)."""
    player = open_player(spec)
    assert isinstance(player, UsiPlayer)
    searches: list[UsiSearch] = []
    try:
        moves: list[str] = []
        for _ in range(positions):
            player.engine.position("startpos" + (" moves " + " ".join(moves) if moves else ""))
            result = player.engine.go(nodes=nodes)
            if result.bestmove is None:
                break
            searches.append(result)
            moves.append(result.bestmove)
    finally:
        player.close()
    rounds = 50
    start = time.perf_counter()
    for _ in range(rounds):
        for result in searches:
            move_record(result)
    return (time.perf_counter() - start) * 1e6 / (rounds * len(searches))


def recording(tmp: Path, games: int, nodes: int, repeats: int) -> None:
    cases = [
        (f"fairy-stockfish x2, go nodes {nodes}",
         [match_player("a", FAIRY, (("USI_Hash", "16"), ("Threads", "1"))),
          match_player("b", FAIRY, (("USI_Hash", "16"), ("Threads", "1")))],
         TimeControl(nodes=nodes)),
        ("builtin x2, depth 1",
         [match_player("a", "builtin", (("depth", "1"),)),
          match_player("b", "builtin", (("depth", "1"),))], TimeControl(nodes=1)),
    ]
    for label, players, control in cases:
        on: list[float] = []
        off: list[float] = []
        moves = 0
        for index in range(repeats):  # alternating, so that load drifts hit both
            for record, into in ((False, off), (True, on)):
                ms, moves = overhead_per_move(tmp, players, control, games, record, index)
                into.append(ms)
        # Players build their records whether or not the match keeps them (inside
        # choose, so not in the overhead above): counted apart, with recording on.
        build = record_cost_us(players[0], nodes) / 1000 if label.startswith("fairy") else 0.0
        off_ms, on_ms = statistics.median(off), statistics.median(on)
        print(f"{label:<34} {moves} moves, {repeats} runs each: runner overhead per move "
              f"off {off_ms:.3f} ms, on {on_ms:.3f} ms, + building each record "
              f"{build * 1000:.1f} us: recording costs {on_ms - off_ms + build:+.3f} ms per move"
              f" (runs off {', '.join(f'{x:.3f}' for x in off)}; on "
              f"{', '.join(f'{x:.3f}' for x in on)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--builtin-nodes", type=int, default=500)
    parser.add_argument("--recording-only", action="store_true",
                        help="Only compare per-move recording on and off.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--record-nodes", type=int, default=100,
                        help="Fairy-Stockfish's go nodes in the recording comparison.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        recording(Path(name), args.games, args.record_nodes, args.repeats)
    if args.recording_only:
        return
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
