"""hcp / hcpe input files: every record is checked before cshogi sees it.

Records are made by cshogi (``Board.to_hcp``, ``move16``) from positions of
random games, then damaged: random bytes, truncated files, flipped bits. Runs
that may crash are in fresh processes: cshogi's ``set_hcp`` corrupts memory
on garbage, so a crash shows up as a signal (a negative return code), which
the tests never accept.
"""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.errors import BookgenError
from bookgen.formats.hcp import HCP, HCPE, InvalidRecord, check_hcp, decode_hcp, read_hcpe
from bookgen.position import parse_sfen
from conftest import PYTHON, ROOT, random_walk, run_script

# The first record of np.random.default_rng(29).integers(0, 256, (n, 32)) made
# the old start-file reader segfault (a king square beyond the board).
CRASHING_SEED = 29
ERROR_LINE = re.compile(r"bookgen: error: \S+: record \d+ \(byte \d+\): .+")


def game_positions(seed: int, count: int, max_plies: int = 250) -> list[cshogi.Board]:
    """Positions of random games, long ones too (many pieces in hand, promotions)."""
    rng = random.Random(seed)
    return [random_walk(rng, rng.randint(0, max_plies))[0] for _ in range(count)]


def hcp_records(boards: list[cshogi.Board]) -> np.ndarray:
    records = np.zeros(len(boards), HCP)
    for record, board in zip(records, boards):
        board.to_hcp(record["hcp"])
    return records


def hcpe_records(seed: int, count: int) -> np.ndarray:
    """Training records: a position, a legal move, an eval and a game result."""
    rng = random.Random(seed)
    records = np.zeros(count, HCPE)
    for record in records:
        while True:
            board, _ = random_walk(rng, rng.randint(0, 150))
            legal = list(board.legal_moves)
            if legal:
                break
        board.to_hcp(record["hcp"])
        record["bestMove16"] = cshogi.move16(rng.choice(legal))
        record["eval"] = rng.randint(-3000, 3000)
        record["gameResult"] = rng.choice([cshogi.DRAW, cshogi.BLACK_WIN, cshogi.WHITE_WIN])
    return records


