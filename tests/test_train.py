"""Training (bookgen.selfplay.train): targets from hcpe records, loss going down, model files.

The data comes from short self-play games with the built-in evaluator; the
network is tiny (1 block x 8 channels) so that training runs in seconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import cshogi
import numpy as np
import pytest
from click.testing import CliRunner
from cshogi import dlshogi

from bookgen.cli.curriculum import train_command
from bookgen.cli.support import error_text
from bookgen.engines.factory import make_evaluator
from bookgen.engines.network.model import load_model
from bookgen.engines.player_settings import RandomOpening
from bookgen.errors import BookgenError, SettingsError
from bookgen.play.loop import GameRules
from bookgen.selfplay.games import (
    SelfplayPlayers,
    SelfplaySettings,
    selfplay,
    selfplay_player,
)
from bookgen.selfplay.train import TrainSettings, evaluate, load_hcpe, train

HCPE = cshogi.HuffmanCodedPosAndEval
TINY = dict(blocks=1, channels=8, threads=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    starts = tmp / "starts.txt"
    starts.write_text("startpos\nstartpos moves 7g7f 3c3d\nstartpos moves 2g2f 8c8d\n")
    def players(random_moves: int) -> SelfplayPlayers:
        return SelfplayPlayers.both(selfplay_player(
            "mcts:builtin", playouts=2, opening=RandomOpening(random_moves=random_moves)))

    summary = selfplay(starts, tmp / "data.hcpe", SelfplaySettings(
        6, players=players(30), rules=GameRules(max_ply=80), seed=2), progress=False)
    selfplay(starts, tmp / "eval.hcpe", SelfplaySettings(
        1, players=players(40), rules=GameRules(max_ply=40), seed=9), progress=False)
    assert summary.positions >= 300
    return tmp


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
def test_training_lowers_the_loss_and_saves_a_loadable_model(data):
    output = data / "model.pt"
    settings = TrainSettings(epochs=4, batch_size=32, learning_rate=0.02,
                             eval_on=(data / "eval.hcpe",), **TINY)
    summary = train([data / "data.hcpe"], output, settings, progress=False)
    assert summary.initial_train is not None and summary.final_train is not None
    assert summary.final_train.loss < summary.initial_train.loss
    assert summary.final_train.policy_loss < summary.initial_train.policy_loss
    assert len(summary.epochs) == 4
    assert summary.epochs[-1].train_loss < summary.epochs[0].train_loss
    assert summary.validation_records == round(0.1 * (summary.train_records +
                                                      summary.validation_records))
    assert all(e.validation is not None and e.validation.samples == summary.validation_records
               for e in summary.epochs)
    assert summary.eval_on_before is not None and summary.eval_on_after is not None
    assert summary.eval_on_after.samples == len(np.fromfile(data / "eval.hcpe", HCPE))
    assert summary.samples_trained == 4 * summary.train_records
    assert summary.samples_per_second > 0
    model = load_model(output)
    assert (model.blocks_count, model.channels) == (1, 8)
    with make_evaluator(f"torch:{output}") as evaluator:
        board = cshogi.Board()
        board.push_usi("7g7f")
        [evaluation] = evaluator.evaluate([board])
        assert len(evaluation.moves) == len(list(board.legal_moves))
        assert math.isclose(sum(evaluation.priors), 1.0, rel_tol=1e-4)
        assert 0.0 < evaluation.value < 1.0
    # The saved weights are the trained ones.
    again = evaluate(load_model(output), load_hcpe([data / "data.hcpe"]), batch_size=64)
    assert again.loss < summary.initial_train.loss


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
def test_continue_from_a_model(data):
    first = data / "first.pt"
    train([data / "data.hcpe"], first, TrainSettings(batch_size=64, **TINY), progress=False)
    before = evaluate(load_model(first), load_hcpe([data / "data.hcpe"]))
    summary = train([data / "data.hcpe"], first,
                    TrainSettings(init=first, epochs=2, batch_size=64, threads=1),
                    progress=False)
    assert (summary.blocks, summary.channels) == (1, 8)
    assert summary.initial_train is not None
    assert math.isclose(summary.initial_train.loss, before.loss, rel_tol=0.05)
    with pytest.raises(SettingsError, match="^channels 16 does not match") as caught:
        train([data / "data.hcpe"], data / "other.pt", TrainSettings(init=first, channels=16),
              progress=False)
    assert error_text(caught.value).startswith("--channels 16 does not match")
    with pytest.raises(SettingsError, match="already exists") as caught:  # only init may be
        train([data / "data.hcpe"], first, TrainSettings(**TINY), progress=False)  # replaced
    assert error_text(caught.value) == f"{first}: already exists (use --force to replace it)"


@pytest.mark.parametrize("fields, cli_text", [
    ({"epochs": 0}, "--epochs must be at least 1"),
    ({"batch_size": 0}, "--batch-size must be at least 1"),
    ({"learning_rate": 0}, "--lr must be positive"),
    ({"result_share_of_value_target": 1.5}, "--alpha must be between 0 and 1"),
    ({"validation_share": 1.0}, "--val-split must be at least 0 and below 1"),
])
def test_bad_settings_name_the_field_and_the_cli_the_flag(fields, cli_text):
    with pytest.raises(SettingsError) as caught:
        TrainSettings(**fields)
    assert str(caught.value).startswith(next(iter(fields)) + " ")
    assert error_text(caught.value) == cli_text
    with pytest.raises(BookgenError, match=r"^unknown optimizer 'lbfgs' \(use sgd or adam\)$"):
        TrainSettings(optimizer="lbfgs")
    assert TrainSettings(eval_on=["a.hcpe"]).eval_on == (Path("a.hcpe"),)  # type: ignore[arg-type]


def test_targets_follow_dlshogi_conventions(tmp_path):
    board = cshogi.Board()
    board.push_usi("7g7f")  # white to move
    records = np.zeros(3, HCPE)
    for record, result, evaluation in zip(records, (cshogi.BLACK_WIN, cshogi.WHITE_WIN,
                                                    cshogi.DRAW), (756, -756, 0)):
        board.to_hcp(record["hcp"])
        record["bestMove16"] = cshogi.move16(board.move_from_usi("3c3d"))
        record["gameResult"] = result
        record["eval"] = evaluation
    path = tmp_path / "t.hcpe"
    records.tofile(path)
    dataset = load_hcpe([path])
    assert len(dataset) == 3
    # gameResult is the game's result: for white to move a black win is a loss.
    assert dataset.results.tolist() == [0.0, 1.0, 0.5]
    assert np.allclose(dataset.values, [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1)), 0.5])
    assert np.allclose(dataset.targets(0.5), 0.5 * dataset.results + 0.5 * dataset.values)
    expected = dlshogi.make_move_label(board.move_from_usi("3c3d"), cshogi.WHITE)
    assert dataset.labels.tolist() == [expected] * 3
    (tmp_path / "odd.hcpe").write_bytes(b"\x00" * 39)
    with pytest.raises(BookgenError, match="whole number"):
        load_hcpe([tmp_path / "odd.hcpe"])


def test_cli(data):
    @click.group()
    def cli() -> None:
        pass

    cli.add_command(train_command)
    runner = CliRunner()
    output = data / "cli.pt"
    result = runner.invoke(cli, ["train", "--data", str(data / "data.hcpe"),
                                 str(data / "eval.hcpe"), "-o", str(output), "--blocks", "1",
                                 "--channels", "8", "--batch-size", "64", "--threads", "1",
                                 "--val-split", "0", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["validation_records"] == 0 and summary["epochs"][0]["validation"] is None
    total = len(np.fromfile(data / "data.hcpe", HCPE)) + len(np.fromfile(data / "eval.hcpe",
                                                                         HCPE))
    assert summary["train_records"] == total
    assert load_model(output).channels == 8
    result = runner.invoke(cli, ["train", "-o", str(data / "none.pt")])
    assert result.exit_code == 2 and "no training data" in result.output
