"""Self-play with many games per worker: ``selfplay --parallel-games K``.

The K games of a worker run interleaved as resumable games
(:func:`bookgen.play.loop.playing_game`), their MCTS searches' leaves sent to
one evaluator together (:class:`bookgen.engines.batching.SearchBatcher`).
With deterministic settings the games, and so the hcpe records, must be
those of playing the games one after another with the same search batch
(``batch_size / K`` leaves per search): compared here with the built-in
evaluator and a small random-init torch network, in this process, in worker
processes and through the CLI. Also: the device-dependent defaults of
``--batch-size``, ``--parallel-searches`` and ``--parallel-games``, with the
device query (:func:`bookgen.engines.network.device.gpu_present`) replaced,
as no GPU exists here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cshogi
import numpy as np
import pytest
from click.testing import CliRunner

from bookgen.cli import main as cli
from bookgen.cli.model import model_group
from bookgen.cli.support import error_text
from bookgen.engines import factory
from bookgen.engines.batching import SearchBatcher, search_batch
from bookgen.engines.mcts_player import MctsPlayer
from bookgen.engines.network import device
from bookgen.engines.player_settings import RandomOpening
from bookgen.engines.players import close_players
from bookgen.errors import SettingsError
from bookgen.formats.positions import read_starts
from bookgen.play.loop import GameRules, play_game, playing_game
from bookgen.selfplay.games import (
    GameSettings,
    SelfplayPlayers,
    SelfplaySettings,
    SelfplaySummary,
    open_players,
    play_games,
    selfplay,
    selfplay_player,
)
from conftest import run_cli

ROOTS = ["startpos", "startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d 2f2e",
         "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random-init torch network (``bookgen model init``)."""
    path = tmp_path_factory.mktemp("parallel") / "small.pt"
    result = CliRunner().invoke(model_group, ["init", "-o", str(path), "--blocks", "1",
                                              "--channels", "8", "--seed", "3"])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return path


@pytest.fixture()
def starts(tmp_path: Path) -> Path:
    path = tmp_path / "starts.txt"
    path.write_text("\n".join(ROOTS) + "\n")
    return path


def _players(spec: str, batch_size: int, options: dict | None = None) -> SelfplayPlayers:
    return SelfplayPlayers.both(selfplay_player(
        spec, playouts=24, batch_size=batch_size, evaluator_options=options,
        opening=RandomOpening(random_moves=6)))


def _records(summary: SelfplaySummary) -> list[dict]:
    return [vars(g) for g in summary.game_infos]


@pytest.mark.parametrize("kind", ["builtin", "torch"])
def test_games_played_together_are_the_games_played_one_after_another(
        tmp_path: Path, starts: Path, model: Path, kind: str) -> None:
    games, parallel, batch = 6, 3, 6
    spec = "mcts:builtin" if kind == "builtin" else f"mcts:torch:{model}"
    options = None if kind == "builtin" else {"threads": 1, "batch_size": batch}
    rules = GameRules(max_ply=30)
    together = SelfplaySettings(games, players=_players(spec, batch, options), rules=rules,
                                seed=4, parallel_games=parallel)
    # One after another, each search with the batch it has among K games.
    alone = SelfplaySettings(games, players=_players(spec, search_batch(batch, parallel),
                                                     options),
                             rules=rules, seed=4)
    first = selfplay(starts, tmp_path / "together.hcpe", together, progress=False)
    second = selfplay(starts, tmp_path / "alone.hcpe", alone, progress=False)
    data = (tmp_path / "together.hcpe").read_bytes()
    assert data and data == (tmp_path / "alone.hcpe").read_bytes()
    assert _records(first) == _records(second) and first.games == games
    # The games are not all alike (the check could fail): different starts or moves.
    records = np.frombuffer(data, cshogi.HuffmanCodedPosAndEval)
    assert len({bytes(r) for r in records["hcp"]}) > len(records) // 2
    if kind == "builtin":
        # The built-in evaluator's batch does not change its search: with batch 1
        # the games are also those of the default settings, one game at a time.
        one = SelfplaySettings(games, players=_players(spec, 1), rules=rules, seed=4,
                               parallel_games=parallel)
        plain = SelfplaySettings(games, players=_players(spec, 1), rules=rules, seed=4)
        selfplay(starts, tmp_path / "one.hcpe", one, progress=False)
        selfplay(starts, tmp_path / "plain.hcpe", plain, progress=False)
        assert (tmp_path / "one.hcpe").read_bytes() == (tmp_path / "plain.hcpe").read_bytes()


def test_worker_processes_play_groups_of_games(tmp_path: Path, starts: Path) -> None:
    settings = SelfplaySettings(5, players=_players("mcts:builtin", 4), rules=GameRules(max_ply=20),
                                seed=2, parallel_games=2, workers=2)
    pooled = selfplay(starts, tmp_path / "pool.hcpe", settings, progress=False)
    local = selfplay(starts, tmp_path / "local.hcpe", dataclasses.replace(settings, workers=1),
                     progress=False)
    assert (tmp_path / "pool.hcpe").read_bytes() == (tmp_path / "local.hcpe").read_bytes()
    assert _records(pooled) == _records(local) and pooled.games == 5


