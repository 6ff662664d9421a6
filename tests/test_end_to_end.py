"""The whole loop through the CLI: grow -> refine search -> mistakes -> starts ->
selfplay -> train, with the built-in evaluator and a tiny network."""

from __future__ import annotations

import json

import cshogi
import numpy as np
import pytest

from conftest import run_cli


@pytest.mark.timeout(600)  # over 20 s on a loaded 2-core machine, fixtures included
def test_book_to_training_loop(tmp_path):
    book = tmp_path / "book.sqlite"
    run_cli("grow", "-b", book, "--playouts", "24", "--positions", "12", "--seed", "1")
    run_cli("refine", "search", "-b", book, "--engine", "builtin", "--depth", "2")
    # Zero thresholds: any disagreement of sign counts, so the loop has positions.
    result = run_cli("refine", "mistakes", "-b", book, "--threshold", "0", "--diff", "0",
                     "--json")
    assert "mistakes" in json.loads(result.stdout)
    starts = tmp_path / "starts.txt"
    run_cli("starts", "-b", book, "-o", starts, "--max-ply", "6")
    assert starts.read_text().startswith("startpos")
    data = tmp_path / "games.hcpe"
    run_cli("selfplay", "--starts", starts, "--games", "3", "-o", data, "--playouts", "8",
            "--max-ply", "40", "--seed", "1")
    records = np.fromfile(data, dtype=cshogi.HuffmanCodedPosAndEval)
    assert len(records) > 20
    board = cshogi.Board()
    for index in range(len(records)):
        board.set_hcp(records[index:index + 1]["hcp"])
        move = board.move_from_move16(int(records[index]["bestMove16"]) & 0xFFFF)
        assert move in set(board.legal_moves)
    model = tmp_path / "model.pt"
    summary = json.loads(run_cli(
        "train", "--data", data, "-o", model, "--blocks", "1", "--channels", "8",
        "--epochs", "4", "--lr", "0.05", "--val-split", "0.1", "--json").stdout)
    assert model.exists()
    before, after = summary["initial_train"], summary["final_train"]
    assert after["policy_loss"] + after["value_loss"] < before["policy_loss"] + before["value_loss"]
    grown = tmp_path / "again.sqlite"
    run_cli("grow", "-b", grown, "--evaluator", f"torch:{model}", "--playouts", "16",
            "--positions", "3")
