"""bookgen suite --from-records: dlshogi's csa_to_gokakusfen rule over game records.

Records are written with cshogi's own exporters (CSA ``'** N`` score comments,
KIF ``評価値`` comments through ``KIF.Exporter.info``), and expected suites are
computed here from the games as written, with cshogi only.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import pytest
from cshogi import CSA, KIF

from bookgen.analysis.record_suites import (
    RecordSuiteSettings,
    RecordSuiteSummary,
    make_suite_from_records,
)
from bookgen.analysis.suites import SuiteSelection
from bookgen.cli.support import error_text
from bookgen.errors import SettingsError
from bookgen.formats.records import csa_value, kif_value
from conftest import DB2016_HEADER, key_of, run_cli

START_KEY = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
FULL_START = START_KEY + " 1"


@dataclass
class Game:
    """A game as written: start sfen, USI moves, and the black-view score
    recorded with each move (None: no comment)."""

    moves: list[str]
    values: list[int | None]
    start: str = FULL_START
    ratings: tuple[float | None, float | None] = (None, None)
    names: tuple[str, str] = ("sente", "gote")
    extra: list[str] = field(default_factory=list)


def random_game(rng: random.Random, plies: int, *, start: str = FULL_START,
                prefix: tuple[str, ...] = (), values: tuple[int | None, ...] = (
                    -300, -120, -60, -10, 0, 35, 99, 100, 101, 250, None),
                **kwargs) -> Game:
    board = cshogi.Board(start)
    moves = list(prefix)
    for move in moves:
        board.push_usi(move)
    while len(moves) < plies:
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    return Game(moves, [rng.choice(values) for _ in moves], start=start, **kwargs)


def csa_text(game: Game, path: Path) -> str:
    """The game written by cshogi.CSA.Exporter (to ``path``), returned as text."""
    exporter = CSA.Exporter(str(path))
    header = "".join(f"'{side}_rate:{name}:{rating}\n" for side, name, rating in
                     zip(("black", "white"), game.names, game.ratings) if rating is not None)
    exporter.info(init_board=cshogi.Board(game.start), names=list(game.names),
                  comment=header or None)
    board = cshogi.Board(game.start)
    for usi, value in zip(game.moves, game.values):
        move = board.move_from_usi(usi)
        exporter.move(move, comment=None if value is None else f"** {value}")
        board.push(move)
    exporter.endgame("%TORYO")
    exporter.close()
    return path.read_text()


def write_csa(path: Path, *games: Game, crlf: bool = False) -> None:
    """One game per file, or several separated by '/' lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".part")
    text = "/\n".join(csa_text(game, scratch) for game in games)
    scratch.unlink()
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes(text.encode())


