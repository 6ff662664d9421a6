"""Self-play (bookgen.selfplay.games): hcpe records, CSA records, start files, engines, outputs.

Everything written is checked with cshogi alone: records decode to positions
whose best move is legal, CSA files re-parse with ``cshogi.Parser`` and
replay legally, and the records are exactly the positions of those games
with the games' results.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.errors import BookgenError
from bookgen.formats.positions import read_starts
from bookgen.play.rules import Result
from bookgen.selfplay.games import selfplay
from conftest import PYTHON, run_cli

FAIRY = "/usr/games/fairy-stockfish"
FAKES = Path(__file__).resolve().parent / "fake_engines"
ROOTS = ["startpos", "startpos moves 7g7f 3c3d", "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/"
         "2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"]
HCPE = cshogi.HuffmanCodedPosAndEval


def fake(*args: str) -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / "fake_engine.py",
                                                             *args))


def write_starts(path: Path, lines: list[str] = ROOTS) -> Path:
    path.write_text("# roots\n" + "\n".join(lines) + "\n")
    return path


def root_keys(lines: list[str] = ROOTS) -> set[str]:
    from bookgen.position import parse_position_spec
    return {parse_position_spec(line)[0].sfen().rsplit(" ", 1)[0] for line in lines}


def key(board: cshogi.Board) -> str:
    return board.sfen().rsplit(" ", 1)[0]


def check_records(records: np.ndarray) -> None:
    """Every record is a legal position whose best move is legal there."""
    board = cshogi.Board()
    for record in records:
        board.set_hcp(record["hcp"])
        cshogi.Board(board.sfen())  # a valid sfen
        move = board.move_from_move16(int(record["bestMove16"]))
        assert move and move in board.legal_moves, board.sfen()
        assert int(record["gameResult"]) in (cshogi.DRAW, cshogi.BLACK_WIN, cshogi.WHITE_WIN)
        assert abs(int(record["eval"])) <= 30000


def replay_csa(path: str) -> tuple[cshogi.Parser, list[str]]:
    """Parse a CSA file and replay it; returns the parser and the positions before each move."""
    parsers = cshogi.Parser.parse_file(path)
    assert len(parsers) == 1
    parser = parsers[0]
    board = cshogi.Board(parser.sfen)
    positions = []
    for move in parser.moves:
        assert move in board.legal_moves
        positions.append(key(board))
        board.push(move)
    return parser, positions


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("selfplay")
    starts = write_starts(tmp / "starts.txt")
    summary = selfplay(starts, 3, tmp / "out.hcpe", playouts=16, max_ply=60, random_moves=4,
                       csa_dir=tmp / "csa", seed=1, progress=False)
    return tmp, summary


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
def test_builtin_games_write_legal_records(builtin_run):
    tmp, summary = builtin_run
    records = np.fromfile(tmp / "out.hcpe", HCPE)
    assert len(records) == summary.positions > 0
    assert summary.games == 3 == summary.black_wins + summary.white_wins + summary.draws
    assert sum(summary.reasons.values()) == 3
    check_records(records)
    assert not list(tmp.glob(".*.tmp"))


def test_records_are_the_games_positions_with_their_results(builtin_run):
    tmp, summary = builtin_run
    records = np.fromfile(tmp / "out.hcpe", HCPE)
    board = cshogi.Board()
    offset = 0
    starts = root_keys()
    for info in summary.game_infos:  # written in game order
        assert info.csa is not None
        parser, positions = replay_csa(info.csa)
        assert key(cshogi.Board(parser.sfen)) in starts
        assert parser.win == info.result
        assert parser.names[0].startswith("builtin mcts 16")
        game = records[offset:offset + info.records]
        offset += info.records
        # Every position before a move has a record (no resignations here).
        assert len(game) == len(positions) == info.plies
        for record, position, _move, score in zip(game, positions, parser.moves,
                                                    parser.scores):
            board.set_hcp(record["hcp"])
            assert key(board) == position
            assert int(record["gameResult"]) == info.result
            # CSA scores are from black's side, hcpe evals from the side to move's.
            black_view = int(record["eval"]) if board.turn == cshogi.BLACK else \
                -int(record["eval"])
            assert score == black_view
        if info.reason == "checkmate":
            last = cshogi.Board(parser.sfen)
            for move in parser.moves:
                last.push(move)
            assert last.is_game_over()
            assert info.result == (cshogi.WHITE_WIN if last.turn == cshogi.BLACK
                                   else cshogi.BLACK_WIN)
        if info.reason == "max ply":
            assert info.plies == 60 and info.result == cshogi.DRAW
    assert offset == len(records)


def test_same_seed_same_games_with_any_number_of_workers(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    kwargs = dict(playouts=4, max_ply=24, random_moves=8, seed=5, progress=False)
    one = selfplay(starts, 4, tmp_path / "one.hcpe", **kwargs)
    two = selfplay(starts, 4, tmp_path / "two.hcpe", workers=2, **kwargs)
    assert (tmp_path / "one.hcpe").read_bytes() == (tmp_path / "two.hcpe").read_bytes()
    assert [vars(g) for g in one.game_infos] == [vars(g) for g in two.game_infos]
    other = selfplay(starts, 4, tmp_path / "other.hcpe", **{**kwargs, "seed": 6})
    assert (tmp_path / "other.hcpe").read_bytes() != (tmp_path / "one.hcpe").read_bytes()
    assert other.games == 4


def test_hcp_start_file(tmp_path):
    boards = [cshogi.Board(), cshogi.Board()]
    boards[1].push_usi("2g2f")
    hcps = np.zeros(2, cshogi.HuffmanCodedPos)
    for i, board in enumerate(boards):
        board.to_hcp(hcps[i]["hcp"])
    path = tmp_path / "roots.hcp"
    hcps.tofile(path)
    assert len(read_starts(path)) == 2
    summary = selfplay(path, 3, tmp_path / "out.hcpe", playouts=2, max_ply=8,
                       csa_dir=tmp_path / "csa", progress=False)
    for info in summary.game_infos:
        parser, _ = replay_csa(info.csa)
        assert key(cshogi.Board(parser.sfen)) == key(boards[info.root_index])
    check_records(np.fromfile(tmp_path / "out.hcpe", HCPE))


def test_bad_start_files(tmp_path):
    (tmp_path / "short.hcp").write_bytes(b"\x00" * 31)
    with pytest.raises(BookgenError, match="whole number"):
        read_starts(tmp_path / "short.hcp")
    (tmp_path / "junk.hcp").write_bytes(b"\xff" * 32)
    with pytest.raises(BookgenError, match="record 0"):
        read_starts(tmp_path / "junk.hcp")
    (tmp_path / "bad.txt").write_text("startpos moves 7g7f 7g7f\n")
    with pytest.raises(BookgenError, match="bad.txt:1"):
        read_starts(tmp_path / "bad.txt")


def test_out_min_collects_the_roots_of_short_games(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    summary = selfplay(starts, 3, tmp_path / "out.hcpe", playouts=2, max_ply=10,
                       out_min=tmp_path / "min.hcp", min_ply=11, progress=False)
    assert summary.short_games == 3 and summary.positions == 0
    assert (tmp_path / "out.hcpe").stat().st_size == 0
    roots = np.fromfile(tmp_path / "min.hcp", cshogi.HuffmanCodedPos)
    assert len(roots) == 3
    board = cshogi.Board()
    keys = root_keys()
    for root, info in zip(roots, summary.game_infos):
        board.set_hcp(root["hcp"])
        assert key(board) in keys
        assert info.records == 0
    kept = selfplay(starts, 3, tmp_path / "kept.hcpe", playouts=2, max_ply=10,
                    out_min=tmp_path / "none.hcp", min_ply=5, progress=False)
    long_games = [g for g in kept.game_infos if g.plies >= 5]
    assert kept.short_games == 3 - len(long_games)
    assert (tmp_path / "none.hcp").stat().st_size == 32 * kept.short_games
    assert kept.positions == sum(g.plies for g in long_games)
    with pytest.raises(BookgenError, match="--min-ply"):
        selfplay(starts, 1, tmp_path / "x.hcpe", out_min=tmp_path / "m.hcp", progress=False)


def test_existing_outputs_need_append_or_force(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    out = tmp_path / "out.hcpe"
    kwargs = dict(playouts=2, max_ply=6, progress=False)
    selfplay(starts, 2, out, **kwargs)
    size = out.stat().st_size
    assert size == 2 * 6 * HCPE.itemsize
    with pytest.raises(BookgenError, match="already exists"):
        selfplay(starts, 2, out, **kwargs)
    assert out.stat().st_size == size
    selfplay(starts, 2, out, append=True, **kwargs)
    assert out.stat().st_size == 2 * size
    selfplay(starts, 1, out, force=True, **kwargs)
    assert out.stat().st_size == size // 2


def test_score_adjudication_resigns_and_records_the_loss(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    summary = selfplay(starts, 3, tmp_path / "out.hcpe", playouts=4, max_ply=60, resign=1,
                       resign_moves=1, random_moves=0, progress=False)
    records = np.fromfile(tmp_path / "out.hcpe", HCPE)
    resigned = [g for g in summary.game_infos if g.reason == "resign"]
    assert resigned
    offset = 0
    board = cshogi.Board()
    for info in summary.game_infos:
        game = records[offset:offset + info.records]
        offset += info.records
        if info.reason != "resign":
            continue
        # The resigning side's position is the last record: it scored itself <= -1 and lost.
        board.set_hcp(game[-1]["hcp"])
        assert int(game[-1]["eval"]) <= -1
        assert info.result == (cshogi.WHITE_WIN if board.turn == cshogi.BLACK
                               else cshogi.BLACK_WIN)
        assert info.records == info.plies + 1


def test_fairy_stockfish_against_the_builtin(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    summary = selfplay(starts, 1, tmp_path / "out.hcpe", black=f"usi:{FAIRY}",
                       white="mcts:builtin", playouts=16, max_ply=60, nodes=2000,
                       engine_options={"Threads": "1"}, csa_dir=tmp_path / "csa", seed=3,
                       progress=False)
    records = np.fromfile(tmp_path / "out.hcpe", HCPE)
    check_records(records)
    info = summary.game_infos[0]
    parser, positions = replay_csa(info.csa)
    assert parser.names[0].startswith("Fairy-Stockfish")
    assert parser.names[1].startswith("builtin mcts")
    assert parser.win == info.result == int(records[0]["gameResult"])
    assert len(records) == len(positions) == info.plies
    board = cshogi.Board()
    for record, move in zip(records, parser.moves):
        board.set_hcp(record["hcp"])
        if board.turn == cshogi.BLACK:  # the engine's best move is the move it played
            assert board.move_from_move16(int(record["bestMove16"])) == move


def test_engine_illegal_move_loses_and_crash_restarts(tmp_path):
    starts = write_starts(tmp_path / "starts.txt", ["startpos"])
    summary = selfplay(starts, 1, tmp_path / "out.hcpe", black=fake("--illegal"),
                       white="alphabeta", csa_dir=tmp_path / "csa", progress=False)
    info = summary.game_infos[0]
    assert info.reason == "illegal move" and info.result == cshogi.WHITE_WIN
    assert info.plies == 0 and info.records == 0
    parser, _ = replay_csa(info.csa)
    assert parser.win == cshogi.WHITE_WIN and parser.endgame == "%ILLEGAL_MOVE"
    once = tmp_path / "crashed"
    summary = selfplay(starts, 1, tmp_path / "crash.hcpe",
                       player=fake("--crash-on-go", "2", "--once-file", str(once)), max_ply=8,
                       byoyomi=100, progress=False)
    assert once.exists() and summary.game_infos[0].plies == 8
    check_records(np.fromfile(tmp_path / "crash.hcpe", HCPE))


def test_a_player_that_cannot_start_leaves_no_output(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    with pytest.raises(BookgenError, match="cannot start"):
        selfplay(starts, 1, tmp_path / "out.hcpe", black="usi:/nonexistent/engine",
                 progress=False)
    with pytest.raises(BookgenError, match="unknown player 'nonsense'"):
        selfplay(starts, 1, tmp_path / "out.hcpe", player="nonsense", workers=2,
                 progress=False)
    with pytest.raises(BookgenError, match="mcts: needs an evaluator"):
        selfplay(starts, 1, tmp_path / "out.hcpe", player="mcts:nonsense", progress=False)
    with pytest.raises(BookgenError, match="usi: players only"):
        selfplay(starts, 1, tmp_path / "out.hcpe", nodes=100, progress=False)
    assert list(tmp_path.iterdir()) == [starts]


def test_cli(tmp_path):
    # Through bookgen's own group: click caches a command's help option from the first
    # group that runs it, so a bare group here would take -h away from later tests.
    starts = write_starts(tmp_path / "starts.txt")
    result = run_cli("selfplay", "--starts", starts, "--games", "2", "-o",
                     tmp_path / "out.hcpe", "--playouts", "2", "--max-ply", "6", "--json")
    data = json.loads(result.stdout)
    assert data["games"] == 2 and data["positions"] == 12
    result = run_cli("selfplay", "--starts", starts, "--games", "1", "-o",
                     tmp_path / "out.hcpe", "--playouts", "2", "--max-ply", "4", "--force")
    assert "1 games, 4 positions" in result.stdout
    result = run_cli("selfplay", "--starts", starts, "--games", "1", "-o",
                     tmp_path / "x.hcpe", "--out-min", tmp_path / "m.hcp", expect=2)
    assert result.output.strip().startswith("bookgen: error:") and "--min-ply" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_builtin_is_refused_and_alphabeta_warns(tmp_path, capsys):
    """builtin meant MCTS in self-play and now means the alpha-beta player: refused, so
    that nobody's games change silently; alphabeta still plays alpha-beta, with a warning;
    the default and mcts:builtin play today's MCTS games."""
    starts = write_starts(tmp_path / "starts.txt")
    refused = "builtin now means the alpha-beta player everywhere; use mcts:builtin"
    for sides in ({"player": "builtin"}, {"black": "builtin"}, {"white": "builtin"},
                  {"player": "builtin", "black": "mcts:builtin", "white": "mcts:builtin"}):
        with pytest.raises(BookgenError, match=refused):
            selfplay(starts, 1, tmp_path / "refused.hcpe", csa_dir=tmp_path / "csa",
                     progress=False, **sides)
    assert list(tmp_path.iterdir()) == [starts]
    kwargs = dict(playouts=4, max_ply=12, seed=3, progress=False)
    default = selfplay(starts, 2, tmp_path / "default.hcpe", **kwargs)
    spelled = selfplay(starts, 2, tmp_path / "mcts.hcpe", player="mcts:builtin", **kwargs)
    assert (tmp_path / "default.hcpe").read_bytes() == (tmp_path / "mcts.hcpe").read_bytes()
    assert [vars(g) for g in default.game_infos] == [vars(g) for g in spelled.game_infos]
    capsys.readouterr()
    alphabeta = selfplay(starts, 1, tmp_path / "ab.hcpe", black="alphabeta",
                         white="alphabeta", max_ply=4, csa_dir=tmp_path / "csa",
                         progress=False)
    warning = capsys.readouterr().err
    assert warning.count("bookgen: warning: 'alphabeta' is deprecated") == 1
    parser, _ = replay_csa(alphabeta.game_infos[0].csa)
    assert parser.names == ["builtin alphabeta", "builtin alphabeta"]


def test_cli_refuses_builtin_in_one_line(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    result = run_cli("selfplay", "--starts", starts, "--games", "1", "-o",
                     tmp_path / "out.hcpe", "--white", "builtin", expect=2)
    assert result.stderr == ("bookgen: error: builtin now means the alpha-beta player "
                             "everywhere; use mcts:builtin (the old meaning)\n")


def test_results_use_cshogi_constants():
    assert (int(Result.DRAW), int(Result.BLACK_WIN), int(Result.WHITE_WIN)) == \
        (cshogi.DRAW, cshogi.BLACK_WIN, cshogi.WHITE_WIN) == (0, 1, 2)
