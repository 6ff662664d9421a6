"""Generate a large, realistic DB2016 book for benchmarks.

The book is a tree of legal positions grown breadth-first from the initial
position. Each expanded position gets 1-5 moves (3 on average), chosen by a
fixed per-move preference so that different move orders often reach the same
position, as in real books (transpositions). Each move has a legal ponder
move, a value, a depth and a count.

    python benchmarks/generate_book.py --positions 100000 -o book100k.db
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import zlib
from collections import deque
from pathlib import Path

import cshogi


def preference(usi: str) -> int:
    return zlib.crc32(usi.encode())


def generate(path: Path, positions: int, seed: int = 1) -> tuple[int, int]:
    """Write a book with ``positions`` positions; returns (positions, moves)."""
    rng = random.Random(seed)
    board = cshogi.Board()
    queue: deque[tuple[str, int]] = deque([(board.sfen().rsplit(" ", 1)[0], 1)])
    seen = {queue[0][0]}
    written_positions = written_moves = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("#YANEURAOU-DB2016 1.00\n")
        while queue and written_positions < positions:
            sfen, ply = queue.popleft()
            board.set_sfen(f"{sfen} {ply}")
            legal = [(preference(cshogi.move_to_usi(m)) ^ rng.getrandbits(3), m)
                     for m in board.legal_moves]
            if not legal:
                continue
            legal.sort()
            width = min(len(legal), rng.choice((1, 2, 3, 3, 3, 4, 5)))
            lines = [f"sfen {sfen} {ply}"]
            for _pref, move in legal[:width]:
                board.push(move)
                replies = list(board.legal_moves)
                ponder = cshogi.move_to_usi(min(replies, key=lambda r: preference(
                    cshogi.move_to_usi(r)))) if replies else "none"
                child = board.sfen().rsplit(" ", 1)[0]
                board.pop()
                if child not in seen:
                    seen.add(child)
                    queue.append((child, ply + 1))
                value = int(rng.gauss(0, 250))
                lines.append(f"{cshogi.move_to_usi(move)} {ponder} {value} "
                             f"{rng.randint(8, 40)} {rng.randint(1, 2000)}")
            out.write("\n".join(lines) + "\n")
            written_positions += 1
            written_moves += width
    return written_positions, written_moves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    start = time.perf_counter()
    positions, moves = generate(args.output, args.positions, args.seed)
    print(f"{args.output}: {positions} positions, {moves} moves in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
