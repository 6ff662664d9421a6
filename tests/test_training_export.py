"""export --format policy (YaneuraOu POLICY-DB2024) and --format hcpe (training targets)."""

from __future__ import annotations

import math

import cshogi
import numpy as np
import pytest

from conftest import run_cli

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"
# After 7g7f 3c3d 8h2b+ is legal, and so is its non-promotion 8h2b.
CAPTURE = "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3"


@pytest.fixture()
def book(tmp_path):
    source = tmp_path / "in.db"
    source.write_text(
        "#YANEURAOU-DB2016 1.00\n"
        f"sfen {START} 1\n7g7f none 100 10 30\n2g2f none 40 10 10\n6i7h none -20 10 100000\n"
        f"sfen {CAPTURE}\n8h2b+ none 300 5 7\n8h2b none 250 5 3\n")
    path = tmp_path / "book.sqlite"
    assert run_cli("import", source, "-b", path).exit_code == 0
    return path


def test_policy_book(book, tmp_path):
    out = tmp_path / "policy.db"
    run_cli("export", "-b", book, "-o", out, "--format", "policy")
    lines = out.read_text().splitlines()
    assert lines[0] == "#YANEURAOU-POLICY-DB2024 1.01"
    entries = dict(zip(lines[1::2], lines[2::2]))
    start = entries[f"{START} 1"].split()
    # Counts halved until their sum fits in 16 bits, order by count kept.
    moves = start[0:6:2]
    counts = [int(c) for c in start[1:6:2]]
    assert moves == ["6i7h", "7g7f", "2g2f"]
    assert sum(counts) <= 65534 and counts[0] > counts[1] > counts[2]
    assert counts[1] / counts[2] == pytest.approx(3, rel=0.05)
    assert start[6] == "value"
    assert float(start[7]) == pytest.approx(1 / (1 + math.exp(-100 / 756)), abs=1e-4)
    capture = entries[CAPTURE].split()
    assert capture[:2] == ["8h2b+", "7"] and "8h2b" not in capture  # needless non-promotion


def test_training_targets(book, tmp_path):
    out = tmp_path / "book.hcpe"
    run_cli("export", "-b", book, "-o", out, "--format", "hcpe", "--temperature", "50")
    records = np.fromfile(out, dtype=cshogi.HuffmanCodedPosAndEval)
    policy = np.load(tmp_path / "book.hcpe.policy.npy")
    assert len(records) == 2 and len(policy) == 5
    board = cshogi.Board()
    by_sfen = {}
    for index in range(len(records)):
        board.set_hcp(records[index:index + 1]["hcp"])
        by_sfen[board.sfen().rsplit(" ", 1)[0]] = index
        rows = policy[policy["record"] == index]
        assert rows["probability"].sum() == pytest.approx(1.0, abs=1e-6)
        best = board.move_from_move16(int(records[index]["bestMove16"]))
        assert best in set(board.legal_moves)
    start = by_sfen[START]
    assert records[start]["eval"] == 100
    board.set_sfen(START + " 1")
    assert cshogi.move_to_usi(board.move_from_move16(int(records[start]["bestMove16"]))) == "7g7f"
    rows = policy[policy["record"] == start]
    values = {cshogi.move_to_usi(board.move_from_move16(int(r["move16"]))): r for r in rows}
    beta = 1000 / 50
    weights = {m: math.exp((v - 100) * beta / 754.3) for m, v in
               (("7g7f", 100), ("2g2f", 40), ("6i7h", -20))}
    total = sum(weights.values())
    for move, weight in weights.items():
        assert values[move]["probability"] == pytest.approx(weight / total, rel=1e-5)
        assert values[move]["count"] == int(65535 * values[move]["probability"])
