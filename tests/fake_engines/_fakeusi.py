"""A minimal USI engine for fault-injection tests.

It plays legal moves (with cshogi) and misbehaves on request:

--crash-on-go N     exit with --exit-code on the N-th ``go`` (after writing to stderr)
--once-file PATH    crash only if PATH does not exist yet (it is created): a one-time crash
--hang-on-go N      never answer the N-th ``go`` (and ignore ``stop`` and ``quit``)
--silent-start      never answer ``usi``
--garbage           print garbage lines (binary, malformed info) before answering
--illegal           answer with an illegal bestmove and PV
--stderr-bytes N    write N bytes to stderr on every ``go``
--multipv           declare a MultiPV option and print that many info lines
--no-info           answer with a bare bestmove, like an engine playing from its book
--book STYLE        declare USI_OwnBook and BookFile and answer from a book, as YaneuraOu
                    does, until ``USI_OwnBook false`` or ``BookFile no_book``: STYLE
                    ``depth0`` prints ``info depth 0 ... nodes 0 ... pv MOVE``, ``string``
                    an ``info string`` about the book
--book-plies N      with --book, answer from the book only in positions before ply N
                    (counted in the ``moves`` of ``position``), and search after it
--script PATH       play the N-th whitespace-separated token of PATH at the game's N-th ply
                    (counted in the ``moves`` of ``position``; ``win``/``resign`` allowed)
--score CP          report this score (side to move's view) in every info line
--mark-dir DIR      create DIR/started-PID at start and DIR/hung-PID when hanging (events
                    for tests that signal or kill at a known point)
--hang-if-exists P  never answer a ``go`` while file P exists (then like --hang-on-go)
--garbage-stderr    write invalid UTF-8 and control bytes to stderr at every ``go``
--no-bestmove       answer ``go`` with garbage lines and no ``bestmove`` line
--first-start-only P  answer ``usi`` only if file P does not exist yet (it is created): the
                    engine's later starts never answer it (with --mark-dir: hung-PID)
--hang-on-quit      ignore ``quit`` and hang (with --mark-dir: hung-PID)
--log PATH          append every command line received to PATH
--clock-file PATH   a fake clock (milliseconds, in PATH) that the test's bookgen reads:
                    the N-th ``go`` advances it by the N-th number of --spend (0 past
                    the list) before answering
--spend MS,MS,...   the milliseconds each ``go`` takes on the --clock-file clock
--until-stop-on-go N  answer the N-th ``go`` only after ``stop`` (an infinite search, or
                    an engine past its time that obeys ``stop``)
--ponder            declare USI_Ponder and answer ``bestmove X ponder Y`` (Y: the first
                    legal reply to X, the move this engine would play); a ``go ponder``
                    is answered after ``ponderhit`` or ``stop`` (--spend counts it as a go,
                    spent after that line)
--ponder-miss       with --ponder, Y is the last legal reply instead (another engine
                    like this one plays the first: the ponder misses)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import cshogi


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


_mark_dir: str | None = None


def _mark(event: str) -> None:
    if _mark_dir:
        path = os.path.join(_mark_dir, f"{event}-{os.getpid()}")
        with open(path + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.replace(path + ".tmp", path)


def _advance_clock(path: str, milliseconds: int) -> None:
    with open(path) as handle:
        now = int(handle.read() or 0)
    with open(path + ".tmp", "w") as handle:
        handle.write(str(now + milliseconds))
    os.replace(path + ".tmp", path)  # the reader sees the old or the new time, whole


def _hang() -> None:
    _mark("hung")
    while True:
        time.sleep(3600)


def main(defaults: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-on-go", type=int, default=0)
    parser.add_argument("--once-file")
    parser.add_argument("--exit-code", type=int, default=3)
    parser.add_argument("--hang-on-go", type=int, default=0)
    parser.add_argument("--silent-start", action="store_true")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--illegal", action="store_true")
    parser.add_argument("--stderr-bytes", type=int, default=0)
    parser.add_argument("--multipv", action="store_true")
    parser.add_argument("--no-info", action="store_true")
    parser.add_argument("--book", choices=("depth0", "string"))
    parser.add_argument("--book-plies", type=int)
    parser.add_argument("--script")
    parser.add_argument("--score", type=int)
    parser.add_argument("--mark-dir")
    parser.add_argument("--hang-if-exists")
    parser.add_argument("--garbage-stderr", action="store_true")
    parser.add_argument("--no-bestmove", action="store_true")
    parser.add_argument("--first-start-only")
    parser.add_argument("--hang-on-quit", action="store_true")
    parser.add_argument("--log")
    parser.add_argument("--clock-file")
    parser.add_argument("--spend", default="")
    parser.add_argument("--until-stop-on-go", type=int, default=0)
    parser.add_argument("--ponder", action="store_true")
    parser.add_argument("--ponder-miss", action="store_true")
    args = parser.parse_args(defaults + sys.argv[1:])
    global _mark_dir
    _mark_dir = args.mark_dir
    _mark("started")

    board = cshogi.Board()
    gos = 0
    multipv = 1
    ply = 0
    book = args.book
    script = open(args.script).read().split() if args.script else None
    spend = [int(ms) for ms in args.spend.split(",") if ms]
    log = open(args.log, "a", buffering=1) if args.log else None
    for line in sys.stdin:
        if log is not None:
            log.write(line)
        tokens = line.split()
        if not tokens:
            continue
        command = tokens[0]
        if command == "usi":
            if args.silent_start:
                _hang()
            if args.first_start_only:
                if os.path.exists(args.first_start_only):
                    _hang()
                open(args.first_start_only, "w").close()
            _say("id name FakeEngine 1.0")
            _say("id author bookgen tests")
            _say("option name Threads type spin default 1 min 1 max 4")
            if args.multipv:
                _say("option name MultiPV type spin default 1 min 1 max 500")
            if args.ponder:
                _say("option name USI_Ponder type check default false")
            if args.book:
                _say("option name USI_OwnBook type check default true")
                _say("option name BookFile type combo default standard_book.db "
                     "var no_book var standard_book.db")
            _say("usiok")
        elif command == "isready":
            _say("readyok")
        elif command == "setoption" and "MultiPV" in tokens and tokens[-2] == "value":
            multipv = int(tokens[-1])
        elif command == "setoption" and len(tokens) == 5 and tokens[2] in (
                "USI_OwnBook", "BookFile"):
            if tokens[4] in ("false", "no_book"):
                book = None
        elif command == "position":
            board.set_position(" ".join(tokens[1:]))
            ply = len(tokens) - tokens.index("moves") - 1 if "moves" in tokens else 0
        elif command == "go":
            gos += 1
            if args.stderr_bytes:
                chunk = "x" * 99 + "\n"
                for _ in range(args.stderr_bytes // 100):
                    sys.stderr.write(chunk)
                sys.stderr.write(f"end of search {gos}\n")
                sys.stderr.flush()
            if args.garbage_stderr:
                sys.stderr.buffer.write(b"\xff\xfe garbage \x1b[31m\x00 on stderr \x80\n")
                sys.stderr.flush()
            if gos == args.crash_on_go:
                if not args.once_file or not os.path.exists(args.once_file):
                    if args.once_file:
                        open(args.once_file, "w").close()
                    sys.stderr.write("fake engine: simulated crash\n")
                    sys.stderr.flush()
                    os._exit(args.exit_code)
            if gos == args.hang_on_go or (args.hang_if_exists
                                          and os.path.exists(args.hang_if_exists)):
                _hang()
            if "ponder" in tokens[1:]:
                for waiting in sys.stdin:
                    if log is not None:
                        log.write(waiting)
                    if waiting.split()[:1] in (["ponderhit"], ["stop"]):
                        break
            if args.clock_file:
                _advance_clock(args.clock_file, spend[gos - 1] if gos <= len(spend) else 0)
            if gos == args.until_stop_on_go:
                for waiting in sys.stdin:
                    if log is not None:
                        log.write(waiting)
                    if waiting.split()[:1] == ["stop"]:
                        break
            if args.no_bestmove:
                sys.stdout.buffer.write(b"info string \xff\xfe\x00 binary \x1b[2J garbage\n")
                _say("bestmove")
                continue
            if args.garbage:
                sys.stdout.buffer.write(b"\xff\xfe\x00 binary garbage \x80\n")
                _say("info depth x seldepth ? score cp abc nodes 12 junk pv")
                _say("info score mate")
                _say("hello, this is not USI")
                _say("bestmovement 1a1a")
                _say("")
            if args.illegal:
                _say("info depth 1 score cp 10 pv 9a9a 1a1b")
                _say("bestmove 9a9a")
                continue
            if script is not None:
                move = script[ply] if ply < len(script) else "resign"
                if args.score is not None:
                    _say(f"info depth 1 score cp {args.score} pv {move}")
                _say(f"bestmove {move}")
                continue
            moves = [cshogi.move_to_usi(m) for m in board.legal_moves]
            if book and moves and (args.book_plies is None or ply < args.book_plies):
                if book == "depth0":
                    _say(f"info depth 0 seldepth 0 multipv 1 score cp 37 nodes 0 nps 0 "
                         f"time 0 pv {moves[-1]}")
                else:
                    _say("info string book hit: standard_book.db")
                _say(f"bestmove {moves[-1]}")
                continue
            for index, move in enumerate(moves[:0 if args.no_info else multipv], start=1):
                score = 60 - 10 * index if args.score is None else args.score
                _say(f"info depth 3 seldepth 4 multipv {index} score cp {score} "
                     f"nodes {100 * index} nps 10000 time 1 pv {move}")
            if moves and args.ponder:
                board.push_usi(moves[0])
                replies = [cshogi.move_to_usi(m) for m in board.legal_moves]
                board.pop()
                if replies:
                    reply = replies[-1] if args.ponder_miss else replies[0]
                    _say(f"bestmove {moves[0]} ponder {reply}")
                    continue
            _say(f"bestmove {moves[0]}" if moves else "bestmove resign")
        elif command == "quit":
            if args.hang_on_quit:
                _hang()
            break