def flip_bits(data: bytes, rng: random.Random, flips: int) -> bytes:
    buffer = bytearray(data)
    for _ in range(flips):
        bit = rng.randrange(len(buffer) * 8)
        buffer[bit // 8] ^= 1 << bit % 8
    return bytes(buffer)


def run_bookgen(*args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "bookgen.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))


# --------------------------------------------------------------------------
# the decoder


def test_decoder_reads_what_cshogi_writes():
    boards = game_positions(1, 300)
    decoded = decode_hcp(hcp_records(boards))
    assert decoded.problem == [None] * len(boards)
    for index, board in enumerate(boards):
        assert decoded.board[index].tolist() == list(board.pieces), board.sfen()
        assert decoded.hands[index].tolist() == [list(h) for h in board.pieces_in_hand]
        assert decoded.turn[index] == board.turn
    # every kind of piece in hand and on the board (promoted too), for both sides, was met
    assert (decoded.hands.max(axis=0) > 0).all()
    assert set(np.unique(decoded.board).tolist()) == {0, *range(1, 15), *range(17, 31)} - {
        cshogi.BGOLD + 8, cshogi.WGOLD + 8}
    assert len(check_hcp(hcp_records(boards))) == 0


def one_record(sfen: str) -> np.ndarray:
    return hcp_records([cshogi.Board(sfen)])


def reason(records: np.ndarray) -> str:
    with pytest.raises(InvalidRecord) as caught:
        check_hcp(records)
    return caught.value.reason


def test_each_rule_is_checked():
    start = one_record("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1")
    king = start.copy()
    king["hcp"][0, 0] |= 0xFE                      # black king on square 127
    assert reason(king) == "a king square is beyond the board"
    kings = start.copy()
    kings["hcp"][0, 0] = (kings["hcp"][0, 0] & 1) | 36 << 1   # black king onto white's square
    assert reason(kings) == "both kings on one square"
    knight = start.copy()
    knight["hcp"][0, 2] ^= 1 << 1                  # the lance on 1a (bit 17) becomes a knight
    assert reason(knight) == "5 pieces of kind N, at most 4 exist"
    hand = one_record("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/1PPPPPPPP/1B5R1/LNSGKGSNL b P 1")
    hand["hcp"][0, 31] ^= 0x40                     # hand pawn code 000 -> 010: no such code
    assert reason(hand) == "a piece in hand has an invalid code"
    assert reason(np.full((1, 32), 0xFF, np.uint8)).startswith("a king square")
    assert "nifu" in reason(one_record(
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/P8/PPPPPPPP1/1B5R1/LNSGKGSNL b - 1"))
    assert "cannot move" in reason(one_record(
        "lnsgkgsnP/1r5b1/ppppppppp/9/9/9/PPPPPPPP1/1B5R1/LNSGKGSNL b l 1"))
    assert reason(one_record("4k4/9/9/9/4R4/9/9/9/4K4 b R2B4G4S4N4L18P 1")) == \
        "the side not to move is in check"


def test_hcpe_moves_and_results_are_checked(tmp_path):
    records = hcpe_records(3, 4)
    path = tmp_path / "ok.hcpe"
    records.tofile(path)
    loaded, moves = read_hcpe(path)
    board = cshogi.Board()
    for record, move in zip(loaded, moves.tolist()):
        board.set_hcp(record["hcp"])
        assert move in board.legal_moves and cshogi.move16(move) == int(record["bestMove16"])

    def error(change) -> str:
        bad = records.copy()
        change(bad[2])
        bad.tofile(tmp_path / "bad.hcpe")
        with pytest.raises(BookgenError) as caught:
            read_hcpe(tmp_path / "bad.hcpe")
        message = str(caught.value)
        assert message.startswith(f"{tmp_path / 'bad.hcpe'}: record 2 (byte 76): "), message
        return message

    assert "gameResult 3 is not" in error(lambda r: r.__setitem__("gameResult", 3))
    assert "gameResult -1 is not" in error(lambda r: r.__setitem__("gameResult", -1))
    assert "is not a move" in error(lambda r: r.__setitem__("bestMove16", -1))
    assert "is not a move" in error(lambda r: r.__setitem__("bestMove16", 81 | 81 << 7))

    def from_empty_square(record: np.ndarray) -> None:
        board = cshogi.Board()
        board.set_hcp(record["hcp"])
        empty = [square for square, piece in enumerate(board.pieces) if piece == 0]
        record["bestMove16"] = empty[1] | empty[0] << 7

    assert "not legal in this position" in error(from_empty_square)


def test_file_sizes(tmp_path):
    (tmp_path / "odd.hcpe").write_bytes(hcpe_records(4, 2).tobytes()[:-5])
    with pytest.raises(BookgenError, match=r"71 bytes is not a whole number of 38-byte hcpe "
                                           r"records \(1 record and 33 bytes more"):
        read_hcpe(tmp_path / "odd.hcpe")
    (tmp_path / "empty.hcpe").write_bytes(b"")
    records, moves = read_hcpe(tmp_path / "empty.hcpe")
    assert len(records) == len(moves) == 0


def test_a_start_position_needs_a_legal_move(tmp_path):
    from bookgen.formats.positions import read_starts

    rng = random.Random(13)
    while True:                      # a random game until a mate
        board, _ = random_walk(rng, 400)
        if board.is_game_over():
            break
    hcp_records([cshogi.Board(), board]).tofile(tmp_path / "mate.hcp")
    with pytest.raises(BookgenError, match=r"mate.hcp: record 1: the side to move has no "
                                           r"legal move"):
        read_starts(tmp_path / "mate.hcp")


# --------------------------------------------------------------------------
# fuzzing


FUZZ_DRIVER = r"""
import random, sys
import numpy as np, cshogi
from bookgen.errors import BookgenError
from bookgen.formats.positions import read_starts
from bookgen.selfplay.train import load_hcpe

directory = sys.argv[1]
hcp = np.fromfile(directory + "/valid.hcp", cshogi.HuffmanCodedPos).tobytes()
hcpe = np.fromfile(directory + "/valid.hcpe", cshogi.HuffmanCodedPosAndEval).tobytes()
rng = random.Random(7)
outcomes = {"rejected": 0, "accepted": 0}

def attempt(name, data, read):
    path = f"{directory}/{name}"
    with open(path, "wb") as handle:
        handle.write(data)
    try:
        read(path)
    except BookgenError as error:
        assert str(error).startswith(path + ": "), error
        outcomes["rejected"] += 1
    else:
        outcomes["accepted"] += 1

for seed in range(64):
    # random bytes: a few records, the first one (where the old reader stopped) varying
    garbage = np.random.default_rng(seed).integers(0, 256, (4, 32), dtype=np.uint8)
    attempt("random.hcp", garbage.tobytes(), read_starts)
    attempt("random.hcpe", np.random.default_rng(seed).integers(
        0, 256, 38 * 64, dtype=np.uint8).tobytes(), lambda p: load_hcpe([p]))
for trial in range(400):
    for name, data, size, read in (("flip.hcp", hcp, 32, read_starts),
                                   ("flip.hcpe", hcpe, 38, lambda p: load_hcpe([p]))):
        record = rng.randrange(len(data) // size)
        one = bytearray(data[record * size:(record + 1) * size])
        for _ in range(rng.choice([1, 1, 2, 3])):
            bit = rng.randrange(size * 8)
            one[bit // 8] ^= 1 << bit % 8
        attempt(name, bytes(one), read)
for cut in (1, 5, 31, 33, 37, 39, 70):
    attempt("cut.hcp", hcp[:cut], read_starts)
    attempt("cut.hcpe", hcpe[:cut], lambda p: load_hcpe([p]))
print(outcomes["rejected"], outcomes["accepted"])
"""


def test_fuzzed_files_are_refused_without_crashing(tmp_path):
    """Thousands of damaged files through the readers, in one fresh process that
    must exit normally; every damaged record the readers accept is a position
    that cshogi and the sfen checks agree on."""
    hcp_records(game_positions(5, 40)).tofile(tmp_path / "valid.hcp")
    hcpe_records(6, 40).tofile(tmp_path / "valid.hcpe")
    proc = run_script(tmp_path, FUZZ_DRIVER, tmp_path, timeout=240)
    rejected, accepted = map(int, proc.stdout.split())
    assert rejected > 700 and accepted > 50, proc.stdout


def test_accepted_mutations_are_real_positions():
    """A bit flip that still gives a valid record: cshogi decodes it to the
    position we decoded, and that position passes the sfen checks."""
    rng = random.Random(8)
    records = hcp_records(game_positions(9, 40))
    accepted = 0
    for _ in range(1500):
        record = records[rng.randrange(len(records))].copy()
        record["hcp"] = np.frombuffer(flip_bits(record["hcp"].tobytes(), rng, 1), np.uint8)
        decoded = decode_hcp(record["hcp"].reshape(1, 32))
        if decoded.problem[0] is not None:
            continue
        try:
            check_hcp(record["hcp"].reshape(1, 32))
        except InvalidRecord:
            continue
        board = cshogi.Board()
        board.set_hcp(record["hcp"])
        assert list(board.pieces) == decoded.board[0].tolist()
        assert [list(h) for h in board.pieces_in_hand] == decoded.hands[0].tolist()
        parse_sfen(board.sfen())
        accepted += 1
    assert accepted > 50


def check_cli_outcome(proc: subprocess.CompletedProcess, output: Path, source: Path) -> int:
    """Exit 2 with one error line naming the file and nothing written, or 0."""
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr[-2000:])
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(source) in lines[0], proc.stderr
        assert not output.exists()
    else:
        assert output.exists()
    return proc.returncode


def test_selfplay_cli_on_damaged_start_files(tmp_path):
    valid = hcp_records(game_positions(10, 6, max_plies=60))
    rng = random.Random(11)
    cases = {
        "random.hcp": np.random.default_rng(CRASHING_SEED).integers(
            0, 256, (3, 32), dtype=np.uint8).tobytes(),
        "cut.hcp": valid.tobytes()[:-7],
        **{f"flip{i}.hcp": flip_bits(valid.tobytes(), rng, 3) for i in range(5)},
        "valid.hcp": valid.tobytes(),
    }
    codes, errors = {}, {}
    for name, data in cases.items():
        source, output = tmp_path / name, tmp_path / f"{name}.hcpe"
        source.write_bytes(data)
        proc = run_bookgen("selfplay", "--starts", source, "--games", 1, "-o", output,
                           "--playouts", 1, "--max-ply", 4, "--csa", tmp_path / f"{name}.csa")
        codes[name] = check_cli_outcome(proc, output, source)
        errors[name] = proc.stderr.strip()
        if codes[name] == 2:
            assert not (tmp_path / f"{name}.csa").exists()
            if name != "cut.hcp":
                assert ERROR_LINE.fullmatch(errors[name]), errors[name]
    assert codes["random.hcp"] == codes["cut.hcp"] == 2 and codes["valid.hcp"] == 0
    assert "random.hcp: record 0 (byte 0): a king square is beyond the board" in \
        errors["random.hcp"]
    assert "185 bytes is not a whole number of 32-byte hcp records" in errors["cut.hcp"]


def test_train_cli_on_damaged_data(tmp_path):
    valid = hcpe_records(12, 64)
    broken = valid.copy()
    broken["hcp"][40] = np.random.default_rng(CRASHING_SEED).integers(0, 256, 32, np.uint8)
    harmless = valid.copy()
    harmless["eval"][5] ^= 0x100                   # another eval: still a valid record
    cases = {
        "random.hcpe": np.random.default_rng(1).integers(
            0, 256, 38 * 10000, dtype=np.uint8).tobytes(),
        "broken.hcpe": broken.tobytes(),
        "cut.hcpe": valid.tobytes()[:-1],
        "harmless.hcpe": harmless.tobytes(),
    }
    codes, errors = {}, {}
    for name, data in cases.items():
        source, output = tmp_path / name, tmp_path / f"{name}.pt"
        source.write_bytes(data)
        proc = run_bookgen("train", "--data", source, "-o", output, "--blocks", 1,
                           "--channels", 8, "--batch-size", 64, "--threads", 1)
        codes[name] = check_cli_outcome(proc, output, source)
        errors[name] = proc.stderr.strip()
    assert codes == {"random.hcpe": 2, "broken.hcpe": 2, "cut.hcpe": 2, "harmless.hcpe": 0}
    assert ERROR_LINE.fullmatch(errors["random.hcpe"])
    assert "broken.hcpe: record 40 (byte 1520): a king square is beyond the board" in \
        errors["broken.hcpe"]
