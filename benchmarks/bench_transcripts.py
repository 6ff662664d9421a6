"""What ``bookgen match --transcripts`` costs on this machine.

Side by side in one run: the same Fairy-Stockfish self-match at ``go nodes N``
without and with transcripts (wall time per move, the runner's overhead per
game, the lines kept and their compressed size), then the cost of one
transcript line (:meth:`Transcript.add`, what the client's reader thread pays
per line) and of saving a game's transcript.

    python benchmarks/bench_transcripts.py [--games 6] [--nodes 2000]
"""

from __future__ import annotations

import argparse
import gzip
import sqlite3
import tempfile
import time
from pathlib import Path

from bookgen.analysis.match import MatchSettings, match_player, run_match
from bookgen.engines.usi.transcript import Transcript
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules

FAIRY = "usi:/usr/games/fairy-stockfish"
OPENINGS = ["startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d",
            "startpos moves 7g7f 8c8d"]
INFO = ("info depth 12 seldepth 17 multipv 1 score cp 41 nodes 123456 nps 456789 "
        "tbhits 0 time 270 pv 7g7f 3c3d 2g2f 8c8d 2f2e 8d8e 6i7h 4a3b")


def play(tmp: Path, label: str, games: int, nodes: int, transcripts: Path | None) -> None:
    openings = tmp / "openings.txt"
    openings.write_text("\n".join(OPENINGS) + "\n")
    players = [match_player(name, FAIRY, (("Threads", "1"), ("USI_Hash", "16")))
               for name in ("a", "b")]
    results = tmp / f"{label}.sqlite"
    settings = MatchSettings(control=TimeControl(nodes=nodes), rules=GameRules(max_ply=160),
                             games=games, transcripts=transcripts)
    summary = run_match(players, openings, results, settings, progress=False)
    db = sqlite3.connect(results)
    plies = db.execute("SELECT SUM(plies) FROM games").fetchone()[0]
    db.close()
    line = (f"{label:<16} {summary.played:>3} games {plies:>5} moves {summary.seconds:>7.2f} s "
            f"{summary.seconds / plies * 1000:>7.2f} ms/move  overhead "
            f"{summary.overhead_per_game * 1000:>6.1f} ms/game")
    if transcripts is not None:
        files = sorted(transcripts.iterdir())
        size = sum(f.stat().st_size for f in files)
        lines = sum(gzip.decompress(f.read_bytes()).count(b"\n") for f in files)
        line += f"  {lines} lines kept, {size / 1024:.0f} KiB gzip ({lines / plies:.1f}/move)"
    print(line, flush=True)


def micro(lines: int) -> None:
    transcript = Transcript()
    sink = transcript.sink("fsf")
    start = time.perf_counter()
    for _ in range(lines):
        sink("<", INFO)
    added = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        transcript.save(Path(folder) / "t.usi.gz")
        saved = time.perf_counter() - start
        size = (Path(folder) / "t.usi.gz").stat().st_size
    print(f"Transcript.add: {added / lines * 1e6:.2f} us/line; save of {lines} lines: "
          f"{saved * 1000:.0f} ms ({saved / lines * 1e6:.2f} us/line, {size / 1024:.0f} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--nodes", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        play(tmp, "no transcripts", args.games, args.nodes, None)
        play(tmp, "transcripts", args.games, args.nodes, tmp / "t")
        play(tmp, "no transcripts 2", args.games, args.nodes, None)
    micro(100_000)


if __name__ == "__main__":
    main()
