"""What the live view costs the match runner per move, and what a refresh costs the server.

Per move, the runner's hook (``bookgen.analysis.match.play_task`` with a live folder)
rewrites the game's live file (:class:`bookgen.store.live_games.LiveGameWriter`:
JSON, a temporary file renamed into place, no sync) and passes a fault point. This
times that hook alone over whole games of ``--plies`` moves (its file grows with the
moves), in a folder beside ``--where`` (default: a temporary folder; give the disk the
results file lives on), against the same loop without writing; the target is under
0.1 ms per move. Then the server's side: reading ``--games`` live files
(:func:`bookgen.store.live_games.read_live_games`) and the whole ``/api/live`` answer
on a finished results file of ``--finished`` games (standings, with Ordo's
simulations, computed once per new game; the answer after that reuses them).

    python benchmarks/bench_live.py [--plies 200] [--rounds 20] [--games 8]
        [--finished 400] [--where DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import cshogi

from bookgen.engines.protocols import MoveChoice
from bookgen.signals import fault_point
from bookgen.store.live_games import LiveFolder, clear_stale, live_folder, read_live_games
from bookgen.store.results import ResultsFile


def game_moves(plies: int) -> list[str]:
    """A legal game of up to ``plies`` moves (the first legal move each time)."""
    board, moves = cshogi.Board(), []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = legal[len(moves) * 7 % len(legal)]
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    return moves


def per_move(folder: LiveFolder | None, moves: list[str], rounds: int) -> float:
    """Seconds per move of the hook (``folder`` None: the loop without the hook's work)."""
    times = []
    for round_ in range(rounds):
        choices = [MoveChoice(move=m, score_cp=i) for i, m in enumerate(moves)]
        start = time.perf_counter()
        if folder is not None:
            writer = folder.writer(f"k/{round_}", 0, 0, 0, "startpos", "", "a", "b")
            writer.start()
            for choice in choices:
                writer.move(choice.move or "", choice.score_cp)
                fault_point("match-live-move")
            writer.end()
        else:
            for _choice in choices:
                fault_point("match-live-move")
        times.append((time.perf_counter() - start) / len(moves))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plies", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--games", type=int, default=8, help="live files read at once")
    parser.add_argument("--finished", type=int, default=400,
                        help="games in the results file behind /api/live")
    parser.add_argument("--where", type=Path, help="folder for the files (default: /tmp)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.where) as tmp:
        results = Path(tmp) / "r.sqlite"
        clear_stale(results)
        folder = LiveFolder(live_folder(results), 1)
        moves = game_moves(args.plies)
        bare = per_move(None, moves, args.rounds)
        live = per_move(folder, moves, args.rounds)
        print(f"hook per move, games of {len(moves)} plies ({args.rounds} games, median): "
              f"{1e6 * live:.1f} us with the live file, {1e6 * bare:.2f} us without; "
              f"added {1e6 * (live - bare):.1f} us (target < 100 us)")

        writers = [folder.writer(f"g/{i}", i, 0, 0, "startpos", cshogi.Board().sfen(),
                                 "a", "b") for i in range(args.games)]
        for writer in writers:
            writer.start()
            for move in moves[:120]:
                writer.move(move, 0)
        start = time.perf_counter()
        for _ in range(50):
            found = read_live_games(results)
        assert len(found) == args.games
        print(f"reading {args.games} live files of 120 plies: "
              f"{1e3 * (time.perf_counter() - start) / 50:.2f} ms")

        from starlette.testclient import TestClient

        from bookgen.analysis.standings import live_sprt, live_standings
        from bookgen.explore.app import create_app
        from bookgen.explore.live import LiveView

        with ResultsFile(results) as store:
            match_id = store.begin_match("k", {"players": [["a", "", []], ["b", "", []]],
                                               "format": "pairs"}, args.finished)
            for i in range(args.finished):
                store.add_game(match_id, game_key=f"{i}", round=0, pair=i // 2,
                               opening_index=0, opening="startpos",
                               start_sfen=cshogi.Board().sfen(),
                               black="ab"[i % 2], white="ba"[i % 2],
                               result=("black", "white", "draw")[i * 7 % 3], reason="x",
                               plies=10, moves="")
        with LiveView([results], live_standings, live_sprt) as view, \
                TestClient(create_app(None, (), (str(results),), view)) as client:
            start = time.perf_counter()
            assert client.get("/api/live").status_code == 200
            first = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(20):
                assert client.get("/live").status_code == 200
            again = (time.perf_counter() - start) / 20
        print(f"/api/live on {args.finished} finished games and {args.games} in play: "
              f"first answer {1e3 * first:.1f} ms (standings computed), then /live "
              f"{1e3 * again:.1f} ms")
        for writer in writers:
            writer.end()


if __name__ == "__main__":
    main()
