"""Self-play (bookgen.selfplay.games): hcpe records, CSA records, start files, engines, outputs.

Everything written is checked with cshogi alone: records decode to positions
whose best move is legal, CSA files re-parse with ``cshogi.Parser`` and
replay legally, and the records are exactly the positions of those games
with the games' results.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shlex
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.cli.support import error_text
from bookgen.engines.player_settings import RandomOpening
from bookgen.engines.restart import SearchLimits
from bookgen.errors import BookgenError, SettingsError
from bookgen.formats.positions import read_starts
from bookgen.play.loop import GameRules
from bookgen.play.rules import Result
from bookgen.selfplay.games import (
    SelfplayOutput,
    SelfplayPlayers,
    SelfplaySettings,
    selfplay,
    selfplay_player,
)
from conftest import PYTHON, run_cli

FAIRY = "/usr/games/fairy-stockfish"
FAKES = Path(__file__).resolve().parent / "fake_engines"
ROOTS = ["startpos", "startpos moves 7g7f 3c3d", "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/"
         "2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"]
HCPE = cshogi.HuffmanCodedPosAndEval


def fake(*args: str) -> str:
    return "usi:" + " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / "fake_engine.py",
                                                             *args))


def mcts(playouts: int = 100, random_moves: int = 4) -> SelfplayPlayers:
    """mcts:builtin on both sides, sampling the first ``random_moves`` plies."""
    return SelfplayPlayers.both(selfplay_player(
        "mcts:builtin", playouts=playouts, opening=RandomOpening(random_moves=random_moves)))


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
    settings = SelfplaySettings(3, players=mcts(16, random_moves=4), rules=GameRules(max_ply=60),
                                output=SelfplayOutput(csa_dir=tmp / "csa"), seed=1)
    summary = selfplay(starts, tmp / "out.hcpe", settings, progress=False)
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
    settings = SelfplaySettings(4, players=mcts(4, random_moves=8), rules=GameRules(max_ply=24),
                                seed=5)
    one = selfplay(starts, tmp_path / "one.hcpe", settings, progress=False)
    two = selfplay(starts, tmp_path / "two.hcpe", dataclasses.replace(settings, workers=2),
                   progress=False)
    assert (tmp_path / "one.hcpe").read_bytes() == (tmp_path / "two.hcpe").read_bytes()
    assert [vars(g) for g in one.game_infos] == [vars(g) for g in two.game_infos]
    other = selfplay(starts, tmp_path / "other.hcpe", dataclasses.replace(settings, seed=6),
                     progress=False)
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
    summary = selfplay(path, tmp_path / "out.hcpe", SelfplaySettings(
        3, players=mcts(2), rules=GameRules(max_ply=8),
        output=SelfplayOutput(csa_dir=tmp_path / "csa")), progress=False)
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
    summary = selfplay(starts, tmp_path / "out.hcpe", SelfplaySettings(
        3, players=mcts(2), rules=GameRules(max_ply=10),
        output=SelfplayOutput(out_min=tmp_path / "min.hcp", min_ply=11)), progress=False)
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
    kept = selfplay(starts, tmp_path / "kept.hcpe", SelfplaySettings(
        3, players=mcts(2), rules=GameRules(max_ply=10),
        output=SelfplayOutput(out_min=tmp_path / "none.hcp", min_ply=5)), progress=False)
    long_games = [g for g in kept.game_infos if g.plies >= 5]
    assert kept.short_games == 3 - len(long_games)
    assert (tmp_path / "none.hcp").stat().st_size == 32 * kept.short_games
    assert kept.positions == sum(g.plies for g in long_games)
    with pytest.raises(SettingsError, match=r"^output.out_min needs output.min_ply "):
        SelfplayOutput(out_min=tmp_path / "m.hcp")


def test_existing_outputs_need_append_or_force(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    out = tmp_path / "out.hcpe"
    settings = SelfplaySettings(2, players=mcts(2), rules=GameRules(max_ply=6))
    selfplay(starts, out, settings, progress=False)
    size = out.stat().st_size
    assert size == 2 * 6 * HCPE.itemsize
    with pytest.raises(SettingsError) as caught:
        selfplay(starts, out, settings, progress=False)
    assert str(caught.value) == (f"{out}: output already exists (use output.append to add "
                                 "to it or output.replace to replace it)")
    assert caught.value.field == "output.replace"
    assert out.stat().st_size == size
    selfplay(starts, out, dataclasses.replace(settings, output=SelfplayOutput(append=True)),
             progress=False)
    assert out.stat().st_size == 2 * size
    selfplay(starts, out, dataclasses.replace(settings, games=1,
                                              output=SelfplayOutput(replace=True)),
             progress=False)
    assert out.stat().st_size == size // 2


def test_score_adjudication_resigns_and_records_the_loss(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    summary = selfplay(starts, tmp_path / "out.hcpe", SelfplaySettings(
        3, players=mcts(4, random_moves=0), rules=GameRules(max_ply=60, resign_cp=1,
                                                            resign_moves=1)), progress=False)
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
    players = SelfplayPlayers(
        selfplay_player(f"usi:{FAIRY}", options=(("Threads", "1"),), playouts=16,
                        limits=SearchLimits(nodes=2000)),
        selfplay_player("mcts:builtin", options=(("Threads", "1"),), playouts=16,
                        limits=SearchLimits(nodes=2000)))
    summary = selfplay(starts, tmp_path / "out.hcpe", SelfplaySettings(
        1, players=players, rules=GameRules(max_ply=60),
        output=SelfplayOutput(csa_dir=tmp_path / "csa"), seed=3), progress=False)
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
    summary = selfplay(starts, tmp_path / "out.hcpe", SelfplaySettings(
        1, players=SelfplayPlayers(selfplay_player(fake("--illegal")),
                                   selfplay_player("alphabeta")),
        output=SelfplayOutput(csa_dir=tmp_path / "csa")), progress=False)
    info = summary.game_infos[0]
    assert info.reason == "illegal move" and info.result == cshogi.WHITE_WIN
    assert info.plies == 0 and info.records == 0
    parser, _ = replay_csa(info.csa)
    assert parser.win == cshogi.WHITE_WIN and parser.endgame == "%ILLEGAL_MOVE"
    once = tmp_path / "crashed"
    crashing = selfplay_player(fake("--crash-on-go", "2", "--once-file", str(once)),
                               limits=SearchLimits(byoyomi_ms=100))
    summary = selfplay(starts, tmp_path / "crash.hcpe", SelfplaySettings(
        1, players=SelfplayPlayers.both(crashing), rules=GameRules(max_ply=8)), progress=False)
    assert once.exists() and summary.game_infos[0].plies == 8
    check_records(np.fromfile(tmp_path / "crash.hcpe", HCPE))


def test_a_player_that_cannot_start_leaves_no_output(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    missing = SelfplayPlayers(selfplay_player("usi:/nonexistent/engine"),
                              selfplay_player("mcts:builtin"))
    with pytest.raises(BookgenError, match="cannot start"):
        selfplay(starts, tmp_path / "out.hcpe", SelfplaySettings(1, players=missing),
                 progress=False)
    with pytest.raises(BookgenError, match="unknown player 'nonsense'"):
        selfplay_player("nonsense")
    with pytest.raises(BookgenError, match="mcts: needs an evaluator"):
        selfplay_player("mcts:nonsense")
    with pytest.raises(SettingsError, match="usi: players only"):
        SelfplayPlayers.both(selfplay_player("mcts:builtin", limits=SearchLimits(nodes=100)))
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
    with pytest.raises(BookgenError, match=refused):
        selfplay_player("builtin")
    for sides in (["--player", "builtin"], ["--black", "builtin"], ["--white", "builtin"],
                  ["--player", "builtin", "--black", "mcts:builtin", "--white",
                   "mcts:builtin"]):
        result = run_cli("selfplay", "--starts", starts, "--games", "1", "-o",
                         tmp_path / "refused.hcpe", "--csa", tmp_path / "csa", *sides,
                         expect=2)
        assert refused in result.stderr
    assert list(tmp_path.iterdir()) == [starts]
    assert SelfplayPlayers() == SelfplayPlayers.both(selfplay_player("mcts:builtin"))
    assert SelfplaySettings(1).players == mcts(100)
    common = ["--starts", starts, "--games", "2", "--playouts", "4", "--max-ply", "12",
              "--seed", "3", "--json"]
    default = run_cli("selfplay", *common, "-o", tmp_path / "default.hcpe")
    spelled = run_cli("selfplay", *common, "-o", tmp_path / "mcts.hcpe", "--player",
                      "mcts:builtin")
    assert (tmp_path / "default.hcpe").read_bytes() == (tmp_path / "mcts.hcpe").read_bytes()
    assert json.loads(default.stdout)["reasons"] == json.loads(spelled.stdout)["reasons"]
    capsys.readouterr()
    alphabeta = selfplay(starts, tmp_path / "ab.hcpe", SelfplaySettings(
        1, players=SelfplayPlayers.both(selfplay_player("alphabeta")),
        rules=GameRules(max_ply=4), output=SelfplayOutput(csa_dir=tmp_path / "csa")),
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


# -- settings: fields in the library, flags on the command line -------------------------


def _usi_only(side: str) -> str:
    return (f"engine options, players.{side}.limits.nodes, players.{side}.limits.byoyomi_ms, "
            f"players.{side}.limits.movetime_ms and players.{side}.engine_timeout_s apply to "
            "usi: players only")


USI_ONLY_CLI = ("engine options, --nodes, --byoyomi, --movetime and --engine-timeout apply to "
                "usi: players only")


@pytest.mark.parametrize("make, field, library, cli", [
    (lambda: SelfplaySettings(0), "games", "games must be at least 1",
     "--games must be at least 1"),
    (lambda: SelfplaySettings(1, workers=0), "workers", "workers must be at least 1",
     "--workers must be at least 1"),
    (lambda: SelfplayPlayers.both(selfplay_player("mcts:builtin", playouts=0)),
     "players.black.mcts.playouts", "players.black.mcts.playouts must be at least 1",
     "--playouts must be at least 1"),
    (lambda: SelfplayPlayers(selfplay_player("mcts:builtin"),
                             selfplay_player("mcts:builtin", batch_size=0)),
     "players.white.mcts.batch_size", "players.white.mcts.batch_size must be at least 1",
     "--batch-size must be at least 1"),
    (lambda: SelfplaySettings(1, rules=GameRules(max_ply=0)), "rules.max_ply",
     "rules.max_ply must be at least 1", "--max-ply must be at least 1"),
    (lambda: SelfplaySettings(1, rules=GameRules(resign_moves=0)), "rules.resign_moves",
     "rules.resign_moves must be at least 1", "--resign-moves must be at least 1"),
    (lambda: SelfplaySettings(1, rules=GameRules(resign_cp=0)), "rules.resign_cp",
     "rules.resign_cp must be a positive number of centipawns",
     "--resign must be a positive number of centipawns"),
    (lambda: SelfplaySettings(1, rules=GameRules(declaration_rule="25")),
     "rules.declaration_rule", "rules.declaration_rule must be 27 or 24, not '25'",
     "--declaration-rule must be 27 or 24, not '25'"),
    (lambda: RandomOpening(random_moves=-1), "opening.random_moves",
     "opening.random_moves must be at least 0", "--random-moves must be at least 0"),
    (lambda: RandomOpening(temperature=0), "opening.temperature",
     "opening.temperature must be positive", "--temperature must be positive"),
    (lambda: RandomOpening(random_cutoff=1.5), "opening.random_cutoff",
     "opening.random_cutoff must be between 0 and 1", "--random-cutoff must be between 0 and 1"),
    (lambda: SelfplayOutput(min_ply=-1), "output.min_ply", "output.min_ply must be at least 0",
     "--min-ply must be at least 0"),
    (lambda: SelfplayOutput(out_min=Path("m.hcp")), "output.out_min",
     "output.out_min needs output.min_ply (games shorter than it are collected)",
     "--out-min needs --min-ply (games shorter than it are collected)"),
    (lambda: SelfplayOutput(append=True, replace=True), "output.append",
     "output.append and output.replace exclude each other",
     "--append and --force exclude each other"),
    (lambda: SelfplayPlayers.both(selfplay_player(
        "mcts:builtin", limits=SearchLimits(byoyomi_ms=100))),
     "players.black.limits.byoyomi_ms", _usi_only("black"), USI_ONLY_CLI),
    (lambda: SelfplayPlayers(selfplay_player("mcts:builtin"),
                             selfplay_player("alphabeta", options=(("Threads", "1"),))),
     "players.white.options", _usi_only("white"), USI_ONLY_CLI),
    (lambda: SelfplaySettings(1, players=SelfplayPlayers.both(selfplay_player(
        "mcts:builtin", engine_timeout_s=5.0))),
     "players.black.engine_timeout_s", _usi_only("black"), USI_ONLY_CLI),
])
def test_bad_settings_name_the_field_and_the_cli_the_flag(make, field, library, cli):
    """The library's texts name settings fields; the CLI's are those selfplay gave when
    it named the flags itself."""
    with pytest.raises(SettingsError) as caught:
        make()
    assert (caught.value.field, str(caught.value)) == (field, library)
    assert "--" not in str(caught.value)
    assert error_text(caught.value) == cli


def test_players_carry_their_random_opening_and_the_settings_pickle():
    usi = selfplay_player("usi:engine", options=(("Threads", "1"),),
                          limits=SearchLimits(nodes=10), engine_timeout_s=3.0)
    opening = RandomOpening(random_moves=9, temperature=0.5, random_cutoff=0.25)
    players = SelfplayPlayers(usi, selfplay_player("mcts:builtin", playouts=7, opening=opening))
    settings = SelfplaySettings(2, players=players)
    assert settings.players.white.mcts.opening == opening
    assert settings.players.black.mcts.opening == RandomOpening(4, 1.0, 0.9)  # dlshogi's
    assert settings.players.white.mcts.playouts == 7
    assert settings.players.black.options == (("Threads", "1"),)
    assert settings.players.black.limits == SearchLimits(nodes=10)
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert dataclasses.replace(settings, seed=4).players == settings.players
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.games = 3  # type: ignore[misc]
    assert SelfplayOutput(csa_dir="csa").csa_dir == Path("csa")  # type: ignore[arg-type]


def test_networks_share_the_cores_between_workers(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    network = selfplay_player("torch:m.pt", evaluator_options={"batch_size": 8})
    builtin = selfplay_player("mcts:builtin")
    players = SelfplayPlayers(network, builtin)
    assert players.for_workers(1) == (network, builtin)
    black, white = players.for_workers(4)
    assert black.mcts.evaluator_options == (("batch_size", 8), ("threads", 2))
    assert white.mcts.evaluator_options == (("threads", 2),)  # as before: every side
    assert SelfplayPlayers.both(builtin).for_workers(4) == (builtin, builtin)
    assert network.mcts.batch_size > 1 and builtin.mcts.batch_size == 1  # their defaults


def test_cli_errors_name_the_flags_as_before(tmp_path):
    starts = write_starts(tmp_path / "starts.txt")
    base = ["selfplay", "--starts", starts, "--games", "1", "--max-ply", "2", "--playouts",
            "2"]

    def error(*args: object) -> str:
        result = run_cli(*base, *args, expect=2)
        assert result.stdout == ""
        return result.stderr

    assert error("-o", tmp_path / "a.hcpe", "--append", "--force") == (
        "bookgen: error: --append and --force exclude each other\n")
    assert error("-o", tmp_path / "a.hcpe", "--out-min", tmp_path / "m.hcp") == (
        "bookgen: error: --out-min needs --min-ply (games shorter than it are collected)\n")
    for flags in (["--nodes", "100"], ["--byoyomi", "100"], ["--engine-timeout", "2"],
                  ["--white-option", "Threads=1"],
                  ["--black", "mcts:builtin", "--movetime", "5"]):
        assert error("-o", tmp_path / "a.hcpe", *flags) == (
            f"bookgen: error: {USI_ONLY_CLI}\n")
    out, short = tmp_path / "out.hcpe", tmp_path / "short.hcp"
    out.write_bytes(b"")
    assert error("-o", out) == (f"bookgen: error: {out}: output already exists (use --append "
                                "to add to it or --force to replace it)\n")
    short.write_bytes(b"")
    assert error("-o", tmp_path / "b.hcpe", "--out-min", short, "--min-ply", "5") == (
        f"bookgen: error: {short}: --out-min file already exists (use --append to add to it "
        "or --force to replace it)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hcpe", "short.hcp",
                                                           "starts.txt"]
    # a deprecated spec given for both sides warns once, as the library did
    result = run_cli(*base, "-o", tmp_path / "ab.hcpe", "--black", "alphabeta", "--white",
                     "alphabeta")
    assert result.stderr.count("bookgen: warning: 'alphabeta' is deprecated") == 1


def test_results_use_cshogi_constants():
    assert (int(Result.DRAW), int(Result.BLACK_WIN), int(Result.WHITE_WIN)) == \
        (cshogi.DRAW, cshogi.BLACK_WIN, cshogi.WHITE_WIN) == (0, 1, 2)
