"""``bookgen serve``: the time of each page and JSON call on a large book, against 100 ms.

Serves BOOK (opened read-only, as ``bookgen serve`` does) with uvicorn on
127.0.0.1 in this process and times real HTTP requests to it (server and
client in one process, as a browser on the same machine would see them, less
the rendering): the initial position, positions along the book's principal
line (``?moves=``, ten and thirty plies deep), positions picked at random
(``?sfen=``, the first request to each one cold in SQLite's cache), their JSON,
one level of the tree, the board alone, the mistakes and runs lists, a search's
redirect and, with ``--results``, the results by opening. It prints, for each
call, the median, the 95th percentile and the maximum in milliseconds over
``--repeat`` requests, and the first (cold) request separately.

Copy the book first: the benchmark reads it only, but ``--add-mistakes N``
first adds N made-up rows to its ``mistakes`` table (one fake ``refine
mistakes`` run, sizes drawn at random), so that the mistakes list sorts a
realistic table; a book of 1 M positions is made by ``python
benchmarks/generate_book.py`` and ``bookgen import``.

    python benchmarks/bench_serve.py BOOK [--results FILE ...] [--repeat 30] [--random 50]
                                          [--add-mistakes N]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import uvicorn

from bookgen.analysis.openings import results_by_opening
from bookgen.analysis.results import load_games
from bookgen.explore.app import create_app, listen, url_of
from bookgen.explore.settings import ServeSettings
from bookgen.explore.view import Explorer, Place
from bookgen.store import queries
from bookgen.store.own_moves import ValueColumn
from bookgen.store.snapshot import open_book_snapshot

GOAL_MS = 100.0


def principal_line(book: Path, plies: int) -> list[str]:
    """The first ``plies`` moves of the book's principal line from the initial position
    (best value, then count), as far as the book goes."""
    conn = open_book_snapshot(book, strict=True)
    try:
        import cshogi

        board = cshogi.Board()
        line: list[str] = []
        while len(line) < plies:
            rows = queries.position_moves(conn, board.sfen().rsplit(" ", 1)[0],
                                          ValueColumn.MINIMAX)
            if not rows:
                break
            move = min(rows, key=lambda r: (r[2] is None, -(r[2] or 0), -r[1], r[0]))[0]
            board.push_usi(move)
            line.append(move)
        return line
    finally:
        conn.close()


def random_sfens(book: Path, count: int, seed: int) -> list[str]:
    """``count`` sfens of positions picked at random by id."""
    conn = open_book_snapshot(book, strict=True)
    try:
        total = queries.count_positions(conn)
        rng = random.Random(seed)
        ids = sorted(rng.sample(range(1, total + 1), min(count, total)))
        found = queries.sfens_of(conn, ids)
    finally:
        conn.close()
    return list(found.values())


def add_mistakes(book: Path, count: int, seed: int) -> None:
    """Add ``count`` made-up mistakes at random positions, as one ``refine mistakes`` run
    (the benchmark's own writes, on a copy of a book)."""
    rng = random.Random(seed)
    conn = sqlite3.connect(book)
    try:
        total = conn.execute("SELECT max(id) FROM positions").fetchone()[0]
        run = conn.execute(
            "INSERT INTO runs (command, params, started_at, ended_at, status, bookgen_version) "
            "VALUES ('refine mistakes', '{\"benchmark\": true}', '2026-01-01T00:00:00', "
            "'2026-01-01T00:00:01', 'done', 'bench_serve')").lastrowid
        rows = []
        for position in rng.sample(range(1, total + 1), count):
            book_value = rng.randint(-800, 800)
            engine_value = book_value + rng.choice((-1, 1)) * rng.randint(200, 3000)
            rows.append((run, position, run, book_value, engine_value,
                         engine_value - book_value, "7g7f", "2g2f", "benchmark"))
        conn.executemany(
            "INSERT INTO mistakes (run_id, iteration, position_id, analysis_run_id, kind, "
            "book_value, engine_value, difference, book_move, engine_move, reason, created_at) "
            "VALUES (?, 0, ?, ?, 'diff', ?, ?, ?, ?, ?, ?, '2026-01-01T00:00:01')", rows)
        conn.commit()
    finally:
        conn.close()


def timed(base: str, path: str, repeat: int) -> tuple[float, list[float]]:
    """(first request's ms, the ms of ``repeat`` more)."""
    def once() -> float:
        start = time.perf_counter()
        with urllib.request.urlopen(base + path.lstrip("/")) as answer:
            answer.read()
            assert answer.status == 200, (path, answer.status)
        return 1000 * (time.perf_counter() - start)

    first = once()
    return first, [once() for _ in range(repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("--results", nargs="*", default=[])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--random", type=int, default=50, help="random positions to time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--add-mistakes", type=int, default=0, metavar="N",
                        help="first add N made-up mistakes to BOOK (a copy!)")
    args = parser.parse_args()
    if args.add_mistakes:
        add_mistakes(args.book, args.add_mistakes, args.seed)

    openings = results_by_opening(load_games(args.results)) if args.results else []
    explorer = Explorer(args.book)
    sock = listen(ServeSettings(port=0))
    base = url_of(sock)
    server = uvicorn.Server(uvicorn.Config(create_app(explorer, openings, args.results),
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)

    with explorer.snapshot() as conn:
        positions = queries.count_positions(conn)
        moves = queries.count_moves(conn)
    mistakes = explorer.mistakes(1)[0]
    line = principal_line(args.book, 30)
    deep10 = Place(moves=tuple(line[:10]))
    deep30 = Place(moves=tuple(line))
    calls = [
        ("position: initial", "/"),
        (f"position: PV ply {len(deep10.moves)} (?moves)", "/?" + urlencode(deep10.query())),
        (f"position: PV ply {len(deep30.moves)} (?moves)", "/?" + urlencode(deep30.query())),
        ("position JSON: initial", "/api/position"),
        (f"position JSON: PV ply {len(deep30.moves)}",
         "/api/position?" + urlencode(deep30.query())),
        ("tree: initial", "/api/tree"),
        (f"tree: PV ply {len(deep10.moves)}", "/api/tree?" + urlencode(deep10.query())),
        ("board.svg: initial", "/board.svg"),
        ("mistakes", "/mistakes"), ("mistakes JSON", "/api/mistakes"),
        ("runs", "/runs"), ("runs JSON", "/api/runs"),
        ("search (redirect)", "/search?" + urlencode({"q": "startpos moves "
                                                      + " ".join(line[:10])})),
        ("static script", "/static/explorer.js"),
    ]
    if args.results:
        calls += [("results", "/results"), ("results JSON", "/api/results")]

    print(f"bookgen serve on {args.book}: {positions:,} positions, {moves:,} moves rows, "
          f"{mistakes:,} mistakes; "
          f"{args.repeat} requests per call after the first; goal {GOAL_MS:.0f} ms")
    print(f"{'call':<34} {'first':>8} {'median':>8} {'p95':>8} {'max':>8}")
    worst = 0.0
    for name, path in calls:
        first, times = timed(base, path, args.repeat)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        worst = max(worst, times[-1], first)
        print(f"{name:<34} {first:8.1f} {statistics.median(times):8.1f} {p95:8.1f} "
              f"{times[-1]:8.1f}")

    sfens = random_sfens(args.book, args.random, args.seed)
    for label, prefix in (("position: random, first visit", "/?"),
                          ("position JSON: the same again", "/api/position?"),
                          ("tree: the same again", "/api/tree?")):
        times = []
        for sfen in sfens:
            times.append(timed(base, prefix + urlencode({"sfen": sfen}), 0)[0])
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        worst = max(worst, times[-1])
        print(f"{label:<34} {'':>8} {statistics.median(times):8.1f} {p95:8.1f} "
              f"{times[-1]:8.1f}   ({len(sfens)} positions)")
    print(f"slowest request {worst:.1f} ms: {'within' if worst < GOAL_MS else 'OVER'} "
          f"the {GOAL_MS:.0f} ms goal")
    server.should_exit = True
    thread.join(30)
    explorer.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