def test_the_batcher_gathers_the_leaves_of_the_games(starts: Path, model: Path) -> None:
    """Games played together send batches of their leaves: more boards per call
    than one game's search batch, never more than the worker's batch."""
    player = selfplay_player(f"mcts:torch:{model}", playouts=16, batch_size=2,
                             evaluator_options={"threads": 1, "batch_size": 8})
    players = open_players(player, player)
    try:
        records = play_games(range(4), read_starts(starts), players,
                             GameSettings(GameRules(max_ply=6), 1, batch_size=8))
    finally:
        close_players(players.values())
    assert len(records) == 4 and [r.index for r in records] == [0, 1, 2, 3]
    stats = records[0].batch_stats
    assert stats is not None and all(r.batch_stats is None for r in records[1:])
    assert stats.calls and stats.boards >= sum(r.plies for r in records)
    assert 2 < stats.mean_batch <= 8


def test_the_batcher_starts_the_next_search_as_one_ends() -> None:
    """``active`` searches at a time: a short search's place goes to the next one
    at once, while the long ones go on; results stay in order."""
    events: list[str] = []

    def search(name: str, steps: int):
        events.append(f"start {name}")
        for _ in range(steps):
            yield [cshogi.Board()]
        events.append(f"end {name}")
        return name

    class Counting:
        spec = "counting"
        batches: list[int] = []

        def evaluate(self, boards):
            self.batches.append(len(boards))
            return [None] * len(boards)

    evaluator = Counting()
    batcher = SearchBatcher(evaluator, 2)  # type: ignore[arg-type]
    names = batcher.run([search("a", 1), search("b", 4), search("c", 1), search("d", 2)],
                        active=2)
    assert names == ["a", "b", "c", "d"]
    assert events.index("start c") == events.index("end a") + 1
    assert events.index("start c") < events.index("end b")
    assert events[:2] == ["start a", "start b"] and max(evaluator.batches) == 2
    assert sum(evaluator.batches) == 8 and evaluator.batches.count(2) == 4


def test_play_game_drives_the_resumable_game_without_yielding() -> None:
    player = selfplay_player("mcts:builtin", playouts=8)
    players = open_players(player, player)
    try:
        rules = GameRules(max_ply=6)
        played = play_game(cshogi.Board(), players, rules, rng=np.random.default_rng(1))
        steps = playing_game(cshogi.Board(), players, rules, rng=np.random.default_rng(1),
                             searching=True)
        boards = next(steps)   # an MCTS player's search yields its leaves
        assert boards and all(isinstance(b, cshogi.Board) for b in boards)
        player_object = players[cshogi.BLACK]
        assert isinstance(player_object, MctsPlayer)
        evaluator = player_object.evaluator
        try:
            while True:
                boards = steps.send(evaluator.evaluate(boards))
        except StopIteration as stop:
            resumed = stop.value
    finally:
        close_players(players.values())
    assert resumed.moves == played.moves and resumed.outcome == played.outcome


def test_parallel_games_need_one_mcts_player() -> None:
    with pytest.raises(SettingsError) as error:
        SelfplaySettings(2, players=SelfplayPlayers(selfplay_player("mcts:builtin"),
                                                    selfplay_player("alphabeta")),
                         parallel_games=2)
    assert error.value.field == "parallel_games"
    assert "--parallel-games" in error_text(error.value)
    with pytest.raises(SettingsError):
        SelfplaySettings(2, players=SelfplayPlayers.both(selfplay_player("alphabeta")),
                         parallel_games=3)
    with pytest.raises(SettingsError):
        SelfplaySettings(2, parallel_games=0)


def test_cli_parallel_games(tmp_path: Path, starts: Path) -> None:
    common = ["selfplay", "--starts", str(starts), "--games", "3", "--playouts", "8",
              "--max-ply", "16", "--seed", "3", "--json"]
    together = run_cli(*common, "-o", str(tmp_path / "a.hcpe"), "--parallel-games", "3")
    alone = run_cli(*common, "-o", str(tmp_path / "b.hcpe"))
    data = json.loads(together.stdout)
    assert data["games"] == 3 and data["network_batches"] > 0 and data["mean_batch"] >= 1
    assert "network_batches" not in json.loads(alone.stdout)
    assert (tmp_path / "a.hcpe").read_bytes() == (tmp_path / "b.hcpe").read_bytes()
    refused = run_cli(*common, "-o", str(tmp_path / "c.hcpe"), "--parallel-games", "2",
                      "--white", "alphabeta", expect=2)
    error = refused.stderr.splitlines()[-1]  # (after alphabeta's deprecation warning)
    assert error.startswith("bookgen: error: --parallel-games needs one mcts: player")
    assert not (tmp_path / "c.hcpe").exists()