def write_kif(path: Path, game: Game, *, utf8_as_kif: bool = False) -> None:
    """cshogi.KIF.Exporter: CP932 for .kif, UTF-8 for .kifu; ``utf8_as_kif``
    writes UTF-8 under a .kif name (what many tools do)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.with_suffix(".kifu") if utf8_as_kif else path
    exporter = KIF.Exporter(str(target))
    exporter.header(list(game.names))
    board = cshogi.Board(game.start)
    for usi, value in zip(game.moves, game.values):
        move = board.move_from_usi(usi)
        exporter.move(move, 1, 1)
        if value is not None:
            # info() takes the mover's score and writes it from black's view.
            mover_view = value if board.turn == cshogi.BLACK else -value
            exporter.info(f"info depth 3 nodes 100 score cp {mover_view} pv {usi}")
        board.push(move)
    exporter.end("resign")
    exporter.close()
    if utf8_as_kif:
        target.rename(path)


def expected(games: list[Game], plies: set[int], bound: int | None, min_moves: int = 0
             ) -> dict[str, set[tuple[int, int | None]]]:
    """position key -> {(ply, side-to-move value)} of the qualifying positions
    (bound None: whatever the value)."""
    result: dict[str, set[tuple[int, int | None]]] = {}
    for game in games:
        if len(game.moves) < min_moves:
            continue
        board = cshogi.Board(game.start)
        for index in range(len(game.moves) + 1):
            value = game.values[index] if index < len(game.moves) else None
            if index + 1 in plies and (bound is None or (value is not None
                                                         and abs(value) <= bound)):
                stm = value if value is None or board.turn == cshogi.BLACK else -value
                result.setdefault(key_of(board), set()).add((index + 1, stm))
            if index < len(game.moves):
                board.push_usi(game.moves[index])
    return result


def replay(line: str) -> tuple[cshogi.Board, str, list[str]]:
    """Replay an output line with cshogi, every move checked against the legal moves."""
    tokens = line.split()
    if tokens[0] == "startpos":
        start, rest = FULL_START, tokens[1:]
    else:
        assert tokens[0] == "sfen", line
        start, rest = " ".join(tokens[1:5]), tokens[5:]
    board = cshogi.Board(start)
    moves = rest[1:] if rest else []
    assert not rest or rest[0] == "moves", line
    for move in moves:
        assert move in {cshogi.move_to_usi(m) for m in board.legal_moves}, f"{line}: {move}"
        board.push_usi(move)
    return board, start, moves


def output_keys(path: Path) -> dict[str, str]:
    """key -> line of the output, checking that no position appears twice."""
    keys: dict[str, str] = {}
    for line in path.read_text().splitlines():
        board, _start, _moves = replay(line)
        key = key_of(board)
        assert key not in keys, f"{line} and {keys[key]} are the same position"
        keys[key] = line
    return keys


def suite(*args: object, expect: int = 0):
    return run_cli("suite", *args, expect=expect)


# --------------------------------------------------------------------------


def test_csa_tree_multi_game_dedupe_and_min_moves(tmp_path):
    rng = random.Random(7)
    records = tmp_path / "records"
    long_games = [random_game(rng, rng.randint(40, 70)) for _ in range(8)]
    short_games = [random_game(rng, rng.randint(10, 29)) for _ in range(3)]
    # Transposition: both reach the same position at ply 5 by different orders.
    a = random_game(rng, 45, prefix=("7g7f", "3c3d", "2g2f", "8c8d"), values=(0,))
    b = random_game(rng, 45, prefix=("2g2f", "8c8d", "7g7f", "3c3d"), values=(0,))
    # Same opening, same position at ply 9 (reached in two games).
    long_games[0].values[:12] = [0] * 12
    c = random_game(rng, 50, prefix=tuple(long_games[0].moves[:12]))
    c.values[:12] = [0] * 12
    games = long_games + short_games + [a, b, c]
    write_csa(records / "a" / "one.csa", long_games[0])
    write_csa(records / "a" / "deeper" / "multi.CSA", *long_games[1:4], short_games[0])
    write_csa(records / "b" / "crlf.csa", long_games[4], crlf=True)
    # b before a: the line kept must not depend on the order records are read.
    for number, game in enumerate(long_games[5:] + short_games[1:] + [b, a, c]):
        write_csa(records / "b" / f"g{number}.csa", game)
    (records / "b" / "notes.txt").write_text("not a record\n")
    out = tmp_path / "suite.txt"
    summary = json.loads(suite("--from-records", records, "-o", out, "--plies", "5,9,13",
                               "--max-value", "100", "--min-moves", "30", "--json").stdout)
    wanted = expected(games, {5, 9, 13}, 100, min_moves=30)
    keys = output_keys(out)
    assert set(keys) == set(wanted)
    assert summary["positions"] == len(keys)
    for key, line in keys.items():
        _board, start, moves = replay(line)
        assert start == FULL_START and line.startswith("startpos moves ")
        assert len(moves) + 1 in {ply for ply, _value in wanted[key]}
    # The transposition is written once, from the first line in text order.
    lines = set(keys.values())
    assert "startpos moves 2g2f 8c8d 7g7f 3c3d" in lines
    assert "startpos moves 7g7f 3c3d 2g2f 8c8d" not in lines
    assert summary["records"] == {"files": 11, "read": 14, "skipped": 0}
    assert summary["games"]["used"] == 11 and summary["games"]["too_short"] == 3
    # At least: ply 5 of a/b, plies 5 and 9 of c and long_games[0].
    assert summary["duplicates"] >= 3
    assert summary["candidates"] == len(keys) + summary["duplicates"]
    assert sum(summary["by_ply"].values()) == sum(summary["by_value"].values()) == len(keys)
    assert set(summary["by_ply"]) <= {"5", "9", "13"}
    assert set(summary["by_value"]) <= {"-100..-51", "-50..-1", "0..49", "50..99", "100..149"}


def test_values_are_per_position_and_side_to_move(tmp_path):
    # The score recorded with move k evaluates the position it was played from.
    rng = random.Random(1)
    game = random_game(rng, 12, values=(0,))
    game.values = [500, 500, -60, 30, 0, 500, None, 80, 500, 500, 500, 500]
    write_csa(tmp_path / "g.csa", game)
    out = tmp_path / "s.txt"
    summary = json.loads(suite("--from-records", tmp_path / "g.csa", "-o", out, "--min-moves",
                               "0", "--min-ply", "2", "--max-ply", "13", "--json").stdout)
    plies = sorted(len(replay(line)[2]) + 1 for line in out.read_text().splitlines())
    assert plies == [3, 4, 5, 8]
    # ply 3 black to move -60, ply 4 white to move (black view 30 -> -30),
    # ply 5 black 0, ply 8 white (black view 80 -> -80).
    assert summary["by_value"] == {"-100..-51": 2, "-50..-1": 1, "0..49": 1}
    assert summary["by_ply"] == {"3": 1, "4": 1, "5": 1, "8": 1}
    # Without values: every selected ply, including the final position and
    # the one without a comment.
    summary = json.loads(suite("--from-records", tmp_path / "g.csa", "-o", out, "--min-moves",
                               "0", "--min-ply", "7", "--ignore-values", "--json").stdout)
    assert sorted(len(replay(line)[2]) + 1 for line in out.read_text().splitlines()) == list(
        range(7, 14))
    assert summary["by_value"]["none"] == 2
    # dlshogi's line bound: nothing after an evaluation above it. An empty suite is an
    # error that says why, and the output is left as it was.
    before = out.read_text()
    error = suite("--from-records", tmp_path / "g.csa", "-o", out, "--min-moves", "0",
                  "--max-line-value", "100", "--max-value", "100", expect=2)
    assert "no position qualified" in error.stderr
    assert "12 after an evaluation beyond --max-line-value 100" in error.stderr
    assert out.read_text() == before
    game.values[:2] = [90, -100]
    write_csa(tmp_path / "g.csa", game)
    suite("--from-records", tmp_path / "g.csa", "-o", out, "--min-moves", "0",
          "--max-line-value", "100", "--max-value", "100")
    plies = sorted(len(replay(line)[2]) + 1 for line in out.read_text().splitlines())
    assert plies == [1, 2, 3, 4, 5]


def test_ratings_filter(tmp_path):
    rng = random.Random(3)
    rated = [random_game(rng, 40, ratings=(3900.0, 3850.5), names=("x", "y")),
             random_game(rng, 40, ratings=(3900.0, 3700.0)),
             random_game(rng, 40, ratings=(3790.0, 4100.0))]
    unrated = [random_game(rng, 40)]
    write_csa(tmp_path / "r" / "all.csa", *rated, *unrated)
    out = tmp_path / "s.txt"
    args = ("--from-records", tmp_path / "r", "-o", out, "--min-moves", "40",
            "--plies", "5,11,17", "--json")
    summary = json.loads(suite(*args, "--min-rating", "3800").stdout)
    assert set(output_keys(out)) == set(expected(rated[:1], {5, 11, 17}, 100))
    assert summary["games"] == {"used": 1, "with_positions": 1, "too_short": 0,
                                "unrated": 1, "below_min_rating": 2}
    summary = json.loads(suite(*args, "--min-rating", "3800", "--allow-unrated").stdout)
    assert set(output_keys(out)) == set(expected(rated[:1] + unrated, {5, 11, 17}, 100))
    summary = json.loads(suite(*args).stdout)
    assert set(output_keys(out)) == set(expected(rated + unrated, {5, 11, 17}, 100))
    assert summary["games"]["used"] == 4


def test_an_empty_suite_is_an_error_that_says_why(tmp_path):
    """No qualifying position: exit 2, nothing written, one line counting what each
    rule left out (bad records, short or unrated games, missing or large values)."""
    rng = random.Random(5)
    short = [random_game(rng, 20) for _ in range(2)]
    unrated = random_game(rng, 60)
    rated = random_game(rng, 60, ratings=(3900.0, 3900.0), values=(None,))
    rated.values[10] = 500   # ply 11: beyond --max-value; ply 21 has no value
    write_csa(tmp_path / "r" / "games.csa", *short, unrated, rated)
    (tmp_path / "r" / "bad.csa").write_text("V2.2\nPI\n+\n+9999FU\n")
    out = tmp_path / "suite.txt"
    error = suite("--from-records", tmp_path / "r", "-o", out, "--plies", "11,21",
                  "--min-moves", "40", "--min-rating", "3800", expect=2)
    lines = error.stderr.strip().splitlines()
    assert lines[-1] == (
        f"bookgen: error: no position qualified, {out} not written: 2 files, 4 games read "
        "(1 skipped as bad records); games left out: 2 shorter than --min-moves 40, "
        "1 without both ratings (--min-rating; see --allow-unrated); 1 games used; "
        "their positions at the selected plies: 1 without a recorded evaluation (see "
        "--ignore-values), 1 beyond --max-value 100")
    assert not out.exists()
    # Games too short for the plies asked for are counted as such.
    error = suite("--from-records", tmp_path / "r" / "games.csa", "-o", out, "--plies", "100",
                  "--min-moves", "0", expect=2)
    assert "4 games used, 4 of them ending before the selected plies" in error.stderr


def test_kif_cp932_utf8_and_kifu(tmp_path):
    rng = random.Random(11)
    games = [random_game(rng, 50, names=("先手の名人", "後手の竜王")) for _ in range(3)]
    write_kif(tmp_path / "k" / "cp932.kif", games[0])
    write_kif(tmp_path / "k" / "utf8.kif", games[1], utf8_as_kif=True)
    write_kif(tmp_path / "k" / "sub" / "game.kifu", games[2])
    # An unfinished game with a variation: only the main line counts.
    games.append(random_game(rng, 50))
    write_kif(tmp_path / "k" / "variation.kif", games[3])
    text = (tmp_path / "k" / "variation.kif").read_text(encoding="cp932")
    board = cshogi.Board()
    for usi in games[3].moves[:48]:
        board.push_usi(usi)
    other = KIF.move_to_kif(next(m for m in board.legal_moves
                                 if cshogi.move_to_usi(m) != games[3].moves[48]))
    text = text[:text.index("  51 ")] + f"\n変化：49手\n  49 {other}   ( 0:01/00:00:01)\n"
    (tmp_path / "k" / "variation.kif").write_text(text, encoding="cp932")
    assert (tmp_path / "k" / "cp932.kif").read_bytes().decode("cp932")
    assert "先手の名人" in (tmp_path / "k" / "utf8.kif").read_text(encoding="utf-8")
    out = tmp_path / "s.txt"
    summary = json.loads(suite("--from-records", tmp_path / "k", "-o", out, "--min-moves", "50",
                               "--plies", "7,20,33", "--max-value", "120", "--json").stdout)
    wanted = expected(games, {7, 20, 33}, 120)
    assert wanted and set(output_keys(out)) == set(wanted)
    assert summary["records"] == {"files": 4, "read": 4, "skipped": 0}
    # The variation's move is not read as a 51st move of the main line.
    summary = json.loads(suite("--from-records", tmp_path / "k" / "variation.kif", "-o", out,
                               "--min-moves", "0", "--plies", "51,52", "--ignore-values",
                               "--json").stdout)
    assert summary["by_ply"] == {"51": 1} and summary["records"]["skipped"] == 0


def test_kif_and_csa_value_comments():
    assert csa_value("123 -3334FU +2726FU") == 123
    assert csa_value("-45") == -45
    assert csa_value("* 30 -3334FU") == 30  # an inline ,'* 30 comment
    assert csa_value("") is None and csa_value(None) is None
    assert csa_value("abc 12") is None
    assert kif_value("対局 時間 00:01.0 深さ 5 評価値 -87 読み筋 ...") == -87
    assert kif_value("解析 0 候補1 評価値 +詰 3") == 30000
    assert kif_value("評価値 -詰") == -30000
    assert kif_value("ただのコメント") is None


def test_games_from_other_start_positions(tmp_path):
    rng = random.Random(5)
    board = cshogi.Board()
    for move in ("7g7f", "3c3d", "8h2b+", "3a2b", "B*4e"):
        board.push_usi(move)
    sfen = board.sfen()
    from_sfen = random_game(rng, 40, start=sfen, values=(0, 40, -40))
    write_csa(tmp_path / "r" / "sfen.csa", from_sfen)
    handicap = random_game(rng, 40, start="lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/"
                                          "LNSGKGSNL w - 1")
    exporter = KIF.Exporter(str(tmp_path / "r" / "kyo.kif"))
    exporter.header(["下手", "上手"], handicap="香落ち")
    hboard = cshogi.Board(handicap.start)
    for usi in handicap.moves:
        exporter.move(hboard.move_from_usi(usi), 1, 1)
        hboard.push_usi(usi)
    exporter.end("resign")
    exporter.close()
    out = tmp_path / "s.txt"
    suite("--from-records", tmp_path / "r", "-o", out, "--min-moves", "40",
          "--plies", "1,10,21", "--ignore-values")
    lines = out.read_text().splitlines()
    assert len(lines) == 6
    starts = set()
    for line in lines:
        assert line.startswith("sfen ")
        _board, start, moves = replay(line)
        starts.add(start.rsplit(" ", 1)[0])
        assert len(moves) + 1 in (1, 10, 21)
    assert starts == {sfen.rsplit(" ", 1)[0], handicap.start.rsplit(" ", 1)[0]}
    assert set(output_keys(out)) == set(expected([from_sfen, handicap], {1, 10, 21}, None))
    assert "sfen " + sfen.rsplit(" ", 1)[0] + " 1" in lines  # ply 1: no "moves"


def test_cap_limit_and_seed(tmp_path):
    rng = random.Random(9)
    games = [random_game(rng, 40, values=(0, 10)) for _ in range(12)]
    write_csa(tmp_path / "all.csa", *games)
    out = tmp_path / "s.txt"
    base = ("--from-records", tmp_path / "all.csa", "-o", out, "--min-moves", "30",
            "--min-ply", "3", "--max-ply", "12")
    suite(*base, "--per-line-cap", "1", "--cap-plies", "1")
    firsts = [replay(line)[2][0] for line in out.read_text().splitlines()]
    assert len(firsts) == len(set(firsts)) == len({game.moves[0] for game in games})
    suite(*base, "--limit", "7", "--seed", "4")
    first = out.read_text()
    assert len(first.splitlines()) == 7
    assert set(output_keys(out)) <= set(expected(games, set(range(3, 13)), 100))
    suite(*base, "--limit", "7", "--seed", "4")
    assert out.read_text() == first
    suite(*base, "--limit", "7", "--seed", "5")
    assert out.read_text() != first


def crashing_csa() -> str:
    """A CSA board missing its fifth rank line: cshogi's C++ parser reads
    uninitialised squares and crashes the interpreter on it."""
    rows = cshogi.Board().csa_pos().splitlines()
    return "\n".join(row for row in rows if not row.startswith("P5")) + "\n+7776FU\n"


def write_bad_records(root: Path, rng: random.Random) -> tuple[list[Game], dict[str, str]]:
    """Good records and bad ones; returns the good games and file -> expected reason."""
    good = [random_game(rng, 40, values=(0, 20, -20)) for _ in range(3)]
    write_csa(root / "good.csa", good[0])
    # Japanese text in a score comment and a score before the first move: both
    # trip cshogi (ASCII decoding, out-of-bounds write) unless handled.
    text = csa_text(good[1], root / "odd.csa").replace("'** 0\n", "'** 0 ▲７六歩\n")
    (root / "odd.csa").write_text(text.replace("PI\n+\n", "PI\n+\n'** 15\n"))
    bad = {
        "illegal.csa": "move 3 is illegal",
        "binary.csa": "binary data",
        "encoding.kif": "not UTF-8 or CP932",
        "crash.csa": "crashed",
        "handicap.kif": "cannot parse",
        "bod.kifu": "board diagram",
        "nokings.csa": "invalid start position",
        "multi.csa: game 2": "move 2 is illegal",
    }
    (root / "illegal.csa").write_text("PI\n+\n+7776FU\n'** 0\n-3334FU\n+2725FU\n%TORYO\n")
    (root / "binary.csa").write_bytes(b"PI\n+\n\0\0\0\x01")
    (root / "encoding.kif").write_bytes("手合割：平手\n".encode() + b"\x81 \n")
    (root / "crash.csa").write_text(crashing_csa())
    (root / "handicap.kif").write_text("手合割：謎の手合\n   1 ７六歩(77)\n", encoding="cp932")
    exporter = KIF.Exporter(str(root / "bod.kifu"))
    exporter.header(["a", "b"], handicap=cshogi.Board(
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"))
    exporter.end("resign")
    exporter.close()
    (root / "nokings.csa").write_text(cshogi.Board().csa_pos().replace("OU", "KI") + "+7776FU\n")
    middle = "PI\n+\n+7776FU\n-3344FU\n"
    multi = [csa_text(good[2], root / "multi.csa"), middle,
             csa_text(good[0], root / "multi.csa")]
    (root / "multi.csa").write_text("/\n".join(multi))
    return good, bad


def test_bad_records_are_reported_and_skipped(tmp_path):
    root = tmp_path / "records"
    root.mkdir()
    good, bad = write_bad_records(root, random.Random(2))
    out = tmp_path / "s.txt"
    result = suite("--from-records", root, "-o", out, "--min-moves", "20",
                   "--plies", "3,10", "--json")
    summary = json.loads(result.stdout)
    messages = summary["bad_records"]
    assert len(messages) == len(bad) == summary["records"]["skipped"]
    for where, reason in bad.items():
        matching = [message for message in messages if message.startswith(f"{root}/{where}: ")]
        assert len(matching) == 1, (where, messages)
        assert reason in matching[0], matching[0]
        assert f"bookgen: skipped {matching[0]}" in result.stderr
    assert summary["records"]["read"] == 4  # good, odd, and games 1 and 3 of multi.csa
    assert set(output_keys(out)) == set(expected(good, {3, 10}, 100))


def test_strict_stops_without_touching_the_output(tmp_path):
    root = tmp_path / "records"
    root.mkdir()
    write_bad_records(root, random.Random(4))
    out = tmp_path / "s.txt"
    out.write_text("the old suite\n")
    result = suite("--from-records", root, "-o", out, "--strict", expect=2)
    assert "--strict" in result.stderr and str(root) in result.stderr
    assert out.read_text() == "the old suite\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records", "s.txt"]
    # The same records minus the bad ones pass --strict.
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in ("good.csa", "odd.csa"):
        shutil.copy(root / name, clean / name)
    suite("--from-records", clean, root / "good.csa", "-o", out, "--strict", "--min-moves",
          "10", "--plies", "4")
    assert len(out.read_text().splitlines()) >= 1


def test_empty_and_header_only_records_are_bad_records(tmp_path):
    """An empty or header-only file is no game: reported and skipped, counted 0
    games; a game that ends before its first move (a resignation) is one."""
    root = tmp_path / "r"
    root.mkdir()
    game = random_game(random.Random(12), 30, values=(0,))
    write_csa(root / "good.csa", game)
    (root / "empty.kif").write_bytes(b"")
    (root / "blank.kifu").write_text("\n\n")
    (root / "header.csa").write_text("V2.2\nN+a\nN-b\nPI\n+\n")
    for name, result in (("header.kif", None), ("resigned.kif", "resign")):
        exporter = KIF.Exporter(str(root / name))
        exporter.header(["a", "b"])
        if result:
            exporter.end(result)
        exporter.close()
    out = tmp_path / "s.txt"
    summary = json.loads(suite("--from-records", root, "-o", out, "--min-moves", "0",
                               "--plies", "1,5", "--json").stdout)
    assert summary["records"] == {"files": 6, "read": 2, "skipped": 4}
    reasons = {message.split(": ", 1)[0]: message.split(": ", 1)[1]
               for message in summary["bad_records"]}
    assert set(reasons) == {str(root / n) for n in ("empty.kif", "blank.kifu", "header.csa",
                                                    "header.kif")}
    assert all("empty or header-only" in reason for reason in reasons.values()), reasons
    assert set(output_keys(out)) == set(expected([game], {1, 5}, 100))
    result = suite("--from-records", root / "good.csa", root / "empty.kif", "-o", out,
                   "--strict", expect=2)
    assert f"{root / 'empty.kif'}: no moves and no result" in result.stderr


def test_record_paths_as_arguments(tmp_path):
    rng = random.Random(8)
    games = [random_game(rng, 30, values=(0,)) for _ in range(3)]
    for number, game in enumerate(games):
        write_csa(tmp_path / f"g{number}.csa", game)
    out = tmp_path / "s.txt"
    suite("--from-records", tmp_path / "g0.csa", tmp_path / "g1.csa", tmp_path / "g2.csa",
          tmp_path / "g0.csa", "-o", out, "--min-moves", "0", "--plies", "6")
    assert set(output_keys(out)) == set(expected(games, {6}, 100))
    result = suite("--from-records", tmp_path / "g0.csa", "-o", out, "--min-moves", "0")
    assert "records: 1 files, 1 games read, 0 skipped" in result.stdout
    assert "by value {" in result.stdout


def test_option_errors(tmp_path):
    rng = random.Random(6)
    write_csa(tmp_path / "r" / "g.csa", random_game(rng, 20))
    (tmp_path / "empty").mkdir()
    (tmp_path / "x.pgn").write_text("1. e4\n")
    out = tmp_path / "s.txt"
    records = ("--from-records", tmp_path / "r", "-o", out)
    cases = [
        ((*records, "-b", tmp_path / "book.sqlite"), "-b/--book is for book suites"),
        ((*records, "--values", "minimax"), "--values is for book suites"),
        (("-o", out, "--min-moves", "3"), "--min-moves is for suites from game records"),
        (("-o", out, "--strict"), "--strict is for suites from game records"),
        (("-o", out, "--ignore-values"), "--ignore-values is for suites from game records"),
        (("-o", out, tmp_path / "r"), "record paths need --from-records"),
        ((*records, "--plies", "5", "--min-ply", "2"), "--plies replaces"),
        ((*records, "--plies", "5,x"), "is not a ply number"),
        ((*records, "--plies", "0"), "is not a ply number"),
        ((*records, "--ignore-values", "--max-value", "50"), "--ignore-values"),
        ((*records, "--allow-unrated"), "--allow-unrated only applies with --min-rating"),
        ((*records, "--min-ply", "9", "--max-ply", "3"), "above --max-ply"),
        (("--from-records", tmp_path / "missing", "-o", out), "no such file or directory"),
        (("--from-records", tmp_path / "empty", "-o", out), "no game records"),
        (("--from-records", tmp_path / "x.pgn", "-o", out), "not a game record"),
    ]
    for args, message in cases:
        result = suite(*args, expect=2)
        assert message in result.stderr, (args, result.stderr)
    assert not out.exists()


def test_book_suite_plies_and_value_summary(tmp_path):
    lines = [DB2016_HEADER, f"sfen {FULL_START}", "7g7f none 30 1 1", "2g2f none -20 1 1"]
    for first, reply, value in (("7g7f", "3c3d", -70), ("2g2f", "8c8d", 10)):
        board = cshogi.Board()
        board.push_usi(first)
        lines += [f"sfen {board.sfen()}", f"{reply} none {value} 1 1"]
    source = tmp_path / "book.db"
    source.write_text("\n".join(lines) + "\n")
    book = tmp_path / "book.sqlite"
    run_cli("import", source, "-b", book)
    out = tmp_path / "s.txt"
    summary = json.loads(suite("-b", book, "-o", out, "--plies", "2", "--json").stdout)
    assert out.read_text().splitlines() == ["startpos moves 2g2f", "startpos moves 7g7f"]
    assert summary["by_value"] == {"-100..-51": 1, "0..49": 1}
    assert summary["by_ply"] == {"2": 2}
    summary = json.loads(suite("-b", book, "-o", out, "--plies", "1,2", "--max-value", "50",
                               "--json").stdout)
    assert out.read_text().splitlines() == ["startpos", "startpos moves 2g2f"]
    assert summary["by_value"] == {"0..49": 2}
    result = suite("-b", book, "-o", out)
    assert "by value {-100..-51: 1, 0..49: 2}" in result.stdout


# -- the library: settings in, a typed summary out, errors naming the settings --------------


def test_the_library_gives_the_summary_the_cli_prints(tmp_path):
    root = tmp_path / "records"
    root.mkdir()
    write_bad_records(root, random.Random(2))
    settings = RecordSuiteSettings(SuiteSelection(plies=(3, 10)), min_moves=20)
    skipped: list[str] = []
    summary = make_suite_from_records([root], tmp_path / "lib.txt", settings,
                                      on_bad=skipped.append)
    assert isinstance(summary, RecordSuiteSummary)
    assert summary.records.skipped == len(skipped) == len(summary.bad_records) > 0
    printed = json.loads(suite("--from-records", root, "-o", tmp_path / "cli.txt",
                               "--min-moves", "20", "--plies", "3,10", "--json").stdout)
    printed["file"] = str(tmp_path / "lib.txt")
    assert list(summary.as_dict().items()) == list(printed.items())
    assert (tmp_path / "lib.txt").read_bytes() == (tmp_path / "cli.txt").read_bytes()


def test_library_errors_name_the_settings_and_the_cli_its_flags(tmp_path):
    rng = random.Random(5)
    short = [random_game(rng, 20) for _ in range(2)]
    rated = random_game(rng, 60, ratings=(3900.0, 3900.0), values=(None,))
    rated.values[10] = 500   # ply 11: beyond the bound; ply 21 has no value
    write_csa(tmp_path / "r" / "games.csa", *short, rated)
    out = tmp_path / "suite.txt"
    settings = RecordSuiteSettings(SuiteSelection(plies=(11, 21)), min_moves=40,
                                   min_rating=3800)
    with pytest.raises(SettingsError) as caught:
        make_suite_from_records([tmp_path / "r"], out, settings)
    assert str(caught.value) == (
        f"no position qualified, {out} not written: 1 file, 3 games read; games left out: "
        "2 shorter than min_moves 40; 1 games used; their positions at the selected plies: "
        "1 without a recorded evaluation (see ignore_values), 1 beyond "
        "selection.max_value_cp 100")
    cli = suite("--from-records", tmp_path / "r", "-o", out, "--plies", "11,21",
                "--min-moves", "40", "--min-rating", "3800", expect=2)
    assert cli.stderr == f"bookgen: error: {error_text(caught.value)}\n"
    assert "shorter than --min-moves 40" in cli.stderr and "--max-value 100" in cli.stderr
    # --strict: the record's reason, then the setting (the CLI: its flag).
    (tmp_path / "r" / "bad.csa").write_text("V2.2\nPI\n+\n+9999FU\n")
    with pytest.raises(SettingsError) as caught:
        make_suite_from_records([tmp_path / "r"], out, RecordSuiteSettings(strict=True))
    assert caught.value.field == "strict" and str(caught.value).endswith(" (strict)")
    assert error_text(caught.value).endswith(" (--strict)")
    assert not out.exists()


@pytest.mark.parametrize("fields, library, cli", [
    ({"allow_unrated": True}, "allow_unrated only applies with min_rating",
     "--allow-unrated only applies with --min-rating"),
    ({"max_line_value_cp": -1}, "max_line_value_cp must be at least 0",
     "--max-line-value must be at least 0"),
    ({"min_moves": -1}, "min_moves must be at least 0", "--min-moves must be at least 0"),
])
def test_record_suite_settings_name_their_fields(fields, library, cli):
    with pytest.raises(SettingsError) as caught:
        RecordSuiteSettings(**fields)
    assert (str(caught.value), error_text(caught.value)) == (library, cli)
