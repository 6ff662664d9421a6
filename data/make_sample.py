"""Rebuild data/sample.db: a small real book analysed by Fairy-Stockfish.

Breadth-first from the initial position, each position is searched with
MultiPV 3 at a fixed node budget; moves within 120 cp of the best are kept
(at most 3) and their children searched in turn, until the book holds
``--positions`` positions. Values are Fairy-Stockfish's centipawns for the
side to move, depth its search depth, count 1000 * a softmax share.

    python data/make_sample.py --positions 300 -o data/sample.db
"""

from __future__ import annotations

import argparse
import math
import subprocess
from collections import deque

import cshogi

ENGINE = "/usr/games/fairy-stockfish"


def analyse(engine: subprocess.Popen, sfen: str, nodes: int) -> list[tuple[str, str, int, int]]:
    """(move, ponder, score, depth) of each MultiPV line, best first."""
    assert engine.stdin and engine.stdout
    engine.stdin.write(f"position sfen {sfen}\ngo nodes {nodes}\n")
    engine.stdin.flush()
    lines: dict[int, tuple[str, str, int, int]] = {}
    for raw in engine.stdout:
        tokens = raw.split()
        if tokens and tokens[0] == "bestmove":
            break
        if "pv" not in tokens or "score" not in tokens or "multipv" not in tokens:
            continue
        kind, number = tokens[tokens.index("score") + 1: tokens.index("score") + 3]
        score = int(number) if kind == "cp" else (30000 if int(number) > 0 else -30000)
        pv = tokens[tokens.index("pv") + 1:]
        lines[int(tokens[tokens.index("multipv") + 1])] = (
            pv[0], pv[1] if len(pv) > 1 else "none", score,
            int(tokens[tokens.index("depth") + 1]))
    return [lines[k] for k in sorted(lines)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=30000)
    parser.add_argument("-o", "--output", default="data/sample.db")
    args = parser.parse_args()
    engine = subprocess.Popen([ENGINE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, bufsize=1)
    assert engine.stdin
    engine.stdin.write("usi\nsetoption name MultiPV value 3\nisready\n")
    engine.stdin.flush()
    board = cshogi.Board()
    queue = deque([(board.sfen(), 1)])
    seen = {board.sfen().rsplit(" ", 1)[0]}
    blocks = []
    while queue and len(blocks) < args.positions:
        sfen, ply = queue.popleft()
        board.set_sfen(sfen)
        lines = analyse(engine, sfen, args.nodes)
        best = lines[0][2]
        kept = [line for line in lines if line[2] >= best - 120][:3]
        weights = [math.exp((line[2] - best) / 100) for line in kept]
        block = [f"sfen {sfen.rsplit(' ', 1)[0]} {ply}"]
        for (move, ponder, score, depth), weight in zip(kept, weights):
            block.append(f"{move} {ponder} {score} {depth} "
                         f"{max(1, round(1000 * weight / sum(weights)))}")
            board.push_usi(move)
            child = board.sfen()
            key = child.rsplit(" ", 1)[0]
            if key not in seen and abs(score) < 1500:
                seen.add(key)
                queue.append((f"{key} {ply + 1}", ply + 1))
            board.pop()
        blocks.append("\n".join(block))
    engine.stdin.write("quit\n")
    engine.stdin.flush()
    engine.wait(timeout=10)
    with open(args.output, "w", encoding="utf-8", newline="\n") as out:
        out.write("#YANEURAOU-DB2016 1.00\n")
        out.write(f"# sample book: {len(blocks)} positions analysed by Fairy-Stockfish 11.1, "
                  f"MultiPV 3, {args.nodes} nodes (data/make_sample.py)\n")
        out.write("\n".join(sorted(blocks)) + "\n")


if __name__ == "__main__":
    main()