# --------------------------------------------------------------------------
# device-dependent defaults


class FakeQuery:
    """The device query: a GPU for the runtimes in ``present``; records what it is asked."""

    def __init__(self) -> None:
        self.present: set[str] = set()
        self.asked: list[str] = []

    def __call__(self, runtime: str) -> bool:
        self.asked.append(runtime)
        return runtime in self.present


@pytest.fixture()
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeQuery:
    query = FakeQuery()
    monkeypatch.setattr(device, "gpu_present", query)
    return query


def test_network_defaults_follow_the_device(gpu: FakeQuery) -> None:
    cpu_batch, cpu_searches = (factory.DEFAULT_BATCH_SIZES["torch"],
                               factory.DEFAULT_PARALLEL_SEARCHES["torch"])
    assert factory.default_batch_size("torch:m.pt") == cpu_batch
    assert factory.default_parallel_searches("onnx:m.onnx") == cpu_searches
    assert factory.default_parallel_games("onnx:m.onnx") == 1
    gpu.present.add("torch")
    assert factory.default_device("torch:m.pt") == "cuda"
    assert factory.default_batch_size("torch:m.pt") == factory.GPU_BATCH_SIZE == 256
    assert factory.default_parallel_searches("torch:m.pt") == factory.GPU_PARALLEL_SEARCHES == 64
    assert factory.default_parallel_games("torch:m.pt") == 64
    assert factory.default_batch_size("blend:book.db:torch:m.pt") == 256  # its inner's
    # onnxruntime without its CUDA provider: the CPU defaults.
    assert factory.default_batch_size("onnx:m.onnx") == cpu_batch
    # --device cpu is the CPU without asking; cuda is a GPU (absent: the evaluator's error).
    asked = len(gpu.asked)
    assert factory.default_batch_size("torch:m.pt", {"device": "cpu"}) == cpu_batch
    gpu.present.clear()
    assert factory.default_batch_size("onnx:m.onnx", {"device": "cuda:1"}) == 256
    assert factory.default_parallel_searches("onnx:m.onnx", {"providers": "cpu"}) == cpu_searches
    assert len(gpu.asked) == asked
    # Other evaluators never ask.
    assert factory.default_batch_size("builtin") == 1
    assert factory.default_parallel_searches("usi:/usr/games/gpsusi") == 1
    assert len(gpu.asked) == asked


def test_the_device_query_here_finds_no_gpu() -> None:
    """This machine has no GPU: the real query says so for both runtimes."""
    assert not device.gpu_present("torch") and not device.gpu_present("onnx")
    assert factory.default_batch_size("torch:m.pt") == factory.DEFAULT_BATCH_SIZES["torch"]


def test_help_shows_the_defaults_by_device() -> None:
    for command, parallel in ((["grow"], "--parallel-searches"),
                              (["selfplay"], "--parallel-games")):
        text = " ".join(CliRunner().invoke(cli, [*command, "--help"]).stdout.split())
        assert "--batch-size" in text and parallel in text
        assert "auto: 16 on cpu, 256 on cuda for torch: and onnx:" in text
        cpu = 4 if command == ["grow"] else 1
        assert f"auto: {cpu} on cpu, 64 on cuda for torch: and onnx:" in text


def test_cli_defaults_on_a_gpu(gpu: FakeQuery, tmp_path: Path, model: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With the query finding a GPU, selfplay's defaults are the GPU's: the settings
    the library gets are read back (the run itself would fail without CUDA)."""
    import bookgen.selfplay.games as games

    seen: list[SelfplaySettings] = []

    def fake_selfplay(starts: object, output: object, settings: SelfplaySettings,
                      **_: object) -> object:
        seen.append(settings)
        raise games.BookgenError("stopped here")
    monkeypatch.setattr(games, "selfplay", fake_selfplay)
    (tmp_path / "s.txt").write_text("startpos\n")
    args = ["selfplay", "--starts", str(tmp_path / "s.txt"), "--games", "1", "-o",
            str(tmp_path / "o.hcpe"), "--player", f"torch:{model}"]
    CliRunner().invoke(cli, args)
    gpu.present.add("torch")
    CliRunner().invoke(cli, args)
    CliRunner().invoke(cli, [*args, "--batch-size", "32", "--parallel-games", "2"])
    (cpu, cuda, given) = seen
    assert (cpu.parallel_games, cpu.players.black.mcts.batch_size) == (1, 16)
    assert (cuda.parallel_games, cuda.players.black.mcts.batch_size) == (64, 256)
    assert dict(cuda.players.black.mcts.evaluator_options)["batch_size"] == 256
    assert (given.parallel_games, given.players.black.mcts.batch_size) == (2, 32)
